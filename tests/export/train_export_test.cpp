// Training records as JSON and CSV: the round trip, every kind of refusal naming its field,
// and the CSV's header and rows.
#include "export/train_export.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "../train_record_fixture.h"
#include "export/fields.h"
#include "export/json.h"

namespace arl {
namespace {

using test::fixtureTrainRecord;

// The text of `r` with one change made to its JSON document.
std::string edited(const TrainRecord& r, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(writeTrainJson(r));
  edit(j);
  return j.dump();
}

std::string refusal(const std::string& text) {
  try {
    readTrainJson(text);
  } catch (const TrainRecordError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(TrainExport, RoundTripIsExact) {
  const TrainRecord r = fixtureTrainRecord();
  const TrainRecord back = readTrainJson(writeTrainJson(r));
  EXPECT_EQ(back, r);
  EXPECT_EQ(writeTrainJson(back), writeTrainJson(r));
}

TEST(TrainExport, RoundTripKeepsAwkwardValuesExact) {
  TrainRecord r = fixtureTrainRecord(false);
  std::mt19937_64 rng(20261204);
  std::uniform_real_distribution<double> u(0, 1e7);
  TrainRun& run = r.runs[0];
  run.cfg.lr = 0.1f;
  run.cfg.momentum = 0.99f;
  run.cfg.seed = std::numeric_limits<uint64_t>::max();
  run.cfg.slowComputeRank = 3;
  run.cfg.slowComputeFactor = 1.0 / 3.0 + 2;
  run.label = "quote \" comma , and é";
  for (TrainStepRow& s : run.steps) {
    s.loss = u(rng) / 3e6;
    s.stepUs = u(rng);
    s.commUs = u(rng) / 7;
    s.spread = u(rng) * 1e-12;
  }
  for (TrainRankStep& k : run.sampleStep) {
    k.stepNs = int64_t{987'654'321'987} + k.rank;  // over 16 minutes, to the nanosecond
    k.digest = rng();
    for (TrainSpan& sp : k.spans) sp.endNs += 1;  // odd nanoseconds
  }
  const TrainRecord back = readTrainJson(writeTrainJson(r));
  EXPECT_EQ(back, r);
}

TEST(TrainExport, WritesTheDocumentedFields) {
  const nlohmann::json j = nlohmann::json::parse(writeTrainJson(fixtureTrainRecord()));
  EXPECT_EQ(j["format"], "allreduce-lab-train");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["best_bucket_bytes"], uint64_t{4} << 20);
  const auto& run = j["runs"][0];
  EXPECT_EQ(run["model"], "784x512x512x10");
  EXPECT_EQ(run["sync"], "allreduce");
  EXPECT_EQ(run["lr"].get<double>(), 0.05);  // the float's decimal, not 0.05000000074505806
  EXPECT_FALSE(run["steps"][0].contains("staleness"));  // only ps-async runs have it
  EXPECT_DOUBLE_EQ(run["steps"][3]["hidden_us"].get<double>(), 2700 - 900);
  EXPECT_EQ(run["sample_step"][0]["digest"], "feedfacecafebeef");
  EXPECT_EQ(run["sample_step"][0]["spans"][0]["kind"], "forward");
  EXPECT_DOUBLE_EQ(run["sample_step"][0]["spans"][1]["start_us"].get<double>(), 600);
  const auto& ps = j["runs"][1];
  EXPECT_EQ(ps["sync"], "ps-async");
  EXPECT_DOUBLE_EQ(ps["steps"][1]["staleness"].get<double>(), 1.0);
  EXPECT_EQ(ps["steps"][1]["max_staleness"], 2);
  const nlohmann::json none = nlohmann::json::parse(writeTrainJson(fixtureTrainRecord(false)));
  EXPECT_TRUE(none["sweep"].empty());
  EXPECT_TRUE(none["best_bucket_bytes"].is_null());
}

TEST(TrainExport, ADivergedLossIsWrittenAsNullAndReadAsNaN) {
  TrainRecord r = fixtureTrainRecord(false);
  r.runs[0].steps[5].loss = std::numeric_limits<double>::infinity();
  const TrainRecord back = readTrainJson(writeTrainJson(r));
  EXPECT_TRUE(std::isnan(back.runs[0].steps[5].loss));
}

TEST(TrainExport, RefusesMalformedTextAndOtherFormats) {
  EXPECT_NE(refusal("{\"format\": ").find("not valid JSON"), std::string::npos);
  EXPECT_EQ(refusal("[]"), "top level: expected an object, found an array");
  const TrainRecord r = fixtureTrainRecord();
  EXPECT_EQ(refusal(edited(r, [](auto& j) { j["format"] = "allreduce-lab-recording"; })),
            "format: 'allreduce-lab-recording' is not allreduce-lab-train");
  EXPECT_EQ(refusal(edited(r, [](auto& j) { j["version"] = 2; })),
            "version: version 2 is not supported (this build reads version 1)");
}

TEST(TrainExport, RefusalsNameTheFieldPath) {
  const TrainRecord r = fixtureTrainRecord();
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string error;
  };
  const std::vector<Case> cases = {
      {[](auto& j) { j["runs"][0]["steps"][3]["loss"] = "low"; },
       "runs[0].steps[3].loss: expected a number, found a string"},
      {[](auto& j) { j["runs"][1]["steps"][0].erase("comm_us"); },
       "runs[1].steps[0].comm_us: missing"},
      {[](auto& j) { j["runs"][0]["steps"][2]["step_us"] = -5; },
       "runs[0].steps[2].step_us: must be a time in microseconds from 0 to 1e12, not -5"},
      {[](auto& j) { j["runs"][0]["model"] = "784x0x10"; },
       "runs[0].model: '784x0x10' is not a model: 2 to 16 layer widths of 1..65536 (784x512x10)"},
      {[](auto& j) { j["runs"][0]["sync"] = "gossip"; }, "runs[0].sync: unknown value 'gossip'"},
      {[](auto& j) { j["runs"][0]["workers"] = 0; },
       "runs[0].workers: 0 is out of range (accepted: 1..64)"},
      {[](auto& j) { j["runs"][0]["sample_step"][2]["rank"] = 4; },
       "runs[0].sample_step[2].rank: 4 is out of range (accepted: 0..3)"},
      {[](auto& j) { j["runs"][0]["sample_step"][1]["digest"] = "xyz"; },
       "runs[0].sample_step[1].digest: 'xyz' is not 16 hex digits"},
      {[](auto& j) { j["runs"][0]["sample_step"][0]["spans"][4]["kind"] = "sleep"; },
       "runs[0].sample_step[0].spans[4].kind: unknown span kind 'sleep' (forward, backward, "
       "optimizer, reduce, push, pull)"},
      {[](auto& j) { j["runs"][0]["sample_step"][0]["spans"][1]["end_us"] = 0; },
       "runs[0].sample_step[0].spans[1].end_us: ends before the span's start_us"},
      {[](auto& j) { j["runs"][0]["lr"] = 0; },
       "runs[0].lr: must be above 0 and at most 10, not 0"},
      {[](auto& j) { j["runs"][0]["steps"][0]["identical"] = 1; },
       "runs[0].steps[0].identical: expected a boolean, found a number"},
      {[](auto& j) { j["sweep"][1]["buckets"] = 0; },
       "sweep[1].buckets: 0 is out of range (accepted: 1..4294967295)"},
      {[](auto& j) { j.erase("sweep"); }, "sweep: missing"},
      {[](auto& j) { j["best_bucket_bytes"] = "4M"; },
       "best_bucket_bytes: expected an integer, found a string"},
  };
  for (const Case& c : cases) EXPECT_EQ(refusal(edited(r, c.edit)), c.error);
}

TEST(TrainExport, RefusesAbsurdSizes) {
  const TrainRecord r = fixtureTrainRecord(false);
  EXPECT_EQ(refusal(edited(r,
                           [](auto& j) {
                             auto& floats = j["runs"][0]["bucket_floats"];
                             floats = nlohmann::json::array();
                             for (int i = 0; i <= (1 << 20); ++i) floats.push_back(1);
                           })),
            "runs[0].bucket_floats: holds 1048577 items, more than the 1048576 a training "
            "record may hold");
  std::string deep = std::string(20, '[') + std::string(20, ']');
  EXPECT_NE(refusal(deep).find("nested deeper than"), std::string::npos);
  std::string huge(size_t{256} << 20, ' ');
  huge += "{}";
  EXPECT_NE(refusal(huge).find("-byte limit"), std::string::npos);
}

TEST(TrainExport, FileErrorsNameTheFile) {
  const auto dir = std::filesystem::temp_directory_path() / "arl-train-export-test";
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "good.json").string();
  const std::string bad = (dir / "bad.json").string();
  {
    std::ofstream(good) << writeTrainJson(fixtureTrainRecord());
    std::ofstream(bad) << edited(fixtureTrainRecord(),
                                 [](auto& j) { j["runs"][0]["steps"][3]["loss"] = "low"; });
  }
  EXPECT_EQ(readTrainFile(good), fixtureTrainRecord());
  try {
    readTrainFile(bad);
    ADD_FAILURE() << "accepted " << bad;
  } catch (const TrainRecordError& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "training record " + bad + ": runs[0].steps[3].loss: expected a number, found a string");
  }
  const std::string missing = (dir / "missing.json").string();
  try {
    readTrainFile(missing);
    ADD_FAILURE() << "accepted " << missing;
  } catch (const TrainRecordError& e) {
    EXPECT_EQ(std::string(e.what()),
              "training record " + missing + ": cannot be opened: No such file or directory");
  }
  std::filesystem::remove_all(dir);
}

TEST(TrainExport, CsvHasOneRowPerRunAndStep) {
  TrainRecord r = fixtureTrainRecord();
  r.runs[0].label = "overlap on, 1M buckets";
  const std::string csv = writeTrainCsv(r);
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < csv.size()) {
    const size_t nl = csv.find('\n', at);
    ASSERT_NE(nl, std::string::npos) << "the last line has no newline";
    lines.push_back(csv.substr(at, nl - at));
    at = nl + 1;
  }
  ASSERT_EQ(lines.size(), 1 + 2 * size_t{test::kFixtureSteps});
  EXPECT_EQ(lines[0],
            "run,label,sync,overlap,bucket_bytes,step,loss,step_us,compute_us,comm_us,exposed_us,"
            "hidden_us,identical,spread,staleness");
  const TrainStepRow& s0 = r.runs[0].steps[1];
  EXPECT_EQ(lines[2], "0,\"overlap on, 1M buckets\",allreduce,1,1048576,1," + csvNumber(s0.loss) +
                          ",6900,6000,2700,900,1800,1,0,");
  const std::string& ps3 = lines[1 + test::kFixtureSteps + 3];
  EXPECT_EQ(ps3.substr(0, 32), "1,ps-async,ps-async,1,1048576,3,");
  // Not identical, the spread, the staleness.
  EXPECT_EQ(ps3.substr(ps3.size() - 14), ",0,0.0234375,1");
}

}  // namespace
}  // namespace arl
