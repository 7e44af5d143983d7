// `allreduce-lab model map`: the model's crossover map as a table and JSON, labelled as the
// model's on every output; bad arguments are refused with one line naming the flag.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "../run_binary.h"

namespace arl {
namespace {

using testutil::Result;

Result lab(const std::string& args) { return testutil::runBinary(ARL_LAB_BINARY, args); }

constexpr const char* kModel = " --alpha 5us --beta 4e-10 --gamma 2e-10";

TEST(ModelMapCli, PrintsTheTableAndJsonLabelledAsTheModel) {
  const std::string json = ::testing::TempDir() + "arl-map.json";
  const Result r =
      lab(std::string("model map --ranks 4..16 --sizes 4K..1M --json ") + json + kModel);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("# crossover map of all-reduce: model, not measured"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("alpha 5.0 us per message, port 2.50 GB/s each way, reduce 5.00 GB/s"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\n    16 "), std::string::npos) << "a row per rank count: " << r.out;
  std::ifstream in(json);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json v = nlohmann::json::parse(text.str());
  EXPECT_EQ(v.at("label"), "model, not measured");
  EXPECT_EQ(v.at("measured"), false);
  EXPECT_EQ(v.at("ranks"), nlohmann::json::parse("[4, 8, 16]"));
  EXPECT_EQ(v.at("sizes").size(), 5u);
  ASSERT_EQ(v.at("cells").size(), 15u);
  for (const auto& c : v.at("cells")) {
    EXPECT_EQ(c.at("method"), "closed form");
    EXPECT_GE(c.at("margin").get<double>(), 0);
    EXPECT_EQ(c.at("winner"), c.at("algorithms").at(0).at("algorithm"));
  }
  std::remove(json.c_str());
}

TEST(ModelMapCli, ATopologyIsSimulatedWhereItFits) {
  const Result r = lab(std::string("model map --ranks 8,16 --sizes 4K,1M --topology "
                                   "torus:4x4@1G --link-latency 2us") +
                       kModel);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("# topology: torus:4x4@1G (torus 4x4 with wrap-around"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("# note: 8 ranks: not priced: torus:4x4 has 16 ranks, the run has 8"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("*"), std::string::npos) << "simulated cells are marked: " << r.out;
}

struct Case {
  const char* flags;
  const char* says;
};

TEST(ModelMapCli, RefusesBadArgumentsNamingTheFlag) {
  const Case cases[] = {
      {"--ranks 1..8", "--ranks 1: must be in 2..1048576"},
      {"--ranks 16..4", "--ranks 16..4: the range ends below its start"},
      {"--sizes 4K..1Mx1", "--sizes 1: must be in 2..1024"},
      {"--algo ring,bogus", "--algo ring,bogus: 'bogus' is not an algorithm"},
      {"--alpha 5", "--alpha 5: must be a duration above 0 with its unit"},
      {"--beta 0", "--beta 0: must be a number of seconds per byte above 0"},
      {"--topology ring:4", "--topology ring:4: unknown topology 'ring'"},
  };
  for (const Case& c : cases) {
    const Result r = lab(std::string("model map --ranks 4,8 --sizes 4K ") + c.flags);
    EXPECT_EQ(r.rc, 2) << c.flags << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.flags;
    EXPECT_EQ(r.err.rfind(std::string("allreduce-lab model map: ") + c.says, 0), 0u)
        << c.flags << "\n"
        << r.err;
  }
}

}  // namespace
}  // namespace arl
