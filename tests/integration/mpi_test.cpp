// Open MPI's collectives (the mpi-* library algorithms) on local workers that the coordinator
// starts under mpirun: every collective at 2 to 5 ranks checked exactly, the lab's own
// algorithms on the same workers, a worker killed mid-run, and mpirun missing from PATH.
// Skipped, and saying so, in a build without Open MPI.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../run_binary.h"
#include "../runtime/event_client.h"
#include "backend/registry.h"
#include "base/errors.h"
#include "exec/collective_library.h"
#include "local_workers.h"
#include "runtime/coordinator.h"
#include "runtime/mpi_launch.h"
#include "runtime/process.h"

namespace arl {
namespace {

using std::chrono::milliseconds;
using test::EventClient;

bool haveMpi() { return findBackend("mpi")->available() && !findMpirun().empty(); }

#define SKIP_WITHOUT_MPI() \
  if (!haveMpi()) GTEST_SKIP() << "this build has no Open MPI, or mpirun is not on PATH"

CoordinatorOptions mpiOptions(int n) {
  CoordinatorOptions o = test::localOptions(n);
  o.backend = "mpi";
  return o;
}

RunRequest request(const std::string& algo, Collective c, int nranks) {
  RunRequest r;
  r.algorithm = algo;
  r.collective = c;
  r.count = 1037 * static_cast<uint64_t>(nranks);  // odd per rank for the lab's own runs
  r.sliceBytes = 1024;
  r.dtype = DataType::Int32;  // integers: exact in every order
  r.root = nranks - 1;
  r.warmup = 1;
  r.iterations = 2;
  r.check = 2;
  r.telemetry = TelemetryLevel::Steps;
  return r;
}

// Every process whose command line names `word`, as pids ("mpirun", "orted", ...).
std::vector<int64_t> processesNamed(const std::string& word) {
  std::vector<int64_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in("/proc/" + name + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const int64_t pid = std::stoll(name);
    if (cmd.find(word) != std::string::npos && processAlive(pid)) out.push_back(pid);
  }
  ::closedir(d);
  return out;
}

// The mpirun processes that are this test's (children of this process).
std::vector<int64_t> ourMpiruns() {
  std::vector<int64_t> out;
  for (int64_t pid : processesNamed("mpirun")) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(in, line);
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == ::getpid()) out.push_back(pid);
  }
  return out;
}

class MpiCollectives : public ::testing::TestWithParam<int> {};

// One mpirun per rank count; every collective with each mpi algorithm that has it, and the
// lab's ring on the same workers, each checked element by element on two iterations.
TEST_P(MpiCollectives, EveryCollectiveIsExact) {
  SKIP_WITHOUT_MPI();
  const int n = GetParam();
  std::vector<int64_t> pids;
  {
    Coordinator coord(mpiOptions(n));
    EventClient client(coord);
    ASSERT_TRUE(client.waitJoined(static_cast<size_t>(n))) << client.allLogs();
    for (const WorkerInfo& w : coord.workers()) {
      EXPECT_EQ(w.backend, "mpi");
      EXPECT_TRUE(w.local);
      pids.push_back(w.pid);
    }
    for (Collective c : kAllCollectives) {
      std::vector<std::string> algos = {"mpi-default", "mpi-linear"};
      for (const char* a : {"mpi-ring", "mpi-recursive-doubling", "mpi-rabenseifner"}) {
        if (findLibraryAlgorithm(a)->supports(c)) algos.emplace_back(a);
      }
      for (const std::string& algo : algos) {
        const RunResult r = client.run(request(algo, c, n));
        ASSERT_EQ(r.state, RunState::Done) << algo << " " << toString(c) << ": " << r.error << "\n"
                                           << client.allLogs();
        EXPECT_EQ(r.nranks, n);
        EXPECT_EQ(r.wrong, 0u) << algo << " " << toString(c);
      }
    }
    const RunResult lab = client.run(request("ring", Collective::AllReduce, n));
    ASSERT_EQ(lab.state, RunState::Done) << lab.error;
    EXPECT_EQ(lab.wrong, 0u);
  }
  EXPECT_TRUE(ourMpiruns().empty()) << "mpirun left behind";
  for (int64_t pid : pids) EXPECT_FALSE(processAlive(pid)) << "worker " << pid << " left behind";
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpiCollectives, ::testing::Values(2, 3, 4, 5));

TEST(MpiEngine, HalfAndAverageAreRefusedNamingWhat) {
  SKIP_WITHOUT_MPI();
  Coordinator coord(mpiOptions(2));
  EventClient client(coord);
  ASSERT_TRUE(client.waitJoined(2));
  RunRequest half = request("mpi-ring", Collective::AllReduce, 2);
  half.dtype = DataType::Half;
  const RunResult h = client.run(half);
  EXPECT_NE(h.state, RunState::Done);
  EXPECT_NE(h.error.find("Open MPI has no half"), std::string::npos) << h.error;
  RunRequest avg = request("mpi-ring", Collective::AllReduce, 2);
  avg.op = RedOp::Avg;
  const RunResult a = client.run(avg);
  EXPECT_NE(a.state, RunState::Done);
  EXPECT_NE(a.error.find("average"), std::string::npos) << a.error;
}

