// Gloo's collectives (core/engines/gloo) end to end: a Coordinator in this process, real
// allreduce-worker processes on the cpu backend that rendezvous through the coordinator's
// store and run Gloo's own algorithms over Gloo's TCP pairs on loopback. Every collective
// Gloo has, at 2 to 5 ranks, checked exactly on the lab's integer inputs; what Gloo cannot do
// refused with a line that names it; a killed rank ends the run within the liveness bound,
// and nothing is left behind. Skipped, and says so, in a build without Gloo.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../runtime/event_client.h"
#include "base/clock.h"
#include "exec/collective_library.h"
#include "local_workers.h"
#include "runtime/coordinator.h"
#include "runtime/process.h"

namespace arl {
namespace {

using test::EventClient;
using test::localOptions;

#define ARL_SKIP_WITHOUT_GLOO()                                                 \
  do {                                                                          \
    if (auto why = libraryMissing("gloo")) GTEST_SKIP() << "no Gloo: " << *why; \
  } while (false)

// Children of this process whose command is allreduce-worker.
std::vector<int64_t> workerChildren() {
  std::vector<int64_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in("/proc/" + name + "/stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    const auto open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == ::getpid() &&
        line.substr(open + 1, close - open - 1).rfind("allreduce-work", 0) == 0) {
      out.push_back(std::stoll(name));
    }
  }
  ::closedir(d);
  return out;
}

RunRequest glooRequest(const std::string& algo, Collective c) {
  RunRequest r;
  r.algorithm = algo;
  r.collective = c;
  r.count = 1037;  // odd: no rank count here divides it
  r.warmup = 1;
  r.iterations = 2;
  r.check = 2;  // the last timed iteration and one more, into a poisoned output
  r.telemetry = TelemetryLevel::Steps;
  return r;
}

std::string describe(const RunRequest& q, int n) {
  return q.algorithm + " " + std::string(toString(q.collective)) + " " +
         std::string(toString(q.dtype)) + " " + std::string(toString(q.op)) +
         (q.inPlace ? " in place" : "") + " on " + std::to_string(n) + " ranks";
}

class GlooSweep : public ::testing::TestWithParam<int> {};

// Every Gloo algorithm and every collective it claims, dtypes and ops varied, in and out of
// place, exact; gloo-bcube off a power of two refused before any worker runs it.
TEST_P(GlooSweep, EveryCollectiveGlooHasIsExact) {
  ARL_SKIP_WITHOUT_GLOO();
  const int n = GetParam();
  const bool powerOfTwo = (n & (n - 1)) == 0;
  const DataType dtypes[] = {DataType::Int32,  DataType::Float, DataType::Int64,
                             DataType::Double, DataType::Half,  DataType::Uint8};
  const RedOp ops[] = {RedOp::Sum, RedOp::Max, RedOp::Min, RedOp::Prod};
  Coordinator coord(localOptions(n));
  EventClient client(coord);
  ASSERT_TRUE(client.waitJoined(static_cast<size_t>(n)));
  int k = 0, ran = 0;
  for (const LibraryAlgorithm& a : libraryAlgorithms()) {
    if (a.library != "gloo") continue;
    for (Collective c : kAllCollectives) {
      if (!a.supports(c)) continue;
      RunRequest req = glooRequest(std::string(a.name), c);
      req.dtype = dtypes[k % 6];
      req.op = ops[(k / 2) % 4];
      req.inPlace = k % 3 == 1;
      req.root = n - 1;
      ++k;
      SCOPED_TRACE(describe(req, n));
      const RunResult res = client.run(req);
      if (a.name == "gloo-bcube" && !powerOfTwo) {
        EXPECT_EQ(res.state, RunState::Refused);
        EXPECT_NE(res.error.find("gloo-bcube runs on a power-of-two number of ranks"),
                  std::string::npos)
            << res.error;
        continue;
      }
      ASSERT_EQ(res.state, RunState::Done) << res.error << "\n" << client.allLogs();
      EXPECT_EQ(res.nranks, n);
      EXPECT_EQ(res.wrong, 0u);
      EXPECT_EQ(res.iterationUs.size(), 2u);
      EXPECT_GT(res.timeUs, 0.0);
      ++ran;
    }
  }
  EXPECT_GE(ran, powerOfTwo ? 8 : 7);
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooSweep, ::testing::Values(2, 3, 4, 5),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// Every dtype and op Gloo can do, on one algorithm: all exact.
TEST(Gloo, EveryDtypeAndOpGlooHasIsExact) {
  ARL_SKIP_WITHOUT_GLOO();
  Coordinator coord(localOptions(3));
  EventClient client(coord);
  ASSERT_TRUE(client.waitJoined(3));
  for (DataType t : {DataType::Float, DataType::Double, DataType::Half, DataType::Int32,
                     DataType::Int64, DataType::Uint8}) {
    for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max}) {
      RunRequest req = glooRequest("gloo-halving-doubling", Collective::AllReduce);
      req.dtype = t;
      req.op = op;
      SCOPED_TRACE(describe(req, 3));
      const RunResult res = client.run(req);
      ASSERT_EQ(res.state, RunState::Done) << res.error;
      EXPECT_EQ(res.wrong, 0u);
    }
  }
}

