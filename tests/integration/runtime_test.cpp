// The lab runtime end to end: a Coordinator in this process, real allreduce-worker processes,
// real ZeroMQ sockets on loopback. Covers every algorithm and collective on 2-4 ranks, failure
// of a worker (killed, stopped) mid-run, a worker started by hand, garbage on the control port
// and a corrupted data-plane header.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../runtime/event_client.h"
#include "base/clock.h"
#include "base/errors.h"
#include "export/export.h"
#include "local_workers.h"
#include "runtime/coordinator.h"
#include "runtime/fault_injection.h"
#include "runtime/process.h"
#include "runtime/protocol.h"
#include "schedule/generators.h"

namespace arl {
namespace {

using test::localOptions;
using test::waitForWorkers;

using Clock = SteadyClock;
using std::chrono::milliseconds;

// Processes whose parent is this test process and whose command is allreduce-worker.
std::vector<int64_t> workerChildren() {
  std::vector<int64_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  const pid_t self = ::getpid();
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in("/proc/" + name + "/stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    const auto open = line.find('(');
    const auto close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    const std::string comm = line.substr(open + 1, close - open - 1);
    // Fields after the command: state, ppid, ...
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == self && comm.rfind("allreduce-work", 0) == 0) out.push_back(std::stoll(name));
  }
  ::closedir(d);
  return out;
}

RunRequest smallRequest(const std::string& algo, Collective c) {
  RunRequest r;
  r.algorithm = algo;
  r.collective = c;
  r.count = 1037;  // odd, and not a multiple of any rank count used here
  r.sliceBytes = 256;
  r.warmup = 1;
  r.iterations = 2;
  r.check = 1;
  r.telemetry = TelemetryLevel::Chunks;
  return r;
}

using test::EventClient;

void expectNoWorkerChildren(const std::vector<int64_t>& pids) {
  EXPECT_TRUE(workerChildren().empty()) << "allreduce-worker children remain";
  for (int64_t pid : pids) EXPECT_FALSE(processAlive(pid)) << "worker pid " << pid << " alive";
}

std::vector<int64_t> pidsOf(const std::vector<WorkerInfo>& ws) {
  std::vector<int64_t> out;
  for (const auto& w : ws) out.push_back(w.pid);
  return out;
}

int64_t pidOfRank(const Coordinator& c, int rank) {
  for (const auto& w : c.workers())
    if (w.rank == rank) return w.pid;
  return 0;
}

// Names in /dev/shm of data-plane segments created by one of `pids`.
std::vector<std::string> shmSegmentsOf(const std::vector<int64_t>& pids) {
  std::vector<std::string> found;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return found;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    for (int64_t pid : pids) {
      if (name.rfind("arl-dp-" + std::to_string(pid) + "-", 0) == 0) found.push_back(name);
    }
  }
  ::closedir(d);
  return found;
}

// ---- Every algorithm and collective, exact results -------------------------------------------

class RuntimeSweep : public ::testing::TestWithParam<std::tuple<int, DataPlaneKind>> {};

TEST_P(RuntimeSweep, EveryAlgorithmAndCollectiveIsExact) {
  const int n = std::get<0>(GetParam());
  const DataPlaneKind plane = std::get<1>(GetParam());
  std::vector<int64_t> pids;
  {
    Coordinator coord(localOptions(n));
    EventClient client(coord);
    ASSERT_TRUE(client.waitJoined(static_cast<size_t>(n)));
    ASSERT_EQ(coord.workers().size(), static_cast<size_t>(n));
    pids = pidsOf(coord.workers());
    const DataType dtypes[] = {DataType::Float, DataType::Int32, DataType::Double, DataType::Half,
                               DataType::BFloat16};
    const RedOp ops[] = {RedOp::Sum, RedOp::Max, RedOp::Prod, RedOp::Min, RedOp::Avg};
    int k = 0;
    for (const std::string& algo : algorithmNames()) {
      for (Collective c : kAllCollectives) {
        if (!algorithmSupports(algo, c) || !workerCountRefusal(algo, n).empty()) continue;
        RunRequest req = smallRequest(algo, c);
        req.dtype = dtypes[k % 5];
        req.op = ops[(k / 2) % 5];
        req.inPlace = k % 3 == 1;
        // The last rank that holds a result (a switch run's last worker plays the switch).
        req.root = n - 1 - helperWorkers(algo);
        req.dataPlane = plane;
        ++k;
        const RunResult res = client.run(req);
        SCOPED_TRACE(algo + " " + std::string(toString(c)) + " " +
                     std::string(toString(req.dtype)) + " " + std::string(toString(req.op)) +
                     (req.inPlace ? " in place" : "") + " on " + std::to_string(n) + " ranks");
        ASSERT_EQ(res.state, RunState::Done) << res.error;
        EXPECT_EQ(res.nranks, n);
        EXPECT_EQ(res.wrong, 0u);
        EXPECT_EQ(res.iterationUs.size(), 2u);
        EXPECT_GT(res.timeUs, 0.0);
        EXPECT_EQ(res.perRank.size(), static_cast<size_t>(2 * n));
        EXPECT_FALSE(res.events.empty());
        EXPECT_TRUE(res.error.empty());
        for (size_t i = 1; i < res.events.size(); ++i) {
          ASSERT_LE(res.events[i - 1].tNs, res.events[i].tNs);
        }
      }
    }
    EXPECT_GE(k, 15);
    // Every worker removed its segment's name once its peers had mapped it.
    EXPECT_TRUE(shmSegmentsOf(pids).empty()) << shmSegmentsOf(pids).front();
  }
  expectNoWorkerChildren(pids);
}

