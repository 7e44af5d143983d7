// Runs the built `allreduce-lab lesson` as a user would: list, check, a run of a lesson on
// real local workers (bench runs, and training runs), and the refusals of a damaged lesson and
// of an unknown name.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

Result lesson(const std::string& args) { return runBinary(ARL_LAB_BINARY, "lesson " + args); }

std::vector<std::string> linesOf(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(LessonCli, ListNamesOneLessonAtTheStartOfEachLine) {
  const Result r = lesson("list");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto lines = linesOf(r.out);
  ASSERT_GE(lines.size(), 6u);
  bool sawRing = false;
  for (const std::string& l : lines) {
    const std::string name = l.substr(0, l.find(' '));
    EXPECT_FALSE(name.empty()) << l;
    sawRing |= name == "ring-two-phases";
  }
  EXPECT_TRUE(sawRing) << r.out;
}

TEST(LessonCli, CheckHasItsCommandAcceptEveryExperiment) {
  const Result r = lesson("check");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("bench or train accepts each experiment"), std::string::npos) << r.out;
}

TEST(LessonCli, AFactLessonRunsOnRealWorkersAndAgrees) {
  const Result r = lesson("run what-is-allreduce --json");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  EXPECT_EQ(v.at("agrees"), true);
  EXPECT_TRUE(v.at("margin").is_null());  // a fact checked on the run, not a race
  EXPECT_EQ(v.at("winner"), "every");
  ASSERT_EQ(v.at("experiments").size(), 1u);
  EXPECT_EQ(v["experiments"][0].at("ran"), true);
  EXPECT_EQ(v["experiments"][0].at("value"), 0.0);  // no wrong element on any rank
  EXPECT_TRUE(v.at("steadiness").at("spread_before").is_number());
  // The question is asked on stderr before the run, the JSON alone is on stdout.
  EXPECT_NE(r.err.find("what does each rank hold?"), std::string::npos) << r.err;
}

// The ring's bytes per rank at 4, 8 and 16 ranks, counted from each run's telemetry (bench
// JSON sent_bytes): exactly the formula 2(N-1)/N, with the schedule's count beside it.
TEST(LessonCli, RingBytesPerRankAreCountedFromTelemetryAndEqualTheFormula) {
  const Result r = lesson("run ring-bytes-per-rank --json");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  EXPECT_EQ(v.at("agrees"), true);
  EXPECT_EQ(v.at("winner"), "2s");
  const auto& e = v.at("experiments");
  ASSERT_EQ(e.size(), 3u);
  const int ranks[] = {4, 8, 16};
  for (size_t i = 0; i < 3; ++i) {
    const int n = ranks[i];
    ASSERT_EQ(e[i].at("ran"), true) << e[i];
    EXPECT_EQ(e[i].at("value").get<double>(), 2.0 * (n - 1) / n) << n << " ranks";
    const std::string note = e[i].value("note", "");
    EXPECT_NE(note.find("the busiest rank's telemetry"), std::string::npos) << note;
    EXPECT_NE(note.find("the schedule says"), std::string::npos) << note;
    EXPECT_EQ(note.find("differ"), std::string::npos) << note;
    EXPECT_NE(note.find("the formula 2(n−1)/n·S gives"), std::string::npos) << note;
  }
}

TEST(LessonCli, TheDeterminismLessonShowsTheBits) {
  const Result r = lesson("run determinism --json");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  EXPECT_EQ(v.at("agrees"), true);
  EXPECT_TRUE(v.at("margin").is_null());
  EXPECT_EQ(v.at("winner"), "same-within");
  ASSERT_EQ(v.at("experiments").size(), 1u);
  const std::string note = v["experiments"][0].value("note", "");
  EXPECT_NE(note.find("ring: all 4 ranks hold output "), std::string::npos) << note;
  EXPECT_NE(note.find("tree: all 4 ranks hold output "), std::string::npos) << note;
  EXPECT_NE(note.find("element "), std::string::npos) << note;  // one sum whose bits differ
}

TEST(LessonCli, AnUnknownLessonIsRefusedNamingTheKnownOnes) {
  const Result r = lesson("run no-such-lesson");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("no lesson 'no-such-lesson' (known: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ring-two-phases"), std::string::npos) << r.err;
}

TEST(LessonCli, ADamagedLessonIsRefusedNamingTheFileAndTheField) {
  const std::string dir = ::testing::TempDir() + "lessons_damaged";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/broken.json") << R"({"format": 1, "title": "T"})";
  const Result r = lesson("--lessons '" + dir + "' list");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("broken.json: lesson.teaches: missing"), std::string::npos) << r.err;
  // An experiment bench refuses is named with the flag bench names.
  std::ofstream(dir + "/broken.json") << R"({
    "format": 1, "title": "T", "teaches": "3. x", "text": "t", "question": "q?",
    "options": [
      {"id": "a", "label": "A", "bench": ["--workers", "2", "--algo", "ring"]},
      {"id": "b", "label": "B", "bench": ["--workers", "2", "--algo", "no-such-algo"]}],
    "answer": "a", "decide": {"by": "fastest", "measure": "time_us"},
    "why_this_setup": "w", "if_it_disagrees": "d"})";
  const Result c = lesson("--lessons '" + dir + "' check");
  EXPECT_EQ(c.rc, 2);
  EXPECT_NE(c.err.find("broken.json: experiment 'bench --workers 2 --algo no-such-algo'"),
            std::string::npos)
      << c.err;
  EXPECT_NE(c.err.find("--algo"), std::string::npos) << c.err;
  std::filesystem::remove_all(dir);
}