// A worker killed mid-run: the run fails naming the rank within the usual bound, the whole
// mpirun set is ended and started again, and nothing is left behind.
TEST(MpiEngine, KilledWorkerFailsTheRunNamingTheRankAndLeavesNothing) {
  SKIP_WITHOUT_MPI();
  std::vector<int64_t> pids;
  {
    Coordinator coord(mpiOptions(4));
    EventClient client(coord);
    ASSERT_TRUE(client.waitJoined(4));
    int64_t victim = 0;
    for (const WorkerInfo& w : coord.workers()) {
      pids.push_back(w.pid);
      if (w.rank == 2) victim = w.pid;
    }
    ASSERT_GT(victim, 0);
    RunRequest req = request("mpi-ring", Collective::AllReduce, 4);
    req.count = 1 << 20;
    req.iterations = 100000;
    req.check = 0;
    const uint64_t id = coord.submit(req);
    ASSERT_TRUE(client.waitRun(id, [](const test::RunRecord& r) { return r.iterations >= 3; }))
        << client.allLogs();
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
    const auto got = client.waitResult(id, std::chrono::seconds(10));
    ASSERT_TRUE(got.has_value());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ measured ] rank 2 killed: run ended after %.3f s: %s\n", s, got->error.c_str());
    EXPECT_LT(s, 3.0);
    EXPECT_EQ(got->state, RunState::Failed);
    EXPECT_EQ(got->failedRank, 2);
    EXPECT_NE(got->error.find("rank 2"), std::string::npos) << got->error;
    EXPECT_NE(got->error.find(std::to_string(victim)), std::string::npos) << got->error;
    // The set is started again whole, and runs exactly.
    const RunResult next = client.run(request("mpi-ring", Collective::AllReduce, 4));
    ASSERT_EQ(next.state, RunState::Done) << next.error << "\n" << client.allLogs();
    EXPECT_EQ(next.wrong, 0u);
    for (const WorkerInfo& w : coord.workers()) pids.push_back(w.pid);
  }
  EXPECT_TRUE(ourMpiruns().empty()) << "mpirun left behind";
  EXPECT_TRUE(processesNamed("orted").empty()) << "orted left behind";
  for (int64_t pid : pids) EXPECT_FALSE(processAlive(pid)) << "worker " << pid << " left behind";
}

// bench --backend cpu,mpi: one table from one set of workers, each lab algorithm beside its
// Open MPI counterpart, a line for the one Open MPI has not, every row naming its backend.
TEST(MpiEngine, BenchBackendListGivesOneTableWithTheBackendOfEachRow) {
  SKIP_WITHOUT_MPI();
  const std::string json =
      ::testing::TempDir() + "mpi_bench_" + std::to_string(::getpid()) + ".json";
  const testutil::Result r =
      testutil::runBinary(ARL_LAB_BINARY,
                          "bench --workers 3 --backend cpu,mpi --algo ring,tree "
                          "-b 64K -e 256K -f 4 -n 3 -w 1 --mca btl self,vader "
                          "--json '" +
                              json + "'");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("mpi has no tree"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("btl self,vader"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Wrong elements        : 0 OK"), std::string::npos) << r.out;
  const nlohmann::json v = nlohmann::json::parse(testutil::slurp(json));
  std::remove(json.c_str());
  std::map<std::string, std::string> backendOf;
  for (const auto& row : v.at("results")) {
    backendOf[row.at("algorithm").get<std::string>()] = row.at("backend").get<std::string>();
    EXPECT_EQ(row.at("wrong").get<int64_t>(), 0);
  }
  EXPECT_EQ(backendOf, (std::map<std::string, std::string>{
                           {"ring", "cpu"}, {"tree", "cpu"}, {"mpi-ring", "mpi"}}));
  // Neither mpirun nor a worker of this build is left (both name the worker's path).
  EXPECT_TRUE(processesNamed(ARL_WORKER_BINARY).empty()) << "mpirun or a worker left behind";
}

TEST(MpiEngine, MissingMpirunIsAClearConfigError) {
  SKIP_WITHOUT_MPI();
  const char* old = std::getenv("PATH");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("PATH", "/nonexistent", 1);
  std::string error;
  try {
    Coordinator coord(mpiOptions(2));
  } catch (const ConfigError& e) {
    error = e.what();
  }
  ::setenv("PATH", saved.c_str(), 1);
  EXPECT_NE(error.find("mpirun is not on PATH"), std::string::npos) << error;
}

}  // namespace
}  // namespace arl