INSTANTIATE_TEST_SUITE_P(Ranks, RuntimeSweep,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values(DataPlaneKind::Shm,
                                                              DataPlaneKind::Zmq,
                                                              DataPlaneKind::Tcp)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" +
                                  std::string(toString(std::get<1>(info.param)));
                         });

TEST(Runtime, HierarchicalOnTwoGroupsOfOneHost) {
  Coordinator coord(localOptions(4));
  RunRequest req = smallRequest("hierarchical", Collective::AllReduce);
  req.ranksPerHost = 2;
  const RunResult res = coord.run(req);
  ASSERT_EQ(res.state, RunState::Done) << res.error;
  EXPECT_EQ(res.wrong, 0u);
}

// What each rank's telemetry says it sent (RunResult::sent) is counted as the batches arrive,
// before the run's bound on events drops any: past the bound it is still every rank's, and it
// is the schedule's count, by the iteration and send by send alike.
TEST(Runtime, EachRanksBytesSentAreCountedPastTheEventBound) {
  Coordinator coord(localOptions(4));
  RunRequest req = smallRequest("ring", Collective::AllReduce);
  req.maxEvents = 10;
  const RunResult res = coord.run(req);
  ASSERT_EQ(res.state, RunState::Done) << res.error;
  EXPECT_GT(res.telemetry.droppedOverLimit, 0u);
  ASSERT_EQ(res.sent.size(), 4u);
  ASSERT_EQ(res.effective.bytesSent.size(), 4u);
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_EQ(res.sent[r].iterations, 2u) << "rank " << r;
    EXPECT_EQ(res.sent[r].bytes, res.effective.bytesSent[r]) << "rank " << r;
    EXPECT_EQ(res.sent[r].sendEndBytes, 2 * res.sent[r].bytes) << "rank " << r;
  }
}

// ---- The ring order, end to end ----------------------------------------------------------------

// With ring 0,2,1,3 every send goes to the next rank in that order: the trace's flow arrows
// say so, the results stay exact, and the exports carry the order the run resolved to.
TEST(Runtime, RingOrderChangesWhoSendsToWhomInTheTrace) {
  Coordinator coord(localOptions(4));
  RunRequest req = smallRequest("ring", Collective::AllReduce);
  req.count = 4096;
  req.sliceBytes = 1024;
  req.ringOrder = {0, 2, 1, 3};
  const RunResult res = coord.run(req);
  ASSERT_EQ(res.state, RunState::Done) << res.error;
  EXPECT_EQ(res.wrong, 0u);

  BenchReport rep;
  rep.config.ringOrder = req.ringOrder;
  rep.workers = res.workers;
  BenchRow row;
  row.count = req.count;
  row.sizeBytes = req.count * 4;
  row.result = res;
  rep.rows.push_back(row);
  TraceStats st;
  const auto trace = nlohmann::json::parse(chromeTraceJson(rep, &st));
  EXPECT_EQ(st.unmatchedSends, 0u);
  EXPECT_EQ(st.unmatchedRecvs, 0u);
  std::map<int64_t, int64_t> from, to;  // bind_id -> process (rank + 1)
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || !e.contains("bind_id")) continue;
    (e.contains("flow_out") ? from : to)[e.at("bind_id").get<int64_t>()] =
        e.at("pid").get<int64_t>();
  }
  std::set<std::pair<int64_t, int64_t>> pairs;
  for (const auto& [id, pid] : from) {
    if (to.count(id)) pairs.insert({pid - 1, to.at(id) - 1});
  }
  const std::set<std::pair<int64_t, int64_t>> ring = {{0, 2}, {2, 1}, {1, 3}, {3, 0}};
  EXPECT_EQ(pairs, ring);

  const auto results = nlohmann::json::parse(benchResultsJson(rep));
  EXPECT_EQ(results.at("results").at(0).at("effective").at("ring_order"),
            nlohmann::json({0, 2, 1, 3}));
  const BenchReport back = parseRecording(recordingJson(rep));
  ASSERT_EQ(back.rows.size(), 1u);
  EXPECT_EQ(back.rows[0].result.effective.ringOrder, req.ringOrder);
  EXPECT_EQ(back.rows[0].result.effective.steps, res.effective.steps);
}

// ---- Refusals before any worker is touched ---------------------------------------------------