// What Gloo has no arithmetic for is refused with a line that names it.
TEST(Gloo, RefusesWhatGlooCannotDoByName) {
  ARL_SKIP_WITHOUT_GLOO();
  Coordinator coord(localOptions(2));
  EventClient client(coord);
  ASSERT_TRUE(client.waitJoined(2));
  RunRequest req = glooRequest("gloo-ring", Collective::AllReduce);
  req.dtype = DataType::BFloat16;
  RunResult res = client.run(req);
  EXPECT_EQ(res.state, RunState::Failed);
  EXPECT_NE(res.error.find("gloo-ring: Gloo has no bfloat16 arithmetic"), std::string::npos)
      << res.error;
  req.dtype = DataType::Float;
  req.op = RedOp::Avg;
  res = client.run(req);
  EXPECT_EQ(res.state, RunState::Failed);
  EXPECT_NE(res.error.find("gloo-ring: Gloo has no avg reduction"), std::string::npos) << res.error;
  // The world is fine afterwards.
  req.op = RedOp::Sum;
  res = client.run(req);
  ASSERT_EQ(res.state, RunState::Done) << res.error;
  EXPECT_EQ(res.wrong, 0u);
}

// A rank killed in the middle of Gloo's collectives: the run ends within 3 s (the liveness
// bound is 1 s; the rest is room for a loaded 2-core machine) with an error naming the rank,
// the worker is gone, the next Gloo run of the replacement world is exact, and no worker
// process is left once the coordinator ends.
TEST(Gloo, AKilledRankEndsTheRunNamingItAndTheNextRunWorks) {
  ARL_SKIP_WITHOUT_GLOO();
  std::vector<int64_t> pids;
  {
    Coordinator coord(localOptions(4));
    EventClient client(coord);
    ASSERT_TRUE(client.waitJoined(4));
    int64_t victim = 0;
    for (const auto& w : coord.workers()) {
      pids.push_back(w.pid);
      if (w.rank == 2) victim = w.pid;
    }
    ASSERT_GT(victim, 0);
    RunRequest req = glooRequest("gloo-ring-chunked", Collective::AllReduce);
    req.count = 1 << 18;
    req.iterations = 100000;
    req.check = 0;
    const uint64_t id = coord.submit(req);
    ASSERT_TRUE(client.waitRun(id, [](const test::RunRecord& r) { return r.iterations >= 8; }))
        << "the Gloo run did not get going\n"
        << client.allLogs();
    const auto t0 = SteadyClock::now();
    ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
    const auto got = client.waitResult(id, std::chrono::seconds(10));
    ASSERT_TRUE(got.has_value());
    const double s = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    std::printf("[ measured ] SIGKILL on rank 2 under Gloo: run ended after %.3f s: %s\n", s,
                got->error.c_str());
    EXPECT_LT(s, 3.0);
    EXPECT_EQ(got->state, RunState::Failed);
    EXPECT_EQ(got->failedRank, 2);
    EXPECT_NE(got->error.find("rank 2"), std::string::npos) << got->error;
    EXPECT_NE(got->error.find("killed by signal 9"), std::string::npos) << got->error;
    ASSERT_TRUE(client.waitLeft(1));
    EXPECT_FALSE(processAlive(victim));

    const RunResult next = client.run(glooRequest("gloo-ring", Collective::AllReduce));
    ASSERT_EQ(next.state, RunState::Done) << next.error << "\n" << client.allLogs();
    EXPECT_EQ(next.nranks, 4);
    EXPECT_EQ(next.wrong, 0u);
    for (const auto& w : coord.workers()) pids.push_back(w.pid);
  }
  EXPECT_TRUE(workerChildren().empty()) << "allreduce-worker children remain";
  for (int64_t pid : pids) EXPECT_FALSE(processAlive(pid)) << "worker pid " << pid << " alive";
}

}  // namespace
}  // namespace arl
