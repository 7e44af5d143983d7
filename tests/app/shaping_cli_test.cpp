// The network shaping flags of `allreduce-lab plan --run` and `bench`: bad values are refused
// with one line naming the flag and the value, exit code 2, before anything runs; a shaped
// in-process run takes about the time its rate says.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "../run_binary.h"

namespace arl {
namespace {

using testutil::Result;

Result lab(const std::string& args) { return testutil::runBinary(ARL_LAB_BINARY, args); }

struct Case {
  const char* flags;
  const char* says;
};

constexpr Case kBad[] = {
    {"--nic-bw 0", "--nic-bw 0: must be a rate in bytes per second above 0"},
    {"--nic-bw fast", "--nic-bw fast: must be a rate"},
    {"--nic-bw -5M", "--nic-bw -5M: must be a rate"},
    {"--link-latency 5", "--link-latency 5: must be a duration with its unit"},
    {"--link-latency 2hours", "--link-latency 2hours: must be a duration"},
    {"--slow-rank 7:50M", "--slow-rank 7:50M: rank 7 is out of range for 4 ranks (0..3)"},
    {"--slow-rank 1:0", "--slow-rank 1:0: '0' must be a rate"},
    {"--slow-rank 1", "--slow-rank 1: expected R:RATE"},
    {"--slow-rank 1:5M --slow-rank 1:6M", "--slow-rank 1:6M: rank 1 is already slowed"},
    {"--slow-link 2-2:50M", "--slow-link 2-2:50M: a link joins two different ranks"},
    {"--slow-link 1-4:50M", "--slow-link 1-4:50M: rank 4 is out of range for 4 ranks (0..3)"},
    {"--slow-link 1:50M", "--slow-link 1:50M: expected A-B:RATE"},
    {"--slow-link 1-2:5x", "--slow-link 1-2:5x: '5x' must be a rate"},
    {"--topology torus:4x4@1G", "--topology torus:4x4@1G: torus:4x4 has 16 ranks, the run has 4"},
    {"--topology torus:2x2x", "--topology torus:2x2x: torus dimensions '2x2x'"},
    {"--topology fat-tree:3@1G",
     "--topology fat-tree:3@1G: fat-tree:3: leaves of 3 ranks do not divide 4 ranks"},
    {"--topology mesh:2x2", "--topology mesh:2x2: unknown topology 'mesh'"},
    {"--topology torus:2x2@1G --slow-link 1-2:5M",
     "--slow-link 1-2:5M: --topology sets every link's rate; give one or the other"},
};

TEST(ShapingCli, PlanRefusesBadShapingNamingTheFlag) {
  for (const Case& c : kBad) {
    const Result r = lab(std::string("plan --ranks 4 --run ") + c.flags);
    EXPECT_EQ(r.rc, 2) << c.flags << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.flags;
    EXPECT_EQ(r.err.rfind(std::string("allreduce-lab plan: ") + c.says, 0), 0u) << c.flags << "\n"
                                                                                << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  }
}

TEST(ShapingCli, BenchRefusesBadShapingBeforeAnyWorker) {
  for (const Case& c : kBad) {
    const Result r = lab(std::string("bench --workers 4 -b 4K -e 4K -n 1 -w 0 ") + c.flags);
    EXPECT_EQ(r.rc, 2) << c.flags << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.flags;  // no header: no worker was asked for
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.flags << "\n" << r.err;
  }
}

// A rate so low that one message outlasts the stall timeout is refused with what it would take,
// rather than every run being reported as a stall.
TEST(ShapingCli, BenchRefusesARateThatCouldOnlyStall) {
  const Result r = lab("bench --workers 2 -b 4K -e 4K -n 1 -w 0 --nic-bw 1");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "allreduce-lab bench: --nic-bw 1: one 4K message takes 68 min at that rate, longer "
            "than the stall timeout (20 s): every run would stop as stalled; raise the rate, or "
            "--stall-timeout\n");
  const Result link = lab("bench --workers 2 -b 1M -e 1M -n 1 -w 0 --slow-link 0-1:10K");
  EXPECT_EQ(link.rc, 2) << link.err;
  EXPECT_NE(link.err.find("--slow-link 0-1:10K: one 1M message takes 104.9 s"), std::string::npos)
      << link.err;
  // Long enough a timeout makes the same rate acceptable.
  const Result ok = lab("bench --workers 2 -b 4K -e 4K -n 1 -w 0 --nic-bw 1M --stall-timeout 30s");
  EXPECT_EQ(ok.rc, 0) << ok.err;
}

// The world is the local and the remote workers together: a slow rank is checked against it
// before any worker is started or awaited, and the refusal names the occurrence of the flag
// that is wrong.
TEST(ShapingCli, BenchChecksSlowRanksAgainstLocalAndRemoteWorkers) {
  const Result r =
      lab("bench --workers 2 --expect 1 -b 4K -e 4K -n 1 -w 0 --slow-rank 2:50M --slow-rank 3:5M");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "allreduce-lab bench: --slow-rank 3:5M: rank 3 is out of range for 3 ranks "
            "(0..2)\n");
  const Result link = lab("bench --workers 1 --expect 2 -b 4K -e 4K -n 1 -w 0 --slow-link 2-3:5M");
  EXPECT_EQ(link.rc, 2) << link.err;
  EXPECT_NE(link.err.find("--slow-link 2-3:5M: rank 3 is out of range for 3 ranks (0..2)"),
            std::string::npos)
      << link.err;
}

// 2 ranks in a ring all-reduce each send and receive S bytes; at 50 MB/s per port 4 MiB takes
// about 84 ms, whatever the machine's own speed (far above 50 MB/s).
TEST(ShapingCli, PlanRunIsPacedByNicBw) {
  const Result r =
      lab("plan --algo ring --ranks 2 --count 1M --slice 256K --run --iters 2 --warmup 1 --json "
          "--nic-bw 50M");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  const double expectedUs = 4194304.0 / 50e6 * 1e6;
  EXPECT_GE(v.at("time_us").get<double>(), 0.7 * expectedUs);
  EXPECT_LE(v.at("time_us").get<double>(), 3.0 * expectedUs);
  EXPECT_EQ(v.at("shaping").get<std::string>(), "ports 50 MB/s");
  // The prediction is made for the same network.
  EXPECT_GE(v.at("predicted_us").get<double>(), 0.7 * expectedUs);
}

// On torus:2x2 the ring 0, 1, 2, 3 crosses two diagonals (1 -> 2, 3 -> 0), each two hops at
// half the link rate: the ring runs at 25 MB/s, so each rank's 2(n-1)/n x 1 MiB takes about
// 63 ms, measured as the model predicts it.
TEST(ShapingCli, PlanRunIsPacedByATorus) {
  const Result r =
      lab("plan --algo ring --ranks 4 --count 256K --slice 256K --run --iters 2 --warmup 1 "
          "--json --topology torus:2x2@50M");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  const double expectedUs = 1.5 * 1048576.0 / 25e6 * 1e6;
  EXPECT_GE(v.at("time_us").get<double>(), 0.7 * expectedUs);
  EXPECT_LE(v.at("time_us").get<double>(), 3.0 * expectedUs);
  EXPECT_GE(v.at("predicted_us").get<double>(), 0.7 * expectedUs);
  EXPECT_LE(v.at("predicted_us").get<double>(), 1.5 * expectedUs);
  EXPECT_EQ(v.at("shaping").get<std::string>(), "12 links at 25 MB/s to 50 MB/s");
}

}  // namespace
}  // namespace arl