TEST(Runtime, BadRequestsAreRefusedBeforeWorkersAreTouched) {
  Coordinator coord(localOptions(2));
  EventClient client(coord);
  ASSERT_TRUE(client.waitJoined(2));
  struct Bad {
    RunRequest req;
    const char* words;
  };
  std::vector<Bad> bad;
  bad.push_back({smallRequest("spiral", Collective::AllReduce), "spiral"});
  bad.push_back({smallRequest("ring", Collective::AllReduce), "slice size"});
  bad.back().req.sliceBytes = 0;
  bad.push_back({smallRequest("halving-doubling", Collective::Broadcast), "broadcast"});
  bad.push_back({smallRequest("ring", Collective::AllReduce), "iterations"});
  bad.back().req.iterations = 0;
  bad.push_back({smallRequest("tree", Collective::Reduce), "root"});
  bad.back().req.root = 5;
  for (const Bad& b : bad) {
    const uint64_t id = coord.submit(b.req);
    const auto res = client.waitResult(id);
    ASSERT_TRUE(res.has_value());
    EXPECT_EQ(res->state, RunState::Refused) << b.words;
    EXPECT_NE(res->error.find(b.words), std::string::npos) << res->error;
    EXPECT_TRUE(client.record(id).states.empty()) << "a refused request reached the workers";
  }
  // The session is intact.
  const RunResult ok = client.run(smallRequest("ring", Collective::AllReduce));
  EXPECT_EQ(ok.state, RunState::Done) << ok.error;
  EXPECT_EQ(ok.wrong, 0u);
}

TEST(Runtime, RunRightAfterConstructionWaitsForTheLocalWorkers) {
  Coordinator coord(localOptions(3));
  const RunResult res = coord.run(smallRequest("ring", Collective::AllReduce));
  ASSERT_EQ(res.state, RunState::Done) << res.error;
  EXPECT_EQ(res.nranks, 3);
  EXPECT_EQ(res.wrong, 0u);
}

TEST(Runtime, MissingWorkerBinaryIsAConfigError) {
  CoordinatorOptions o = localOptions(1);
  o.workerBinary = "/nonexistent/allreduce-worker";
  EXPECT_THROW(Coordinator c(o), ConfigError);
}

// The ZeroMQ ipc socket directories of `pid` in `tmp` ("arl-dp-<pid namespace>-<pid>-XXXXXX").
std::vector<std::string> ipcDirsOf(const std::string& tmp, int64_t pid) {
  std::vector<std::string> found;
  DIR* d = ::opendir(tmp.c_str());
  if (d == nullptr) return found;
  const std::string tail = "-" + std::to_string(pid) + "-";
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("arl-dp-", 0) != 0) continue;
    const auto dash = name.find('-', 7);
    if (dash != std::string::npos && name.compare(dash, tail.size(), tail) == 0) {
      found.push_back(name);
    }
  }
  ::closedir(d);
  return found;
}

