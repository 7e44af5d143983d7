// Liveness end to end, with real worker processes: a run's one deadline is a stall (no rank
// anywhere makes progress for the stall timeout), a rank that waits while others work is not
// failing, and run messages lost on the way (as a connection reset loses them) are said again
// instead of leaving a run that never ends.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "local_workers.h"
#include "runtime/coordinator.h"
#include "runtime/fault_injection.h"
#include "runtime/process.h"

namespace arl {
namespace {

using test::localOptions;
using test::waitForWorkers;

using Clock = SteadyClock;
using std::chrono::milliseconds;

std::vector<int64_t> pids(const Coordinator& c) {
  std::vector<int64_t> out;
  for (const auto& w : c.workers()) out.push_back(w.pid);
  std::sort(out.begin(), out.end());
  return out;
}

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

RunRequest ringRequest(uint64_t count, int iterations) {
  RunRequest r;
  r.algorithm = "ring";
  r.count = count;
  r.sliceBytes = 4096;
  r.warmup = 1;
  r.iterations = iterations;
  r.telemetry = TelemetryLevel::Off;
  return r;
}

// Sets an environment variable for the workers a Coordinator spawns in this scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

// ---- A rank that waits while others work ----------------------------------------------------

// Rank 0's longest time without a step ending, in a halving-doubling run on 3 ranks.
double longestRank0WaitS(const RunResult& res) {
  int64_t last = -1, longest = 0;
  for (const TelemetryEvent& e : res.events) {
    if (e.rank != 0) continue;
    if (last >= 0) longest = std::max(longest, e.tNs - last);
    last = e.tNs;
  }
  return static_cast<double>(longest) / 1e9;
}

// Halving-doubling on 3 ranks: rank 0 hands its vector to rank 1 and waits out the whole
// middle phase, which ranks 1 and 2 run. With a stall timeout shorter than that wait (once a
// fixed receive timeout failed such runs) the run completes: others
// progressed meanwhile. Times vary from run to run, so runs repeat until one had rank 0
// wait longer than the timeout; every one must complete.
TEST(Liveness, ARankWaitingWhileOthersWorkIsNotAStall) {
  // Heartbeats every 50 ms allow a stall timeout of 0.15 s, well below rank 0's wait
  // (0.2-5 s here, depending on the load); the liveness window stays 1 s.
  CoordinatorOptions o = localOptions(3);
  o.heartbeat = milliseconds(50);
  o.missedHeartbeats = 20;
  Coordinator coord(o);
  ASSERT_TRUE(waitForWorkers(coord, 3));
  RunRequest r;
  r.algorithm = "halving-doubling";
  r.count = 6000000;
  r.sliceBytes = 128;  // many small slices: a long middle phase
  r.warmup = 0;
  r.iterations = 1;
  r.telemetry = TelemetryLevel::Steps;  // rank 0's step ends bracket its wait
  r.stallTimeout = milliseconds(520);   // the least the default heartbeat allows (2 x 250 ms)
  bool tested = false;
  for (int attempt = 0; attempt < 5 && !tested; ++attempt) {
    const RunResult res = coord.run(r);
    const double waited = longestRank0WaitS(res);
    std::printf("rank 0 waited %.2f s with a stall timeout of 0.15 s: %s\n", waited,
                std::string(toString(res.state)).c_str());
    ASSERT_EQ(res.state, RunState::Done) << res.error;
    EXPECT_EQ(res.wrong, 0u);
    tested = waited > 0.15;
  }
  EXPECT_TRUE(tested) << "no run had rank 0 wait longer than the stall timeout";
}

// ---- A run that makes no progress anywhere ---------------------------------------------------

// Rank 1 stops before step 1 with its heartbeats flowing (ARL_TEST_STALL): nobody dies, and
// the run fails after the stall timeout with what every rank was waiting for; the workers
// stay and the next run works.
TEST(Liveness, ARunWithoutProgressFailsNamingWhatEachRankAwaits) {
  ScopedEnv stall(kStallEnv, "1:1");
  Coordinator coord(localOptions(3));
  ASSERT_TRUE(waitForWorkers(coord, 3));
  const auto before = pids(coord);
  RunRequest r = ringRequest(3000, 2);
  r.stallTimeout = milliseconds(1000);
  const auto t0 = Clock::now();
  const RunResult res = coord.run(r);
  const double took = secondsSince(t0);
  std::printf("stalled run failed after %.2f s: %s\n", took, res.error.c_str());
  EXPECT_EQ(res.state, RunState::Failed);
  EXPECT_NE(res.error.find("no rank made progress for"), std::string::npos) << res.error;
  EXPECT_NE(res.error.find("stall timeout 1.0 s"), std::string::npos) << res.error;
  EXPECT_NE(res.error.find("rank 2 waits for data from rank 1 for step 1"), std::string::npos)
      << res.error;
  EXPECT_GE(took, 1.0);
  EXPECT_LT(took, 10.0);  // the timeout plus heartbeats, with room for a loaded machine
  // The stall is a run's failure, not a worker's: everyone stays, and works.
  const RunResult next = coord.run(ringRequest(3000, 2));
  EXPECT_EQ(next.state, RunState::Done) << next.error;
  EXPECT_EQ(pids(coord), before);
}

// ---- Run messages lost on the way ------------------------------------------------------------

// A worker drops the first control message of one type (ARL_TEST_LOSE_CONTROL), as a reset
// connection loses what was in flight. The coordinator sees from the heartbeats what the rank
// missed, or the rank sees that its Ready went unanswered, and the message is said again: the
// run completes, exactly, without a stall or a failure.
class LostMessage : public ::testing::TestWithParam<const char*> {};

TEST_P(LostMessage, IsSaidAgainAndTheRunCompletes) {
  ScopedEnv lose(kLoseControlEnv, GetParam());
  Coordinator coord(localOptions(3));
  ASSERT_TRUE(waitForWorkers(coord, 3));
  const auto before = pids(coord);
  RunRequest r = ringRequest(100000, 3);
  r.stallTimeout = milliseconds(20000);
  const auto t0 = Clock::now();
  const RunResult res = coord.run(r);
  const double took = secondsSince(t0);
  std::printf("with the first %s lost: %s in %.2f s\n", GetParam(),
              std::string(toString(res.state)).c_str(), took);
  EXPECT_EQ(res.state, RunState::Done) << res.error;
  EXPECT_EQ(res.wrong, 0u);
  EXPECT_EQ(res.iterationUs.size(), 3u) << "every iteration of every rank was counted";
  EXPECT_LT(took, 10.0);  // a re-send is due within about a second
  EXPECT_EQ(pids(coord), before);
}

INSTANTIATE_TEST_SUITE_P(Liveness, LostMessage,
                         ::testing::Values("RunConfig", "Ready", "Start", "IterationResult",
                                           "RunDone"),
                         [](const auto& info) { return std::string(info.param); });

// An Abort lost on the way: the run still ends Aborted, and the next run works on the same
// workers (the rank that missed the Abort is told again, or its next RunConfig replaces it).
TEST(Liveness, LostAbortStillEndsTheRunAndTheNextWorks) {
  ScopedEnv lose(kLoseControlEnv, "Abort");
  Coordinator coord(localOptions(3));
  ASSERT_TRUE(waitForWorkers(coord, 3));
  const auto before = pids(coord);
  RunRequest r = ringRequest(100000, 100000);
  const uint64_t id = coord.submit(r);
  std::vector<CoordinatorEvent> evs;
  bool running = false;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!running && Clock::now() < deadline) {
    evs.clear();
    coord.takeEvents(evs, milliseconds(50));
    for (auto& e : evs) {
      if (auto* s = std::get_if<StateEvent>(&e); s && s->runId == id) {
        running = s->state == RunState::Running;
      }
    }
  }
  ASSERT_TRUE(running);
  std::this_thread::sleep_for(milliseconds(200));
  coord.abort("test abort");
  std::optional<RunResult> res;
  while (!res && Clock::now() < deadline) {
    evs.clear();
    coord.takeEvents(evs, milliseconds(50));
    for (auto& e : evs) {
      if (auto* f = std::get_if<RunFinished>(&e); f && f->result.runId == id) res = f->result;
    }
  }
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->state, RunState::Aborted) << res->error;
  const RunResult next = coord.run(ringRequest(3000, 2));
  EXPECT_EQ(next.state, RunState::Done) << next.error;
  EXPECT_EQ(pids(coord), before);
}

