// Runs the built `allreduce-lab plan` and checks its output, JSON and exit codes.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../run_binary.h"
#include "schedule/generators.h"

namespace arl {
namespace {

using testutil::Result;
using testutil::runBinary;

Result lab(const std::string& args) { return runBinary(ARL_LAB_BINARY, args); }
Result plan(const std::string& args) { return lab("plan " + args); }

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n' ? 1 : 0;
  return n;
}

TEST(PlanCli, JsonHasEveryFieldAndRunsClean) {
  const Result r = plan("--algo ring --ranks 4 --count 1000 --chunk 1K --json --run --iters 2");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(lines(r.out), 1u);  // one JSON object, no table
  const nlohmann::json v = nlohmann::json::parse(r.out);
  EXPECT_EQ(v.at("algorithm").get<std::string>(), "ring");
  EXPECT_EQ(v.at("collective").get<std::string>(), "allreduce");
  EXPECT_EQ(v.at("ranks").get<int64_t>(), 4);
  EXPECT_EQ(v.at("count").get<int64_t>(), 1000);
  EXPECT_EQ(v.at("dtype").get<std::string>(), "float");
  EXPECT_EQ(v.at("op").get<std::string>(), "sum");
  EXPECT_EQ(v.at("slice_bytes").get<int64_t>(), 1024);
  EXPECT_TRUE(v.at("verified").get<bool>());
  EXPECT_EQ(v.at("verify_message").get<std::string>(), "");
  EXPECT_EQ(v.at("steps").get<int64_t>(), 6);  // 2(n-1)
  EXPECT_GT(v.at("predicted_us").get<double>(), 0);
  EXPECT_GT(v.at("simulated_us").get<double>(), 0);
  EXPECT_GT(v.at("time_us").get<double>(), 0);
  EXPECT_GT(v.at("algbw_gbps").get<double>(), 0);
  // busbw = algbw * 2(n-1)/n
  EXPECT_NEAR(v.at("busbw_gbps").get<double>(), v.at("algbw_gbps").get<double>() * 1.5,
              1e-9 * v.at("algbw_gbps").get<double>());
  EXPECT_EQ(v.at("wrong").get<int64_t>(), 0);
  EXPECT_EQ(v.at("iteration_us").size(), 2u);
}

TEST(PlanCli, EveryAlgorithmVerifiesAndRunsCorrectly) {
  for (const std::string& algo : algorithmNames()) {
    const std::string ranks = rankCountRefusal(algo, 5).empty() ? "5" : "4";
    const Result r = plan("--algo " + algo + " --ranks " + ranks +
                          " --count 1001 --chunk 256 --ranks-per-host 2 --json --run "
                          "--iters 1 --warmup 0");
    ASSERT_EQ(r.rc, 0) << algo << ": " << r.err << r.out;
    const nlohmann::json v = nlohmann::json::parse(r.out);
    EXPECT_TRUE(v.at("verified").get<bool>())
        << algo << ": " << v.at("verify_message").get<std::string>();
    EXPECT_EQ(v.at("wrong").get<int64_t>(), 0) << algo;
  }
}

TEST(PlanCli, RingRunsEveryCollective) {
  for (const char* c : {"reducescatter", "allgather", "reduce --root 2", "broadcast --root 1"}) {
    const Result r = plan(std::string("--algo ring --ranks 3 --count 100 --chunk 64 --dtype int32 "
                                      "--op max --json --run --in-place --iters 1 --collective ") +
                          c);
    ASSERT_EQ(r.rc, 0) << c << ": " << r.err << r.out;
    const nlohmann::json v = nlohmann::json::parse(r.out);
    EXPECT_TRUE(v.at("verified").get<bool>()) << c;
    EXPECT_EQ(v.at("wrong").get<int64_t>(), 0) << c;
    EXPECT_TRUE(v.at("in_place").get<bool>());
  }
}

TEST(PlanCli, TablePrintsStepsProvenanceVerdictModelAndMetrics) {
  const Result r = plan("--algo ring --ranks 3 --count 6 --chunk 8 --run --iters 1");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("step  rank"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("RecvReduceSend"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("RecvReduceCopySend"), std::string::npos) << r.out;
  // After the reduce-scatter half, a finished chunk holds every rank's contribution.
  EXPECT_NE(r.out.find("{0,1,2}"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verifier: OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("alpha-beta-gamma"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("simulated"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("#wrong"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("condensed"), std::string::npos) << r.out;
}

TEST(PlanCli, BigSchedulesAreCondensedAndSaySo) {
  const Result sliced = plan("--algo ring --ranks 8 --count 64K --chunk 1K");
  ASSERT_EQ(sliced.rc, 0) << sliced.err;
  EXPECT_NE(sliced.out.find("condensed"), std::string::npos);
  EXPECT_LT(lines(sliced.out), 200u);
  const Result wide = plan("--algo ring --ranks 64 --count 64K --chunk 1K");
  ASSERT_EQ(wide.rc, 0) << wide.err;
  EXPECT_NE(wide.out.find("condensed"), std::string::npos);
  EXPECT_LT(lines(wide.out), 200u);
}

TEST(PlanCli, HelpPrintsUsage) {
  for (const char* h : {"--help", "-h"}) {
    const Result r = plan(h);
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("Usage: allreduce-lab plan"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--slice,--chunk SIZE"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--ring-order LIST"), std::string::npos) << r.out;
    EXPECT_EQ(r.err, "");
  }
}

TEST(LabCli, HelpListsTheCommandsAndBadCommandsAreRefused) {
  const Result help = lab("--help");
  EXPECT_EQ(help.rc, 0) << help.err;
  EXPECT_NE(help.out.find("plan"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("bench"), std::string::npos) << help.out;
  struct Case {
    const char* args;
    const char* says;
  };
  const Case cases[] = {
      {"frobnicate", "allreduce-lab: unknown command 'frobnicate'"},
      // Options without a command are the window's (`allreduce-lab` alone opens it).
      {"--frobnicate", "allreduce-lab gui: "},
      {"plan bench", "allreduce-lab plan: "},
  };
  for (const Case& c : cases) {
    const Result r = lab(c.args);
    EXPECT_EQ(r.rc, 2) << c.args << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1u) << c.args << ": " << r.err;
    EXPECT_EQ(r.err.rfind(c.says, 0), 0u) << c.args << ": " << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

TEST(WorkerCli, HelpExitsZeroAndBadArgumentsAreOneLine) {
  const Result help = runBinary(ARL_WORKER_BINARY, "--help");
  EXPECT_EQ(help.rc, 0) << help.err;
  EXPECT_NE(help.out.find("Usage: allreduce-worker"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--connect ENDPOINT"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("--parent-pid"), std::string::npos) << "set by the lab, not for users";
  struct Case {
    const char* args;
    const char* says;
  };
  const Case cases[] = {
      {"", "--connect is required"},
      {"--connect nowhere", "--connect nowhere: not an endpoint"},
      {"--connect inproc://x", "--connect inproc://x: not an endpoint"},
      {"--connect tcp://127.0.0.1:1 --device 1024",
       "--device 1024: must be an integer in -1..1023"},
      {"--connect tcp://127.0.0.1:1 --device x", "--device x:"},
      // A build with CUDA refuses the device (none, or no device 1023) before joining.
      {"--connect tcp://127.0.0.1:1 --backend cuda --device 1023",
       ARL_BUILD_HAS_CUDA ? "allreduce-worker: backend 'cuda': "
                          : "--backend cuda: backend 'cuda' needs a build with CUDA"},
      {"--connect tcp://127.0.0.1:1 --backend tpu", "--backend tpu: unknown backend"},
      {"--connect tcp://127.0.0.1:1 --parent-pid 0", "--parent-pid 0:"},
      {"--connect tcp://127.0.0.1:1 --frobnicate", "--frobnicate"},
      {"--connect", "--connect"},
  };
  for (const Case& c : cases) {
    const Result r = runBinary(ARL_WORKER_BINARY, c.args);
    EXPECT_EQ(r.rc, 2) << c.args << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1u) << c.args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("allreduce-worker: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << ": " << r.err;
  }
}

TEST(PlanCli, SliceAndChunkAreOneFlag) {
  const Result slice = plan("--ranks 3 --count 96 --slice 32 --json");
  const Result chunk = plan("--ranks 3 --count 96 --chunk 32 --json");
  ASSERT_EQ(slice.rc, 0) << slice.err;
  ASSERT_EQ(chunk.rc, 0) << chunk.err;
  EXPECT_EQ(slice.out, chunk.out);
  EXPECT_EQ(nlohmann::json::parse(slice.out).at("slice_elems").get<int>(), 8);
  // The last one given wins, whichever name it has.
  const Result both = plan("--ranks 3 --count 96 --slice 8 --chunk 32 --json");
  EXPECT_EQ(both.out, chunk.out);
}

// The ring order decides who sends to whom; the result stays exact.
TEST(PlanCli, RingOrderChangesThePeersAndRunsExactly) {
  const Result r = plan("--ranks 4 --count 8 --slice 8 --ring-order 0,2,1,3 --run --iters 2");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("ring 0,2,1,3"), std::string::npos) << r.out;
  // Step 0: each rank sends to its successor on the ring 0 -> 2 -> 1 -> 3 -> 0.
  for (const char* row : {"    0     0  reduce-scatter Send               ->2 ",
                          "    0     2  reduce-scatter Send               ->1 ",
                          "    0     1  reduce-scatter Send               ->3 ",
                          "    0     3  reduce-scatter Send               ->0 "}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  }
  for (const char* collective : {"allreduce", "reducescatter", "allgather"}) {
    for (const auto& [ranks, ring] :
         {std::pair{4, "3,2,1,0"}, std::pair{5, "0,2,4,1,3"}, std::pair{5, "4,0,3,1,2"}}) {
      const std::string args = "--ranks " + std::to_string(ranks) +
                               " --count 1001 --slice 64 --dtype int32 --collective " + collective +
                               " --ring-order " + ring + " --json --run --iters 1";
      const Result j = plan(args);
      ASSERT_EQ(j.rc, 0) << args << ": " << j.err;
      const nlohmann::json v = nlohmann::json::parse(j.out);
      EXPECT_TRUE(v.at("verified").get<bool>()) << args;
      EXPECT_EQ(v.at("wrong").get<int>(), 0) << args;
    }
  }
}

// --radix sets knomial's k: the header says it, the rounds follow it, the result stays exact.
TEST(PlanCli, RadixShapesTheKnomialTreeAndRunsExactly) {
  const Result text = plan("--algo knomial --ranks 9 --count 100 --slice 64 --radix 3");
  ASSERT_EQ(text.rc, 0) << text.err;
  EXPECT_NE(text.out.find(", radix 3,"), std::string::npos) << text.out;
  EXPECT_NE(plan("--algo knomial --ranks 9 --count 100").out.find(", radix 4,"), std::string::npos);
  for (const auto& [radix, steps] : {std::pair{2, 8}, std::pair{3, 4}, std::pair{9, 2}}) {
    const Result r = plan(
        "--algo knomial --ranks 9 --count 1001 --slice 64 --dtype int32 --json "
        "--run --iters 1 --radix " +
        std::to_string(radix));
    ASSERT_EQ(r.rc, 0) << radix << ": " << r.err;
    const nlohmann::json v = nlohmann::json::parse(r.out);
    EXPECT_EQ(v.at("radix").get<int>(), radix);
    EXPECT_EQ(v.at("steps").get<int>(), steps) << radix;  // 2 ceil(log_k 9)
    EXPECT_TRUE(v.at("verified").get<bool>()) << radix;
    EXPECT_EQ(v.at("wrong").get<int>(), 0) << radix;
  }
}

// ring's window (--window): the plan says it, verifies the schedule at its capacity, runs it
// exactly, and the model's closed form pays a step's latency once a window; other algorithms
// take their slices one by one.
TEST(PlanCli, AWindowOrdersTheRingAndRunsExactly) {
  const Result text = plan("--algo ring --ranks 4 --count 1000 --slice 16 --window 8");
  ASSERT_EQ(text.rc, 0) << text.err;
  EXPECT_NE(text.out.find(", slice 16 (4 elements), window 8 slices"), std::string::npos)
      << text.out;
  for (const char* algo : {"ring", "tree"}) {
    for (const char* window : {"1", "8"}) {
      const Result r =
          plan(std::string("--algo ") + algo +
               " --ranks 4 --count 1000 --slice 16 --json --run --iters 1 --window " + window);
      ASSERT_EQ(r.rc, 0) << algo << " " << window << ": " << r.err;
      const nlohmann::json v = nlohmann::json::parse(r.out);
      EXPECT_EQ(v.at("window").get<int>(), std::string(algo) == "ring" ? std::stoi(window) : 1);
      EXPECT_TRUE(v.at("verified").get<bool>()) << algo << " " << window;
      EXPECT_EQ(v.at("wrong").get<int>(), 0) << algo << " " << window;
    }
  }
  const Result bad = plan("--algo ring --ranks 4 --count 1000 --window 0");
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("--window 0: must be in 1..1024"), std::string::npos) << bad.err;
}

// Swing off a power of two (gen_swing.cpp): an even count by overlapping reach sets, an odd
// one folding rank n-1 in, swing-latency folding neighbour pairs; verified and exact, with the
// steps the file comment gives.
TEST(PlanCli, SwingRunsOffAPowerOfTwoExactly) {
  const struct {
    const char* algo;
    int ranks;
    int steps;
  } cases[] = {{"swing", 6, 6},         {"swing", 7, 10},        {"swing", 12, 8},
               {"swing-latency", 6, 4}, {"swing-latency", 7, 4}, {"swing-latency", 12, 5}};
  for (const auto& c : cases) {
    const Result r = plan(std::string("--algo ") + c.algo + " --ranks " + std::to_string(c.ranks) +
                          " --count 1001 --slice 64 --dtype int32 --json --run --iters 1");
    ASSERT_EQ(r.rc, 0) << c.algo << " " << c.ranks << ": " << r.err;
    const nlohmann::json v = nlohmann::json::parse(r.out);
    EXPECT_TRUE(v.at("verified").get<bool>()) << c.algo << " " << c.ranks;
    EXPECT_EQ(v.at("wrong").get<int>(), 0) << c.algo << " " << c.ranks;
    EXPECT_EQ(v.at("steps").get<int>(), c.steps) << c.algo << " " << c.ranks;
  }
}

TEST(PlanCli, BadInputIsOneLineNamingTheArgument) {
  struct Case {
    const char* args;
    const char* names;
  };
  const Case cases[] = {
      {"--ranks 0", "--ranks 0: must be in 1..64"},
      {"--ranks 65", "--ranks 65: must be in 1..64"},
      {"--ranks four", "--ranks four: not an integer"},
      {"--ranks 99999999999", "--ranks 99999999999: must be in 1..64"},
      {"--algo nope", "--algo nope: unknown (known: ring, "},
      {"--dtype complex", "--dtype complex: unknown type"},
      {"--op xor", "--op xor: unknown reduction"},
      {"--collective alltoall", "--collective alltoall: unknown collective"},
      {"--chunk 0", "--chunk 0: must be a whole number, at least 1, of float elements"},
      // Once rounded silently to one element; bench refused it, and now both do.
      {"--chunk 6 --dtype float", "--chunk 6: must be a whole number, at least 1, of float"},
      {"--slice 2 --dtype float", "--slice 2: must be a whole number"},
      {"--slice 12 --dtype double", "--slice 12: must be a whole number, at least 1, of double"},
      {"--count 4M --slice 4", "--slice 4: cuts 4194304 elements on each of 4 ranks into more"},
      {"--count 99999999999999999999", "--count 99999999999999999999: not a whole number"},
      {"--count 16000000000000000 --ranks 8", "--count 16000000000000000: must be in 0.."},
      {"--count 1.5M", "--count 1.5M:"},
      {"--frobnicate", "--frobnicate"},
      {"--ranks", "--ranks"},
      {"--algo recursive-doubling --collective reduce",
       "--collective reduce: algorithm recursive-doubling does not implement it"},
      {"--root 4 --ranks 4 --collective reduce", "--root 4: must be in 0..3"},
      // Once accepted up to 64 whatever the ranks, and 1048576 slices in flight.
      {"--ranks-per-host 5", "--ranks-per-host 5: must be in 0..4"},
      {"--ranks 2 --ranks-per-host 64", "--ranks-per-host 64: must be in 0..2"},
      {"--algo knomial --radix 1", "--radix 1: must be in 2..4"},
      {"--algo knomial --radix 5", "--radix 5: must be in 2..4"},
      {"--algo knomial --radix two", "--radix two: not an integer"},
      {"--inflight 0", "--inflight 0: must be in 1..1024"},
      {"--inflight 1025", "--inflight 1025: must be in 1..1024"},
      {"--inflight 1048576", "--inflight 1048576: must be in 1..1024"},
      {"--iters 0 --run", "--iters 0: must be in 1..1000000"},
      {"--warmup -1", "--warmup -1: must be in 0..1000000"},
      {"--ring-order 0,1,2", "--ring-order 0,1,2: must name each of the 4 ranks 0..3 once"},
      {"--ring-order 0,1,2,3,4", "--ring-order 0,1,2,3,4: must name each of the 4 ranks"},
      {"--ring-order 0,1,1,3",
       "--ring-order 0,1,1,3: must name each of the 4 ranks 0..3 once (1 "
       "comes twice)"},
      {"--ring-order 0,1,2,4", "(4 is not a rank)"},
      {"--ring-order 0,1,,3", "--ring-order 0,1,,3: an empty item"},
      {"--ring-order 0,one,2,3", "--ring-order one: not an integer"},
      {"--stall-timeout 0s", "--stall-timeout 0s: must be whole milliseconds from 1ms to 3600s"},
      {"--stall-timeout 5", "--stall-timeout 5: not a duration: a whole number with a unit"},
      {"--stall-timeout 1500us", "--stall-timeout 1500us: must be whole milliseconds"},
      {"--stall-timeout 2h", "--stall-timeout 2h: not a duration"},
      {"--stall-timeout 3601s", "--stall-timeout 3601s: must be whole milliseconds"},
  };
  for (const Case& c : cases) {
    const Result r = plan(std::string(c.args) + " --run");
    EXPECT_EQ(r.rc, 2) << c.args << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1u) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << c.args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("allreduce-lab plan: ", 0), 0u) << r.err;
    EXPECT_EQ(r.out, "") << c.args << ": nothing runs on bad input";
  }
  EXPECT_EQ(plan("--ranks 0").err, "allreduce-lab plan: --ranks 0: must be in 1..64\n");
  EXPECT_EQ(plan("--inflight 2000").err,
            "allreduce-lab plan: --inflight 2000: must be in 1..1024\n");
}

}  // namespace
}  // namespace arl

namespace arl {
namespace {

TEST(PlanCli, TakesBenchsShortTypeAndOpFlagsAndRefusesNoElements) {
  const testutil::Result r =
      testutil::runBinary(ARL_LAB_BINARY, "plan -d int32 -o max --ranks 3 --count 1K --run --json");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  EXPECT_EQ(v.at("dtype").get<std::string>(), "int32");
  EXPECT_EQ(v.at("op").get<std::string>(), "max");
  const testutil::Result zero = testutil::runBinary(ARL_LAB_BINARY, "plan --count 0");
  EXPECT_EQ(zero.rc, 2);
  EXPECT_EQ(zero.err, "allreduce-lab plan: --count 0: must be at least 1\n");
}

TEST(PlanCli, NamesUnexpectedArgumentsInTheOrderTyped) {
  const testutil::Result r = testutil::runBinary(ARL_LAB_BINARY, "plan --bogus x y");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "allreduce-lab plan: unexpected arguments: --bogus x y (see --help)\n");
  const testutil::Result cmd = testutil::runBinary(ARL_LAB_BINARY, "frobnicate");
  EXPECT_EQ(cmd.rc, 2);
  EXPECT_NE(cmd.err.find("unknown command 'frobnicate' (known: plan, model, bench,"),
            std::string::npos)
      << cmd.err;
  EXPECT_NE(cmd.err.find("train"), std::string::npos) << cmd.err;
}

TEST(PlanCli, RefusesACalibrationPathThatIsNotAFile) {
  ::setenv("ARL_CALIBRATION", "/tmp", 1);
  const testutil::Result r = testutil::runBinary(ARL_LAB_BINARY, "plan");
  ::unsetenv("ARL_CALIBRATION");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("the calibration path /tmp is a folder, not a calibration file"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace arl