// Points the temporary folder of the workers started meanwhile at a fresh directory of
// their own, so that no other test's bind sweeps (or leaves) anything in it.
class PrivateTmpDir {
 public:
  PrivateTmpDir() {
    std::string templ = "/tmp/arl-test-XXXXXX";
    if (::mkdtemp(templ.data()) != nullptr) path_ = templ;
    if (const char* old = std::getenv("TMPDIR")) old_ = old;
    if (!path_.empty()) ::setenv("TMPDIR", path_.c_str(), 1);
  }
  ~PrivateTmpDir() {
    if (old_) {
      ::setenv("TMPDIR", old_->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::optional<std::string> old_;
};

// ---- Failures mid-run ------------------------------------------------------------------------

// A run long enough to be interrupted: 4 MiB per rank, many iterations.
RunRequest longRequest() {
  RunRequest r;
  r.algorithm = "ring";
  r.count = 1 << 20;
  r.sliceBytes = 256 << 10;
  r.warmup = 1;
  r.iterations = 100000;
  r.check = 0;
  r.telemetry = TelemetryLevel::Steps;
  return r;
}

struct FailureCase {
  int signal;
  int rank;
  const char* words;  // what the error must say besides the rank
  DataPlaneKind plane;
};

void PrintTo(const FailureCase& c, std::ostream* os) {
  *os << "signal " << c.signal << " on rank " << c.rank << " over " << toString(c.plane);
}

class RuntimeFailure : public ::testing::TestWithParam<FailureCase> {};

// The run ends within 3 s of the signal (the design gives about 0.01 s for a death and 1.0 s
// of silence plus one heartbeat for a stop; 3 s leaves room for a loaded 2-core machine),
// with an error that names the rank, the step and the reason; the worker is gone, a
// replacement joins, and the next run is exact.
TEST_P(RuntimeFailure, WorkerLostMidRunEndsTheRunAndTheNextRunWorks) {
  const FailureCase fc = GetParam();
  PrivateTmpDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  std::vector<int64_t> pids;
  {
    Coordinator coord(localOptions(4));
    EventClient client(coord);
    ASSERT_TRUE(client.waitJoined(4));
    pids = pidsOf(coord.workers());
    const int64_t victim = pidOfRank(coord, fc.rank);
    ASSERT_GT(victim, 0);

    RunRequest req = longRequest();
    req.dataPlane = fc.plane;
    const uint64_t id = coord.submit(req);
    ASSERT_TRUE(client.waitRun(id, [](const test::RunRecord& r) { return r.iterations >= 8; }))
        << "the long run did not get going";
    const auto t0 = Clock::now();
    ASSERT_EQ(::kill(static_cast<pid_t>(victim), fc.signal), 0);
    const auto got = client.waitResult(id, std::chrono::seconds(10));
    ASSERT_TRUE(got.has_value());
    const double detectS = std::chrono::duration<double>(Clock::now() - t0).count();
    const RunResult& res = *got;
    std::printf("[ measured ] signal %d on rank %d: run ended after %.3f s: %s\n", fc.signal,
                fc.rank, detectS, res.error.c_str());
    EXPECT_LT(detectS, 3.0);
    EXPECT_EQ(res.state, RunState::Failed);
    EXPECT_EQ(res.failedRank, fc.rank);
    EXPECT_NE(res.error.find("rank " + std::to_string(fc.rank)), std::string::npos) << res.error;
    EXPECT_NE(res.error.find(fc.words), std::string::npos) << res.error;
    EXPECT_NE(res.error.find("step"), std::string::npos) << res.error;
    EXPECT_NE(res.error.find(std::to_string(victim)), std::string::npos) << res.error;
    // Every surviving rank handed over its flight record; the lost one could not.
    ASSERT_EQ(res.flight.size(), 4u);
    for (const RankFlight& f : res.flight) {
      if (f.rank == fc.rank) {
        EXPECT_FALSE(f.received);
        EXPECT_EQ(f.missing,
                  fc.signal == SIGKILL ? "the process is gone" : "the process stopped responding");
        continue;
      }
      EXPECT_TRUE(f.received) << "rank " << f.rank << ": " << f.missing;
      ASSERT_FALSE(f.records.empty()) << "rank " << f.rank;
      const CollectiveRecord& last = f.records.back();
      EXPECT_EQ(last.run.runId, id);
      // Aborted or failed, or completed: a rank whose part of its last collective did not
      // need the lost one may have finished it before the abort came. Never left in flight.
      EXPECT_NE(last.state, CollectiveState::InFlight) << "rank " << f.rank;
    }
    const FlightAnalysis fa = analyzeFlight(res.flight, id);
    ASSERT_TRUE(fa.found);
    EXPECT_EQ(fa.neverReached, std::vector<int>{fc.rank}) << flightSummaryText(res.flight, id);
    // The worker's leaving says why.
    ASSERT_TRUE(client.waitLeft(1));
    const WorkerLeft gone = client.left().front();
    EXPECT_EQ(gone.worker.pid, victim);
    EXPECT_EQ(gone.reason.kind,
              fc.signal == SIGKILL ? LeaveKind::Killed : LeaveKind::MissedHeartbeats);
    if (fc.signal == SIGKILL) {
      EXPECT_EQ(gone.reason.code, SIGKILL);
    }

    // The lost worker was removed (a stopped one killed) and reaped, and no segment name of
    // it survives the next run (its own removal or the next bind's sweep).
    EXPECT_FALSE(processAlive(victim));
    // A SIGKILLed rank cannot remove its ipc socket directory: the next bind sweeps it.
    if (fc.plane == DataPlaneKind::Zmq && fc.signal == SIGKILL) {
      EXPECT_FALSE(ipcDirsOf(tmp.path(), victim).empty()) << "the killed rank had no ipc directory";
    }
    // The next run: the replacement joins first, the world keeps its size, results are exact.
    RunRequest nextReq = smallRequest("ring", Collective::AllReduce);
    nextReq.dataPlane = fc.plane;
    const RunResult next = client.run(nextReq);
    ASSERT_EQ(next.state, RunState::Done) << next.error << "\n" << client.allLogs();
    EXPECT_EQ(next.nranks, 4) << client.allLogs();
    EXPECT_EQ(next.wrong, 0u);
    for (const auto& w : coord.workers()) {
      EXPECT_NE(w.pid, victim);
      pids.push_back(w.pid);
    }
    EXPECT_TRUE(shmSegmentsOf({victim}).empty()) << shmSegmentsOf({victim}).front();
    EXPECT_TRUE(ipcDirsOf(tmp.path(), victim).empty()) << ipcDirsOf(tmp.path(), victim).front();
    // The dead worker's late messages, if any, are no reason to tell it anything.
    EXPECT_EQ(client.logsContaining("told it to shut down"), 0) << client.allLogs();
  }
  expectNoWorkerChildren(pids);
}

INSTANTIATE_TEST_SUITE_P(
    Signals, RuntimeFailure,
    ::testing::Values(FailureCase{SIGKILL, 2, "killed by signal 9", DataPlaneKind::Shm},
                      FailureCase{SIGSTOP, 1, "stopped responding", DataPlaneKind::Shm},
                      FailureCase{SIGKILL, 2, "killed by signal 9", DataPlaneKind::Zmq},
                      FailureCase{SIGSTOP, 1, "stopped responding", DataPlaneKind::Zmq},
                      FailureCase{SIGKILL, 2, "killed by signal 9", DataPlaneKind::Tcp}),
    [](const auto& info) {
      return std::string(info.param.signal == SIGKILL ? "Killed" : "Stopped") + "_" +
             std::string(toString(info.param.plane));
    });

TEST(Runtime, AbortEndsTheRunPromptly) {
  Coordinator coord(localOptions(3));
  EventClient client(coord);
  const uint64_t id = coord.submit(longRequest());
  ASSERT_TRUE(client.waitRun(
      id, [](const test::RunRecord& r) { return r.iterations >= 3; }, std::chrono::seconds(60)))
      << "the long run did not get going";
  const auto t0 = Clock::now();
  coord.abort("stopped by the test");
  const auto got = client.waitResult(id, std::chrono::seconds(5));
  ASSERT_TRUE(got.has_value());
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.0);
  const RunResult& res = *got;
  EXPECT_EQ(res.state, RunState::Aborted);
  EXPECT_NE(res.error.find("stopped by the test"), std::string::npos) << res.error;
  EXPECT_EQ(coord.workers().size(), 3u);
  const RunResult next = client.run(smallRequest("tree", Collective::AllReduce));
  EXPECT_EQ(next.state, RunState::Done) << next.error;
  EXPECT_EQ(next.wrong, 0u);
}

// bench --mismatch-rank: a rank told twice the count is caught by the header check at the first
// message, the run fails naming the ranks, and the workers stay for the next run.
TEST(Runtime, AMismatchedRankIsCaughtByTheHeaderCheck) {
  Coordinator coord(localOptions(3));
  EventClient client(coord);
  RunRequest req = smallRequest("ring", Collective::AllReduce);
  req.mismatchRank = 1;
  req.stallTimeout = std::chrono::seconds(10);
  const auto t0 = Clock::now();
  const RunResult res = client.run(req);
  EXPECT_EQ(res.state, RunState::Failed);
  EXPECT_NE(res.error.find("header mismatch"), std::string::npos) << res.error;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0) << "not at once";
  EXPECT_EQ(coord.workers().size(), 3u);
  const RunResult next = client.run(smallRequest("ring", Collective::AllReduce));
  EXPECT_EQ(next.state, RunState::Done) << next.error;
  EXPECT_EQ(next.wrong, 0u);
  req.mismatchRank = 3;  // not a rank of 3
  const RunResult refused = client.run(req);
  EXPECT_EQ(refused.state, RunState::Refused);
  EXPECT_NE(refused.error.find("must be in -1..2"), std::string::npos) << refused.error;
}

// bench --data random: seeded random floats, not checked; every rank of a run reports the same
// digest of its output, and ring and tree, which add in other orders, report different ones.
TEST(Runtime, RandomDataGivesOneDigestPerRunAndAnotherPerAlgorithm) {
  Coordinator coord(localOptions(4));
  EventClient client(coord);
  std::map<std::string, uint64_t> digest;
  for (const char* algo : {"ring", "tree", "ring"}) {
    RunRequest req = smallRequest(algo, Collective::AllReduce);
    req.count = 4096;
    req.sliceBytes = 4096;
    req.randomData = true;
    const RunResult res = client.run(req);
    ASSERT_EQ(res.state, RunState::Done) << res.error;
    ASSERT_EQ(res.outputDigests.size(), 4u) << algo;
    ASSERT_EQ(res.outputSamples.size(), 4u);
    for (int r = 1; r < 4; ++r) {
      EXPECT_EQ(res.outputDigests[static_cast<size_t>(r)], res.outputDigests[0]) << algo << r;
      EXPECT_EQ(res.outputSamples[static_cast<size_t>(r)], res.outputSamples[0]);
    }
    EXPECT_EQ(res.outputSamples[0].size(), kMaxOutputSampleBytes);  // 16 floats
    if (digest.count(algo)) {
      EXPECT_EQ(digest[algo], res.outputDigests[0]) << "the same run again: the same bits";
    }
    digest[algo] = res.outputDigests[0];
  }
  EXPECT_NE(digest["ring"], digest["tree"]);
  // Checkable data reports no digest.
  const RunResult plain = client.run(smallRequest("ring", Collective::AllReduce));
  EXPECT_TRUE(plain.outputDigests.empty());
}

// ---- A worker started by hand ----------------------------------------------------------------

TEST(Runtime, WorkerStartedByHandJoinsAndTakesPart) {
  CoordinatorOptions o = localOptions(2);
  o.expectRemote = 1;
  int64_t remotePid = 0;
  std::vector<int64_t> pids;
  {
    Coordinator coord(o);
    const std::string cmd = coord.joinCommand();
    const std::string prefix = "allreduce-worker --connect ";
    ASSERT_EQ(cmd.rfind(prefix, 0), 0u) << cmd;
    const std::string endpoint = cmd.substr(prefix.size());
    EXPECT_EQ(endpoint, coord.endpoint());
    EXPECT_EQ(endpoint.rfind("tcp://127.0.0.1:", 0), 0u) << endpoint;
    remotePid = spawnChild({ARL_WORKER_BINARY, "--connect", endpoint, "--name", "by-hand"});
    ASSERT_TRUE(waitForWorkers(coord, 3));
    const auto ws = coord.workers();
    ASSERT_EQ(ws.size(), 3u);
    int remote = 0;
    for (const auto& w : ws) {
      if (!w.local) {
        ++remote;
        EXPECT_EQ(w.pid, remotePid);
        EXPECT_EQ(w.name, "by-hand");
      }
    }
    EXPECT_EQ(remote, 1);
    pids = pidsOf(ws);
    const RunResult res = coord.run(smallRequest("ring", Collective::AllReduce));
    ASSERT_EQ(res.state, RunState::Done) << res.error;
    EXPECT_EQ(res.nranks, 3);
    EXPECT_EQ(res.wrong, 0u);
    bool sawRemote = false;
    for (const auto& ri : res.perRank) {
      for (const auto& w : res.workers) sawRemote |= w.rank == ri.rank && !w.local;
    }
    EXPECT_TRUE(sawRemote);
  }
  // The coordinator told the hand-started worker to shut down: it leaves with code 0.
  const auto st = waitFor(remotePid, milliseconds(3000));
  ASSERT_TRUE(st.has_value()) << "the hand-started worker did not leave";
  EXPECT_FALSE(st->signaled);
  EXPECT_EQ(st->code, 0);
  expectNoWorkerChildren(pids);
}

// A remote worker removed for silence (here: stopped) is told to shut down; continued, it
// reads that and leaves with 0, as a Shutdown always makes it, not 3 (coordinator silent).
TEST(Runtime, RemovedRemoteWorkerLeavesWithZeroWhenContinued) {
  CoordinatorOptions o = localOptions(1);
  o.heartbeat = milliseconds(100);
  o.missedHeartbeats = 3;
  Coordinator coord(o);
  EventClient client(coord);
  const int64_t pid = spawnChild({ARL_WORKER_BINARY, "--connect", coord.endpoint(), "--name",
                                  "by-hand", "--host", "elsewhere"});
  ASSERT_TRUE(client.waitJoined(2));
  ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGSTOP), 0);
  ASSERT_TRUE(client.waitLeft(1, std::chrono::seconds(10)));
  const WorkerLeft gone = client.left().front();
  EXPECT_EQ(gone.worker.pid, pid);
  EXPECT_FALSE(gone.worker.local);
  EXPECT_EQ(gone.reason.kind, LeaveKind::MissedHeartbeats);
  // Stopped for longer than the worker's own silence limit (3 x 100 ms).
  std::this_thread::sleep_for(milliseconds(800));
  ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGCONT), 0);
  const auto st = waitFor(pid, milliseconds(5000));
  if (!st) killAndReap(pid);
  ASSERT_TRUE(st.has_value()) << "the removed worker did not leave";
  EXPECT_FALSE(st->signaled);
  EXPECT_EQ(st->code, 0);
  // The local worker was never silent and stays.
  EXPECT_EQ(coord.workers().size(), 1u);
}

