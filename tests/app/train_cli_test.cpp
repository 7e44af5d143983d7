// Runs the built `allreduce-lab train` as a user would: bad flags are refused with one line
// naming the flag before any worker starts; a short run prints its table and writes JSON and
// CSV that say the same.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../run_binary.h"

namespace arl {
namespace {

using testutil::Result;
using testutil::runBinary;

Result train(const std::string& args) { return runBinary(ARL_LAB_BINARY, "train " + args); }

TEST(TrainCli, BadFlagsAreRefusedWithOneLineNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--bucket 0", "--bucket 0:"},
      {"--overlap maybe", "--overlap maybe:"},
      {"--sync gossip", "--sync gossip:"},
      {"--model 784", "--model 784:"},
      {"--model 784x0x10", "--model 784x0x10:"},
      {"--optimizer rmsprop", "--optimizer rmsprop:"},
      {"--lr -1", "--lr -1:"},
      {"--steps 0", "--steps 0:"},
      {"--workers 4 --batch 30", "--batch 30:"},
      {"--slow-compute 9:2", "--slow-compute"},
      {"--slow-compute 1:0.5", "--slow-compute"},
      {"--algo nope", "--algo nope:"},
      {"--sync ps --algo ring", "--algo ring:"},
      {"--slice 6", "--slice 6:"},
      {"--nic-bw fast", "--nic-bw fast:"},
      {"--workers 1 --sync ps-async", "--sync"},
  };
  for (const auto& [args, named] : cases) {
    const Result r = train(args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(named), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

TEST(TrainCli, AShortRunPrintsItsStepsAndWritesJsonAndCsv) {
  const auto dir = std::filesystem::temp_directory_path() / "arl-train-cli";
  std::filesystem::create_directories(dir);
  const std::string json = (dir / "t.json").string(), csv = (dir / "t.csv").string();
  const Result r = train(
      "--workers 2 --model 16x8x3 --batch 8 --steps 3 --bucket 64 --slice 64 "
      "--overlap both --json " +
      json + " --csv " + csv);
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("replicas bitwise identical after every step"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("overlap on against off"), std::string::npos) << r.out;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["runs"].size(), 2u);
  for (const auto& run : j["runs"]) {
    ASSERT_EQ(run["steps"].size(), 3u);
    for (const auto& s : run["steps"]) {
      EXPECT_TRUE(s["identical"].get<bool>());
      EXPECT_GT(s["compute_us"].get<double>(), 0);
      EXPECT_GE(s["exposed_us"].get<double>(), 0);
    }
  }
  std::ifstream c(csv);
  std::string header;
  std::getline(c, header);
  EXPECT_NE(header.find("exposed_us"), std::string::npos) << header;
  int rows = 0;
  for (std::string l; std::getline(c, l);) ++rows;
  EXPECT_EQ(rows, 6);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace arl
