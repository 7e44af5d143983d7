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
#include <vector>

#include "schedule/generators.h"

namespace arl {
namespace {

struct Result {
  int rc = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs the lab binary with `args` (already shell-safe words), capturing stdout and stderr.
Result plan(const std::string& args) {
  const std::string base = ::testing::TempDir() + "plan_cli_" + std::to_string(::getpid());
  const std::string out = base + ".out", err = base + ".err";
  const std::string cmd =
      std::string("'") + ARL_LAB_BINARY + "' plan " + args + " >'" + out + "' 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  Result r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

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
    const Result r = plan("--algo " + algo +
                          " --ranks 5 --count 1001 --chunk 256 --ranks-per-host 2 --json --run "
                          "--iters 1 --warmup 0");
    ASSERT_EQ(r.rc, 0) << algo << ": " << r.err << r.out;
    const nlohmann::json v = nlohmann::json::parse(r.out);
    EXPECT_TRUE(v.at("verified").get<bool>()) << algo << ": " << v.at("verify_message").get<std::string>();
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
  const Result r = plan("--help");
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("usage: allreduce-lab plan"), std::string::npos);
  EXPECT_NE(r.out.find("--chunk"), std::string::npos);
}

TEST(PlanCli, BadInputIsOneLineNamingTheArgument) {
  struct Case {
    const char* args;
    const char* names;
  };
  const Case cases[] = {
      {"--ranks 0", "--ranks"},
      {"--ranks 65", "--ranks"},
      {"--ranks four", "--ranks"},
      {"--ranks 99999999999", "--ranks must be between"},
      {"--algo nope", "--algo"},
      {"--dtype complex", "--dtype"},
      {"--op xor", "--op"},
      {"--collective alltoall", "--collective"},
      {"--chunk 0", "--chunk"},
      {"--chunk 2 --dtype float", "--chunk"},
      {"--count 99999999999999999999", "--count"},
      {"--count 16000000000000000 --ranks 8", "--count"},
      {"--count 1.5M", "--count"},
      {"--frobnicate", "--frobnicate"},
      {"--ranks", "--ranks"},
      {"--algo recursive-doubling --collective reduce", "--collective"},
      {"--root 4 --ranks 4 --collective reduce", "--root"},
      {"--inflight 0", "--inflight"},
      {"--iters 0 --run", "--iters"},
  };
  for (const Case& c : cases) {
    const Result r = plan(std::string(c.args) + " --run");
    EXPECT_EQ(r.rc, 2) << c.args << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1u) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << c.args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("allreduce-lab plan: ", 0), 0u) << r.err;
    EXPECT_EQ(r.out, "") << c.args << ": nothing runs on bad input";
  }
  EXPECT_EQ(plan("--ranks 0").err,
            "allreduce-lab plan: --ranks must be between 1 and 64 (got 0)\n");
}

}  // namespace
}  // namespace arl
