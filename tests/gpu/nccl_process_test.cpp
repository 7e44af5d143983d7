// --backend nccl end to end, as a user meets it: the worker's and the bench's refusals before
// any run (these run on any machine with a build that has NCCL), and real NCCL runs through
// the coordinator, which need a GPU per rank and skip, saying so, where there is none.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "gpu/nccl_backend.h"
#include "gpu_test_util.h"

namespace arl::gpu {
namespace {

using testutil::Result;
using testutil::runBinary;
using testutil::slurp;

Result bench(const std::string& args) { return runBinary(gputest::labBinary(), "bench " + args); }

// CUDA devices this test process sees (0 without a GPU or a driver).
int deviceCount() {
  for (int n = 64; n > 0; --n) {
    if (!ncclDeviceProblem(n - 1).has_value()) return n;
  }
  return 0;
}

TEST(NcclRefusals, TheWorkerNeedsADevice) {
  const Result r = runBinary(gputest::workerBinary(), "--connect tcp://127.0.0.1:1 --backend nccl");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("--backend nccl: needs --device N: NCCL runs one rank per GPU"),
            std::string::npos)
      << r.err;
}

TEST(NcclRefusals, TheWorkerSaysThereIsNoDevice) {
  if (deviceCount() > 0) GTEST_SKIP() << "a CUDA device is present: nothing to refuse";
  const Result r =
      runBinary(gputest::workerBinary(), "--connect tcp://127.0.0.1:1 --backend nccl --device 0");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("allreduce-worker: backend 'nccl': no CUDA device"), std::string::npos)
      << r.err;
}

TEST(NcclRefusals, BenchRefusesTwoRanksOnOneGpuBeforeStartingAnyWorker) {
  const Result r = bench("--backend nccl --workers 2 --device 0 -b 1M -e 1M");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("--device 0: nccl-ring: ranks 0 and 1 are both on device 0 of host "
                       "localhost; NCCL refuses two ranks on one GPU"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.find("started local worker"), std::string::npos) << r.err;
}