// ---- Control connections reset ----------------------------------------------------------------

// The local TCP ports of the connections to the coordinator's control port.
std::vector<std::string> controlPorts(int port) {
  std::vector<std::string> out;
  const std::string cmd =
      "ss -tnH state established dst 127.0.0.1:" + std::to_string(port) + " 2>/dev/null";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) out.emplace_back(line);
  ::pclose(f);
  std::sort(out.begin(), out.end());
  return out;
}

// Every worker's control connection aborted (ss -K: the kernel resets it), and a run submitted
// at once, while their DEALERs are still connecting again (ZeroMQ waits its reconnect interval,
// 100 ms): the coordinator does not fail the run as unreachable; what the ranks missed is said
// again once they are back, the runs are exact and every worker stays. Three times in a row.
TEST(Liveness, ARunRightAfterTheControlConnectionsWereResetReachesEveryWorker) {
  if (::geteuid() != 0) GTEST_SKIP() << "ss -K needs root";
  Coordinator coord(localOptions(3));
  ASSERT_TRUE(waitForWorkers(coord, 3));
  const auto before = pids(coord);
  const std::string ep = coord.endpoint();
  const int port = std::stoi(ep.substr(ep.rfind(':') + 1));
  ASSERT_EQ(coord.run(ringRequest(3000, 2)).state, RunState::Done);
  for (int round = 0; round < 3; ++round) {
    const auto ports = controlPorts(port);
    ASSERT_EQ(ports.size(), 3u);
    const std::string kill =
        "ss -K -t state established dst 127.0.0.1:" + std::to_string(port) + " >/dev/null 2>&1";
    if (std::system(kill.c_str()) != 0 || controlPorts(port) == ports) {
      GTEST_SKIP() << "ss -K cannot reset sockets here (no INET_DIAG_DESTROY)";
    }
    const RunResult res = coord.run(ringRequest(30000, 3));
    EXPECT_EQ(res.state, RunState::Done) << "round " << round << ": " << res.error;
    EXPECT_EQ(res.wrong, 0u);
    EXPECT_EQ(pids(coord), before);
  }
}