// A lesson whose options are training runs, in a folder of its own.
std::string trainLessonDir(const std::string& name, const std::string& a, const std::string& b,
                           const std::string& measure) {
  const std::string dir = ::testing::TempDir() + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/" + name + ".json") << R"({
    "format": 1, "title": "T", "teaches": "1. x", "text": "t", "question": "q?",
    "options": [
      {"id": "allreduce", "label": "A", "train": [)" +
                                                   a + R"(]},
      {"id": "ps-async", "label": "B", "train": [)" +
                                                   b + R"(]}],
    "answer": "allreduce", "decide": {"by": "fastest", "measure": ")" +
                                                   measure + R"("},
    "why_this_setup": "w", "if_it_disagrees": "d"})";
  return dir;
}

TEST(LessonCli, CheckRefusesABadTrainFlagNamingTheLessonAndTheFlag) {
  std::string dir = trainLessonDir("train_bad_flag", R"("--workers", "2")",
                                   R"("--workers", "2", "--overlap", "sometimes")", "exposed_us");
  Result c = lesson("--lessons '" + dir + "' check");
  EXPECT_EQ(c.rc, 2);
  EXPECT_NE(c.err.find("train_bad_flag.json: experiment 'train --workers 2 --overlap sometimes': "
                       "--overlap sometimes: expected on, off or both"),
            std::string::npos)
      << c.err;
  std::filesystem::remove_all(dir);
  // A training experiment is one run, as a bench experiment is.
  dir = trainLessonDir("train_two_runs", R"("--workers", "2")",
                       R"("--workers", "2", "--overlap", "both")", "exposed_us");
  c = lesson("--lessons '" + dir + "' check");
  EXPECT_EQ(c.rc, 2);
  EXPECT_NE(c.err.find("train_two_runs.json: experiment 'train --workers 2 --overlap both': a "
                       "training experiment is one run"),
            std::string::npos)
      << c.err;
  std::filesystem::remove_all(dir);
  dir = trainLessonDir("train_good", R"("--workers", "2")",
                       R"("--workers", "2", "--sync", "ps-async")", "identical_share");
  c = lesson("--lessons '" + dir + "' check");
  EXPECT_EQ(c.rc, 0) << c.err;
  std::filesystem::remove_all(dir);
}

// Every replica identical under all-reduce, none under ps-async with a slow rank: counted from
// the digests of real training runs; the runs land in one training record for the window.
TEST(LessonCli, ATrainingLessonRunsOnRealWorkersAndKeepsItsRecord) {
  const std::string common =
      R"("--workers", "2", "--model", "16x8x2", "--steps", "6", "--batch", "8")";
  const std::string dir = trainLessonDir(
      "train_replicas", common, common + R"(, "--sync", "ps-async", "--slow-compute", "1:4")",
      "identical_share");
  const std::string rec = ::testing::TempDir() + "train_replicas_rec";
  std::filesystem::remove_all(rec);
  const Result r =
      lesson("--lessons '" + dir + "' run train_replicas --json --record '" + rec + "'");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  EXPECT_EQ(v.at("winner"), "allreduce");
  EXPECT_EQ(v.at("agrees"), true);
  EXPECT_TRUE(v.at("margin").is_null());  // a count, not a race
  EXPECT_EQ(v.at("trusted"), true);       // whatever the machine's speed
  const auto& e = v.at("experiments");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].at("command"),
            "allreduce-lab train --workers 2 --model 16x8x2 --steps 6 --batch 8");
  EXPECT_EQ(e[0].at("value"), 1.0);
  EXPECT_EQ(e[0].at("note"), "6 of 6 steps identical, largest spread 0");
  EXPECT_LT(e[1].at("value").get<double>(), 1.0);
  EXPECT_NE(e[1].value("note", "").find("largest spread "), std::string::npos) << e[1];
  EXPECT_NE(v.value("detail", "").find("allreduce: 6 of 6 steps identical"), std::string::npos)
      << v.at("detail");
  const std::string record = v.value("training_record", "");
  EXPECT_EQ(record, rec + "/train_replicas-training.json");
  const nlohmann::json doc = nlohmann::json::parse(testutil::slurp(record));
  ASSERT_EQ(doc.at("runs").size(), 2u);
  EXPECT_EQ(doc["runs"][1].at("sync"), "ps-async");
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(rec);
}

}  // namespace
}  // namespace arl
