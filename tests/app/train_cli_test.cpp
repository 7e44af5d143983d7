// Runs the built `allreduce-lab train` as a user would: bad flags are refused with one line
// naming the flag before any worker starts; a short run prints its table and writes JSON and
// CSV that say the same.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../run_binary.h"
#include "export/export.h"

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

// The slices of a Perfetto trace on the lane ("thread") named `lane`, by process.
std::map<int64_t, std::vector<std::string>> slicesOnLane(const nlohmann::json& trace,
                                                         const std::string& lane) {
  std::set<std::pair<int64_t, int64_t>> tids;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == lane)
      tids.insert({e["pid"].get<int64_t>(), e["tid"].get<int64_t>()});
  }
  std::map<int64_t, std::vector<std::string>> out;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && tids.count({e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}))
      out[e["pid"].get<int64_t>()].push_back(e["name"].get<std::string>());
  }
  return out;
}

// --record keeps every rank's compute spans and its buckets' chunk events, marked as
// training; export --trace draws a compute lane per rank beside its send and recv lanes.
TEST(TrainCli, ARecordHoldsEachRanksComputeAndCommunicationAndTracesToPerfetto) {
  const auto dir = std::filesystem::temp_directory_path() / "arl-train-record";
  std::filesystem::create_directories(dir);
  const std::string rec = (dir / "t.arlrec").string();
  const Result r = train(
      "--workers 2 --model 16x8x3 --batch 8 --steps 3 --bucket 64 --slice 64 --quiet "
      "--record " +
      rec);
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("bucket(s) of up to 64,"), std::string::npos) << r.out;
  const BenchReport back = readRecording(rec);
  ASSERT_EQ(back.rows.size(), 1u);
  const RunResult& run = back.rows[0].result;
  ASSERT_TRUE(run.request.train.has_value());
  EXPECT_EQ(run.request.train->steps, 3u);
  EXPECT_EQ(run.request.telemetry, TelemetryLevel::Chunks);  // the default
  EXPECT_EQ(back.workers.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    size_t compute = 0, sends = 0;
    for (const TelemetryEvent& e : run.events) {
      if (e.rank != rank) continue;
      compute += isComputeKind(e.kind) ? 1 : 0;
      sends += e.kind == EventKind::SendStart ? 1 : 0;
    }
    EXPECT_EQ(compute, 3u * 5u) << "rank " << rank << ": 2 layers forward and back, optimizer";
    EXPECT_GT(sends, 0u) << "rank " << rank;
  }
  const Result x =
      runBinary(ARL_LAB_BINARY, "export --trace --out " + (dir / "out").string() + " " + rec);
  ASSERT_EQ(x.rc, 0) << x.out << x.err;
  std::ifstream in(dir / "out" / "trace.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  const auto compute = slicesOnLane(trace, "compute");
  ASSERT_EQ(compute.size(), 2u) << "a compute lane per rank";
  for (const auto& [pid, names] : compute) {
    EXPECT_EQ(names.size(), 15u) << "pid " << pid;
    EXPECT_NE(std::find(names.begin(), names.end(), "forward layer 0"), names.end());
    EXPECT_NE(std::find(names.begin(), names.end(), "backward layer 1"), names.end());
    EXPECT_NE(std::find(names.begin(), names.end(), "optimizer"), names.end());
  }
  EXPECT_EQ(slicesOnLane(trace, "send").size(), 2u) << "the buckets' sends of each rank";
  EXPECT_EQ(trace["otherData"]["compute_slices"].get<int>(), 30);
  std::filesystem::remove_all(dir);
}

// ps-async pushes the whole gradient at once: its header names no buckets.
TEST(TrainCli, PsAsyncsHeaderNamesNoBuckets) {
  const Result r = train(
      "--workers 2 --model 16x8x3 --batch 8 --steps 2 --sync ps-async --quiet "
      "--telemetry off");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("bucket"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the whole gradient per push"), std::string::npos) << r.out;
}

// Recordings written before training runs were recorded open as they did, and export.
TEST(TrainCli, ARecordingOfBenchStillExports) {
  const auto dir = std::filesystem::temp_directory_path() / "arl-old-record";
  const std::string old = std::string(ARL_SOURCE_DIR) + "/resources/samples/tree-4.arlrec";
  const BenchReport back = readRecording(old);
  ASSERT_FALSE(back.rows.empty());
  for (const BenchRow& row : back.rows) EXPECT_FALSE(row.result.request.train.has_value());
  const Result x = runBinary(ARL_LAB_BINARY, "export --trace --out " + dir.string() + " " + old);
  EXPECT_EQ(x.rc, 0) << x.out << x.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace arl