// ---- Workers of one host in different pid namespaces -----------------------------------------

// A worker in a pid namespace of its own (a container sharing the host's /dev/shm) cannot
// watch its peers' processes, nor they its: auto takes ZeroMQ over tcp:// between them, and
// the shm data plane is refused naming the namespaces.
TEST(Liveness, WorkersInAnotherPidNamespaceDoNotShareMemory) {
  if (std::system("unshare --pid --fork true 2>/dev/null") != 0) {
    GTEST_SKIP() << "unshare --pid is not permitted here";
  }
  Coordinator coord(localOptions(1));
  ASSERT_TRUE(waitForWorkers(coord, 1));
  const int64_t other = spawnChild({"/usr/bin/unshare", "--pid", "--fork", ARL_WORKER_BINARY,
                                    "--connect", coord.endpoint(), "--name", "contained"});
  ASSERT_TRUE(waitForWorkers(coord, 2));
  const auto ws = coord.workers();
  ASSERT_EQ(ws.size(), 2u);
  EXPECT_EQ(ws[0].host, ws[1].host);
  EXPECT_NE(ws[0].pidNamespace, ws[1].pidNamespace);
  RunRequest r = ringRequest(100000, 2);
  const RunResult res = coord.run(r);
  EXPECT_EQ(res.state, RunState::Done) << res.error;
  ASSERT_EQ(res.workers.size(), 2u);
  for (const WorkerInfo& w : res.workers) {
    EXPECT_EQ(w.dataEndpoint.rfind("tcp://", 0), 0u) << w.dataEndpoint;
  }
  r.dataPlane = DataPlaneKind::Shm;
  const RunResult shm = coord.run(r);
  EXPECT_EQ(shm.state, RunState::Refused);
  EXPECT_NE(shm.error.find("needs every rank in one pid namespace"), std::string::npos)
      << shm.error;
  killAndReap(other, milliseconds(2000));
}

}  // namespace
}  // namespace arl