// A worker that reports another host name makes the run span two "hosts": every rank then
// binds its data plane on tcp:// (advertising a reachable address) for the other host.
TEST(Runtime, RanksOnDifferentHostsUseTcp) {
  CoordinatorOptions o = localOptions(2);
  o.expectRemote = 1;
  o.listen = "tcp://0.0.0.0:*";
  // In the clear, as before keys: a network listen without them must say so (security.md).
  o.security.insecure = true;
  int64_t remotePid = 0;
  {
    Coordinator coord(o);
    EXPECT_EQ(coord.endpoint().rfind("tcp://0.0.0.0:", 0), 0u) << coord.endpoint();
    // A wildcard listen address is no address to connect to: the join line names this host.
    EXPECT_EQ(coord.joinCommand().find("0.0.0.0"), std::string::npos) << coord.joinCommand();
    const std::string port = coord.endpoint().substr(coord.endpoint().rfind(':'));
    remotePid = spawnChild({ARL_WORKER_BINARY, "--connect", "tcp://127.0.0.1" + port, "--host",
                            "pretend-host", "--name", "elsewhere"});
    ASSERT_TRUE(waitForWorkers(coord, 3));
    const RunResult res = coord.run(smallRequest("ring", Collective::AllReduce));
    ASSERT_EQ(res.state, RunState::Done) << res.error;
    EXPECT_EQ(res.wrong, 0u);
    ASSERT_EQ(res.workers.size(), 3u);
    // Across the hosts every rank has a tcp:// endpoint; the two on this host share memory
    // between themselves besides ("shm://NAME,tcp://HOST:PORT"), the other one needs none.
    for (const auto& w : res.workers) {
      EXPECT_NE(w.dataEndpoint.find("tcp://"), std::string::npos)
          << w.name << ": " << w.dataEndpoint;
      const bool here = w.host != "pretend-host";
      EXPECT_EQ(w.dataEndpoint.rfind("shm://", 0) == 0, here) << w.name << ": " << w.dataEndpoint;
    }
    // Ranks of one host are contiguous: the two local workers first, then the other host.
    EXPECT_EQ(res.workers.back().host, "pretend-host");
    // Hierarchical groups by the reported hosts: 2 + 1 ranks is refused before any worker
    // sees it, with the per-host counts in the message.
    const RunResult h = coord.run(smallRequest("hierarchical", Collective::AllReduce));
    EXPECT_EQ(h.state, RunState::Refused) << "uneven hosts accepted for hierarchical";
    EXPECT_NE(h.error.find("pretend-host: 1"), std::string::npos) << h.error;
  }
  const auto st = waitFor(remotePid, milliseconds(3000));
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->code, 0);
}

