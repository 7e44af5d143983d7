// MSCCL algorithm files on real workers: `allreduce-lab bench --schedule FILE.xml` starts
// worker processes, sends them the file, and every rank imports and runs its schedule over
// the real data plane; every element is checked. `plan --import` refuses the file with the
// wrong dependency, naming the step, and proves the good ones.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "../run_binary.h"

namespace arl {
namespace {

using testutil::Result;
using testutil::runBinary;

std::string example(const std::string& name) {
  return std::string(ARL_SOURCE_DIR) + "/docs/examples/" + name;
}

class MscclOnWorkers : public ::testing::TestWithParam<const char*> {};

TEST_P(MscclOnWorkers, RunsExactly) {
  const std::string json = ::testing::TempDir() + "msccl_" + std::to_string(::getpid()) + ".json";
  const Result r = runBinary(ARL_LAB_BINARY, "bench --schedule '" + example(GetParam()) +
                                                 "' -b 4K -e 1M -f 16 --slice 64K -n 3 -w 1 -c 2 "
                                                 "--json '" +
                                                 json + "'");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const nlohmann::json v = nlohmann::json::parse(testutil::slurp(json));
  ASSERT_EQ(v.at("results").size(), 3u) << r.out;
  for (const nlohmann::json& row : v.at("results")) {
    EXPECT_EQ(row.at("algorithm").get<std::string>().rfind("msccl:", 0), 0u);
    EXPECT_EQ(row.at("state").get<std::string>(), "done");
    EXPECT_EQ(row.at("wrong").get<int64_t>(), 0);
  }
  std::remove(json.c_str());
}

INSTANTIATE_TEST_SUITE_P(Examples, MscclOnWorkers,
                         ::testing::Values("msccl-ring-4.xml", "msccl-ring-8.xml",
                                           "msccl-hierarchical-4.xml"));

TEST(MscclPlan, ProvesTheRingAndRunsIt) {
  const Result r = runBinary(ARL_LAB_BINARY, "plan --import '" + example("msccl-ring-4.xml") +
                                                 "' --count 64K --run --iters 2");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("msccl:ring allreduce, 4 ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verifier: OK"), std::string::npos) << r.out;
}

TEST(MscclPlan, NamesTheStepOfTheWrongDependency) {
  const std::string file = example("msccl-ring-4-wrong-dep.xml");
  const Result r = runBinary(ARL_LAB_BINARY, "plan --import '" + file + "' --run");
  EXPECT_EQ(r.rc, 2) << r.err << r.out;
  EXPECT_NE(r.err.find(file + ":53: gpu 2 tb 1 step 3 (line 53) and gpu 2 tb 0 step 2"),
            std::string::npos)
      << r.err;
  const Result b = runBinary(ARL_LAB_BINARY, "bench --schedule '" + file + "' -b 4K -e 4K");
  EXPECT_EQ(b.rc, 2) << b.err << b.out;
  EXPECT_NE(b.err.find(":53: gpu 2 tb 1 step 3"), std::string::npos) << b.err;
}

TEST(MscclPlan, RefusesAMalformedFileWithItsLine) {
  const std::string bad = ::testing::TempDir() + "msccl_bad_" + std::to_string(::getpid()) + ".xml";
  {
    std::FILE* f = std::fopen(bad.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(
        "<algo name=\"x\" coll=\"allreduce\" ngpus=\"2\" nchunksperloop=\"2\">\n"
        "  <gpu id=\"0\" i_chunks=\"2\" o_chunks=\"2\">\n",
        f);
    std::fclose(f);
  }
  const Result r = runBinary(ARL_LAB_BINARY, "plan --import '" + bad + "'");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find(bad + ":2: the file ends inside <gpu>, opened here (truncated?)"),
            std::string::npos)
      << r.err;
  std::remove(bad.c_str());
}

}  // namespace
}  // namespace arl