TEST(NcclRefusals, BenchRefusesWhatNcclCannotRun) {
  struct Case {
    const char* args;
    const char* says;
  };
  const Case cases[] = {
      {"--backend nccl --algo ring", "--algo ring: the nccl backend runs NCCL's own collectives"},
      {"--backend nccl --nccl-algo mesh", "--nccl-algo mesh: unknown NCCL algorithm 'mesh'"},
      {"--backend nccl --nccl-algo tree --collective broadcast",
       "algorithm nccl-tree does not implement it"},
      {"--backend nccl --workers 2 --device 0,1,2", "--device 0,1,2: gives 3 devices for 2"},
      {"--backend nccl --workers 2 --device 1,1", "ranks 0 and 1 are both on device 1"},
  };
  for (const Case& c : cases) {
    const Result r = bench(c.args);
    EXPECT_EQ(r.rc, 2) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << ": " << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

// NCCL is opened when a program runs (gpu/nccl_loader.h), never linked: the worker's ELF file
// names neither libnccl nor the driver's libcuda among the libraries it needs to start.
TEST(NcclLinking, TheWorkerNeedsNeitherNcclNorTheDriverToStart) {
  const Result r = runBinary("readelf", "-d '" + gputest::workerBinary() + "'");
  if (r.rc != 0) GTEST_SKIP() << "readelf could not read the worker: " << r.err;
  EXPECT_NE(r.out.find("(NEEDED)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("libnccl"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("libcuda.so"), std::string::npos) << r.out;
}

// A search that finds nothing: ARL_NCCL_LIBRARY names the only candidate (gpu/nccl_loader.h).
// The value it had is put back after each test: the runs after these need the NCCL it names.
class NcclWithoutNccl : public ::testing::Test {
 protected:
  void SetUp() override { env_.set("ARL_NCCL_LIBRARY", "/nonexistent/libnccl.so.2"); }

 private:
  gputest::Env env_;
};

TEST(NcclWithoutNcclFixture, PutsTheUsersNcclBack) {
  struct Probe : NcclWithoutNccl {
    void TestBody() override {}
    using NcclWithoutNccl::SetUp;
    using NcclWithoutNccl::TearDown;
  };
  gputest::Env outer;
  for (const std::optional<std::string>& users :
       {std::optional<std::string>("/venv/nvidia/nccl/lib/libnccl.so.2"),
        std::optional<std::string>()}) {
    outer.set("ARL_NCCL_LIBRARY", users);
    {
      Probe p;
      p.SetUp();
      EXPECT_STREQ(std::getenv("ARL_NCCL_LIBRARY"), "/nonexistent/libnccl.so.2");
      p.TearDown();
    }
    const char* now = std::getenv("ARL_NCCL_LIBRARY");
    EXPECT_EQ(now != nullptr ? std::optional<std::string>(now) : std::nullopt, users);
  }
}

TEST_F(NcclWithoutNccl, TheWorkerRefusesTheNcclBackendInOneLine) {
  const Result r =
      runBinary(gputest::workerBinary(), "--connect tcp://127.0.0.1:1 --backend nccl --device 0");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("allreduce-worker: backend 'nccl': NCCL cannot be loaded from "
                       "ARL_NCCL_LIBRARY: /nonexistent/libnccl.so.2: cannot open shared object "
                       "file"),
            std::string::npos)
      << r.err;
}

TEST_F(NcclWithoutNccl, BenchRefusesTheNcclBackendBeforeStartingAnyWorker) {
  const Result r = bench("--backend nccl --workers 1 --device 0 -b 1M -e 1M");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("backend 'nccl': NCCL cannot be loaded from ARL_NCCL_LIBRARY"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("started local worker"), std::string::npos) << r.err;
}

TEST_F(NcclWithoutNccl, EveryOtherBackendRuns) {
  const Result r = bench("--backend cpu --workers 2 --algo ring -b 64K -e 64K -n 2 -w 1");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find(" ring "), std::string::npos) << r.out;
}

TEST(NcclRefusals, BenchWithoutADeviceRefusesBeforeStartingAnyWorker) {
  if (deviceCount() > 0) GTEST_SKIP() << "a CUDA device is present: nothing to refuse";
  const Result r = bench("--backend nccl --workers 1 -b 1M -e 1M");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("backend 'nccl': no CUDA device"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("started local worker"), std::string::npos) << r.err;
}

// A real run: nccl-ring (and nccl-tree for all-reduce) on one GPU per rank, every element
// checked, rows labelled as NCCL's.
void runOnGpus(int ranks, const std::string& extra) {
  const std::string json =
      ::testing::TempDir() + "nccl_run_" + std::to_string(::getpid()) + ".json";
  std::string devices;
  for (int d = 0; d < ranks; ++d) devices += (d ? "," : "") + std::to_string(d);
  const Result r =
      bench("--backend nccl --workers " + std::to_string(ranks) + " --device " + devices +
            " -b 1M -e 4M -f 4 -n 5 -w 2 -c 3 --json '" + json + "' " + extra);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("profiler plugin reported"), std::string::npos) << r.out;
  const nlohmann::json v = nlohmann::json::parse(slurp(json));
  std::remove(json.c_str());
  ASSERT_FALSE(v.at("results").empty());
  for (const auto& row : v.at("results")) {
    EXPECT_EQ(row.at("algorithm").get<std::string>().rfind("nccl-", 0), 0u) << row.dump();
    EXPECT_EQ(row.at("wrong").get<int64_t>(), 0) << row.dump();
    EXPECT_GT(row.at("time_us").get<double>(), 0) << row.dump();
  }
}

TEST(NcclRun, OneRankOnOneGpu) {
  if (deviceCount() < 1) GTEST_SKIP() << "no CUDA device here: a real NCCL run needs one";
  runOnGpus(1, "--nccl-algo ring");
}

// NCCL's own events, through the worker's profiler plugin, into the trace of a bench with
// `ranks` workers, one GPU each, 3 timed iterations: how many collectives and kernel
// channels, labelled as NCCL's, and the trace's summary.
struct NcclTraceCounts {
  int colls = 0;
  int kernels = 0;
  nlohmann::json otherData;
};

NcclTraceCounts ncclTrace(int ranks) {
  const std::string trace =
      ::testing::TempDir() + "nccl_trace_" + std::to_string(::getpid()) + ".json";
  std::string devices;
  for (int d = 0; d < ranks; ++d) devices += (d ? "," : "") + std::to_string(d);
  const Result r = bench("--backend nccl --workers " + std::to_string(ranks) + " --device " +
                         devices + " -b 1M -e 1M -n 3 -w 1 --nccl-algo ring --telemetry " +
                         "chunks --trace '" + trace + "'");
  EXPECT_EQ(r.rc, 0) << r.err << r.out;
  NcclTraceCounts n;
  if (r.rc != 0) return n;
  const nlohmann::json t = nlohmann::json::parse(slurp(trace));
  std::remove(trace.c_str());
  for (const auto& e : t.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("cat") != "NCCL") continue;
    const std::string name = e.at("name").get<std::string>();
    if (name.rfind("NCCL Ring/", 0) == 0) ++n.colls;
    if (name.rfind("NCCL kernel, channel ", 0) == 0) ++n.kernels;
  }
  n.otherData = t.at("otherData");
  return n;
}

// Two ranks on two GPUs of one node: each rank's collective with NCCL's choice and its kernel
// channels; no proxy steps (no network), and the trace says why.
TEST(NcclRun, TwoRanksTraceHoldsNcclsOwnEvents) {
  if (deviceCount() < 2) {
    GTEST_SKIP() << "fewer than 2 CUDA devices here (" << deviceCount()
                 << "): NCCL's collective events need two ranks, and NCCL refuses two ranks "
                    "on one GPU";
  }
  const NcclTraceCounts n = ncclTrace(2);
  EXPECT_EQ(n.colls, 2 * 3) << "one collective per rank and timed iteration";
  EXPECT_GE(n.kernels, 2 * 3) << "at least one kernel channel per rank and timed iteration";
  EXPECT_EQ(n.otherData.at("nccl_proxy_steps"), 0);
  EXPECT_TRUE(n.otherData.contains("nccl_note"));
}

TEST(NcclRun, TwoRanksRingAndTreeSumAndAvg) {
  if (deviceCount() < 2) {
    GTEST_SKIP() << "fewer than 2 CUDA devices here (" << deviceCount()
                 << "): NCCL refuses two ranks on one GPU";
  }
  runOnGpus(2, "--nccl-algo ring,tree");
  runOnGpus(2, "--nccl-algo ring,tree -o avg");
  runOnGpus(2, "--nccl-algo ring -o avg -d half");
  runOnGpus(2, "--nccl-algo ring --collective reducescatter");
  runOnGpus(2, "--nccl-algo ring --collective allgather --in-place");
  runOnGpus(2, "--nccl-algo ring --collective broadcast -r 1");
  runOnGpus(2, "--nccl-algo ring --collective reduce -o max -d int32");
}

}  // namespace
}  // namespace arl::gpu