// Local workers die with the process that started them, even when it is killed outright.
TEST(Runtime, LocalWorkersDieWithTheirParent) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t lab = ::fork();
  ASSERT_GE(lab, 0);
  if (lab == 0) {
    ::close(fds[0]);
    try {
      Coordinator coord(localOptions(2));
      if (!waitForWorkers(coord, 2)) ::_exit(4);
      for (const auto& w : coord.workers()) {
        const long long pid = w.pid;
        if (::write(fds[1], &pid, sizeof pid) != sizeof pid) ::_exit(3);
      }
      ::close(fds[1]);
      for (;;) ::pause();
    } catch (...) {
      ::_exit(2);
    }
  }
  ::close(fds[1]);
  std::vector<int64_t> pids;
  long long pid = 0;
  while (::read(fds[0], &pid, sizeof pid) == static_cast<ssize_t>(sizeof pid)) pids.push_back(pid);
  ::close(fds[0]);
  ASSERT_EQ(pids.size(), 2u);
  for (int64_t p : pids) EXPECT_TRUE(processAlive(p));
  ASSERT_EQ(::kill(lab, SIGKILL), 0);
  const auto st = waitFor(lab, milliseconds(5000));
  ASSERT_TRUE(st.has_value());
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  bool anyAlive = true;
  while (anyAlive && Clock::now() < deadline) {
    anyAlive = false;
    for (int64_t p : pids) anyAlive |= processAlive(p);
    if (anyAlive) std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_FALSE(anyAlive) << "a local worker outlived its parent";
}

TEST(Runtime, WorkerLeavesWhenTheCoordinatorGoesSilent) {
  // A ROUTER that never answers: the worker waits for its join timeout (10 s) at most; a
  // coordinator that answered once and then stopped is covered by the 4-heartbeat rule.
  zmq::context_t ctx;
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:*");
  const std::string ep = router.get(zmq::sockopt::last_endpoint);
  const int64_t pid = spawnChild({ARL_WORKER_BINARY, "--connect", ep});
  // Answer the Hello with a Welcome, then fall silent.
  std::vector<zmq::message_t> frames;
  zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0}};
  ASSERT_EQ(zmq::poll(items, 1, milliseconds(5000)), 1);
  zmq::message_t id;
  ASSERT_TRUE(router.recv(id));
  Welcome w;
  w.rank = 0;
  w.worldSize = 1;
  w.heartbeatIntervalMs = 100;
  w.heartbeatLiveness = 3;
  const Frames f = w.encode();
  router.send(id, zmq::send_flags::sndmore);
  router.send(zmq::buffer(f[0]), zmq::send_flags::sndmore);
  router.send(zmq::buffer(f[1]), zmq::send_flags::none);
  const auto t0 = Clock::now();
  const auto st = waitFor(pid, milliseconds(5000));
  ASSERT_TRUE(st.has_value()) << "the worker did not leave";
  EXPECT_NE(st->code, 0);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.0);
}

// ---- Garbage on the control port -------------------------------------------------------------

TEST(Runtime, GarbageAndTruncatedFramesAreLoggedAndIgnored) {
  Coordinator coord(localOptions(3));
  EventClient client(coord);
  ASSERT_TRUE(client.waitJoined(3));

  RunRequest req = smallRequest("ring", Collective::AllReduce);
  req.count = 1 << 20;
  req.sliceBytes = 128 << 10;
  req.iterations = 20;
  req.telemetry = TelemetryLevel::Steps;
  const uint64_t id = coord.submit(req);

  zmq::context_t ctx;
  zmq::socket_t raw(ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  raw.connect(coord.endpoint());
  auto sendFrames = [&](const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      raw.send(zmq::buffer(frames[i]),
               i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  };
  Hello h;
  h.name = "intruder";
  h.hostName = "nowhere";
  h.pid = 1;
  h.backend = "cpu";
  const Frames hello = h.encode();
  const std::string head(hello[0].begin(), hello[0].end());
  const std::string body(hello[1].begin(), hello[1].end());
  Ping ping;
  ping.t0Ns = 5;
  const Frames pingFrames = ping.encode();
  // Garbage for as long as the run goes on, so that it arrives while the run is active.
  int rounds = 0;
  do {
    sendFrames({"complete garbage"});                                     // one frame
    sendFrames({"ARL0xxxxxxxxxxxx", body});                               // bad magic
    sendFrames({head.substr(0, 7), body});                                // truncated header
    sendFrames({head, body.substr(0, body.size() / 2)});                  // truncated body
    sendFrames({head, body, "extra"});                                    // three frames
    sendFrames({std::string(pingFrames[0].begin(), pingFrames[0].end()),  // valid, no Hello
                std::string(pingFrames[1].begin(), pingFrames[1].end())});
    ++rounds;
    std::this_thread::sleep_for(milliseconds(20));
  } while (!client.finished(id));
  EXPECT_GE(rounds, 1);
  const RunResult res = *client.waitResult(id);
  EXPECT_EQ(res.state, RunState::Done) << res.error;
  EXPECT_EQ(res.wrong, 0u);
  EXPECT_EQ(res.nranks, 3);
  EXPECT_EQ(coord.workers().size(), 3u);
  EXPECT_GE(client.logsContaining("malformed"), 4) << client.allLogs();
  EXPECT_GE(client.logsContaining("has not said Hello"), 1) << client.allLogs();
}

// The resident memory of this process (which holds the coordinator), in bytes.
int64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// A stranger speaking raw ZMTP 3.0 (rfc.zeromq.org/spec/23: greeting, READY, then a frame whose
// 8-byte size claims 4 GiB) is dropped when the header arrives: the coordinator never holds
// what follows, and goes on serving its workers.
TEST(Runtime, AFrameClaimingGigabytesIsDroppedBeforeItIsHeld) {
  Coordinator coord(localOptions(2));
  EventClient client(coord);
  ASSERT_TRUE(client.waitJoined(2));
  const std::string ep = coord.endpoint();  // tcp://127.0.0.1:PORT
  const int port = std::stoi(ep.substr(ep.rfind(':') + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  std::string greeting(64, '\0');
  greeting[0] = '\xff';
  greeting[9] = '\x7f';
  greeting[10] = 3;  // version 3.0
  greeting.replace(12, 4, "NULL");
  std::string ready =
      std::string("\x05READY") + "\x0bSocket-Type" + std::string("\0\0\0\x06", 4) + "DEALER";
  const std::string readyCommand = std::string("\x04") + static_cast<char>(ready.size()) + ready;
  std::string frame = "\x02";                     // a message frame with a long (8-byte) size
  frame += std::string("\0\0\0\x01\0\0\0\0", 8);  // 4 GiB
  const std::string handshake = greeting + readyCommand + frame;
  ASSERT_EQ(::send(fd, handshake.data(), handshake.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(handshake.size()));
  const int64_t before = residentBytes();
  const std::string block(1 << 20, 'x');
  int64_t sent = 0;
  for (int i = 0; i < 256; ++i) {  // up to 256 MiB of the claimed frame
    const ssize_t n = ::send(fd, block.data(), block.size(), MSG_NOSIGNAL);
    if (n <= 0) break;  // the coordinator closed the connection
    sent += n;
  }
  ::close(fd);
  const int64_t grown = residentBytes() - before;
  EXPECT_LT(grown, int64_t{32} << 20) << "sent " << sent << " bytes of the frame";
  const uint64_t id = coord.submit(smallRequest("ring", Collective::AllReduce));
  const RunResult res = *client.waitResult(id);
  EXPECT_EQ(res.state, RunState::Done) << res.error;
  EXPECT_EQ(res.wrong, 0u);
}

// ---- A corrupted data-plane header -----------------------------------------------------------

TEST(Runtime, DataPlaneHeaderMismatchIsReportedNotSummed) {
  // Test-only fault injection (docs/runtime.md): rank 1 corrupts the epoch of the first
  // header it sends. The workers inherit the environment when they are spawned.
  ::setenv(kCorruptHeaderEnv, "1:epoch", 1);
  std::vector<int64_t> pids;
  {
    Coordinator coord(localOptions(3));
    ASSERT_TRUE(waitForWorkers(coord, 3));
    ::unsetenv(kCorruptHeaderEnv);
    pids = pidsOf(coord.workers());
    const RunRequest req = smallRequest("ring", Collective::AllReduce);
    const auto t0 = Clock::now();
    const RunResult res = coord.run(req);
    // Reported when the header arrives, not when the run's stall timeout (20 s) ends it: a
    // bound of half that leaves a loaded machine its seconds and still tells the two apart.
    EXPECT_LT(Clock::now() - t0, req.stallTimeout / 2);
    EXPECT_EQ(res.state, RunState::Failed);
    EXPECT_NE(res.error.find("header mismatch"), std::string::npos) << res.error;
    EXPECT_NE(res.error.find("epoch"), std::string::npos) << res.error;
    EXPECT_NE(res.error.find("from rank 1"), std::string::npos) << res.error;
    EXPECT_NE(res.error.find("step"), std::string::npos) << res.error;
    // Nobody was removed: the workers are healthy, the data was wrong.
    EXPECT_EQ(coord.workers().size(), 3u);
  }
  ::unsetenv(kCorruptHeaderEnv);
  expectNoWorkerChildren(pids);
}

}  // namespace
}  // namespace arl
