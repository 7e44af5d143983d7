// Lessons as data (lesson/lesson.h) and their verdicts (lesson/verdict.h): every lesson of the
// checkout reads and covers what it must; a damaged lesson is refused naming the file and the
// field; the verdict picks the measured winner, its margin, and says when it is not clear.
#include "lesson/lesson.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "base/errors.h"
#include "lesson/train_result.h"
#include "lesson/verdict.h"

namespace arl {
namespace {

const std::string kDir = std::string(ARL_SOURCE_DIR) + "/resources/lessons";

TEST(Lessons, EveryLessonOfTheCheckoutReads) {
  const std::vector<Lesson> all = loadLessons(kDir);
  ASSERT_GE(all.size(), 6u);
  std::set<std::string> names;
  for (const Lesson& l : all) {
    SCOPED_TRACE(l.path);
    EXPECT_TRUE(names.insert(l.name).second);
    EXPECT_FALSE(l.title.empty());
    EXPECT_FALSE(l.teaches.empty());
    EXPECT_FALSE(l.question.empty());
    EXPECT_FALSE(l.setupWhy.empty());
    EXPECT_FALSE(l.ifDisagree.empty());
    if (!l.recording.empty()) {
      EXPECT_TRUE(std::filesystem::is_regular_file(kDir + "/" + l.recording)) << l.recording;
    }
    if (l.by == DecideBy::Fastest) {
      for (const LessonOption& o : l.options) {
        EXPECT_FALSE(o.experiment.empty()) << o.id;
        EXPECT_EQ(o.experiment.kind, experimentKindOf(l.measure)) << o.id;
      }
    } else {
      EXPECT_FALSE(l.experiments.empty());
    }
  }
}

// Every point of TEACHING.md has an experiment; a lesson names the points it teaches as
// "N. ..." (the first, or after "; ").
TEST(Lessons, TheLessonsCoverTheArticlesPoints) {
  std::set<std::string> points;
  for (const Lesson& l : loadLessons(kDir)) {
    size_t at = 0;
    while (at < l.teaches.size()) {
      const size_t dot = l.teaches.find(". ", at);
      if (dot == std::string::npos) break;
      points.insert(l.teaches.substr(at, dot - at));
      const size_t next = l.teaches.find("; ", dot);
      if (next == std::string::npos) break;
      at = next + 2;
    }
  }
  for (const char* p : {"1", "2", "3", "4", "5", "6", "7", "8"})
    EXPECT_TRUE(points.count(p)) << "point " << p;
}

std::string minimal(const std::string& patch = "") {
  std::string s = R"({
    "format": 1, "title": "T", "teaches": "3. x", "text": "t", "question": "q?",
    "options": [
      {"id": "a", "label": "A", "bench": ["--workers", "2", "--algo", "ring"]},
      {"id": "b", "label": "B", "bench": ["--workers", "2", "--algo", "tree"]}],
    "answer": "a", "decide": {"by": "fastest", "measure": "time_us"},
    "why_this_setup": "w", "if_it_disagrees": "d")";
  return s + patch + "}";
}

std::string refusal(const std::string& text) {
  try {
    parseLesson(text, "x", "x.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Lessons, AMinimalLessonReads) {
  const Lesson l = parseLesson(minimal(), "x", "x.json");
  EXPECT_EQ(l.options.size(), 2u);
  EXPECT_EQ(l.options[1].experiment.kind, ExperimentKind::Bench);
  EXPECT_EQ(l.options[1].experiment.args.back(), "tree");
  EXPECT_EQ(l.measure, SpeedMeasure::TimeUs);
  EXPECT_TRUE(l.pauses.empty());
}

// A number beyond a double's range used to escape the reader as nlohmann's out_of_range (found
// by the lesson fuzz target; its input is kept in tests/fuzz/corpus/lesson/).
TEST(Lessons, ANumberBeyondADoubleOrJsonBeyondTheLimitsIsRefusedNamingTheFile) {
  std::string s = minimal();
  s.replace(s.find('{'), 1, R"({"x": 11e308, )");
  EXPECT_NE(refusal(s).find("x.json: not valid JSON"), std::string::npos) << refusal(s);
  EXPECT_NE(refusal(std::string(40, '[') + std::string(40, ']')).find("x.json: JSON nested deeper"),
            std::string::npos);
}

TEST(Lessons, ADamagedLessonIsRefusedNamingTheFileAndTheField) {
  EXPECT_NE(refusal("{").find("x.json: not valid JSON"), std::string::npos) << refusal("{");
  std::string s = minimal();
  s.replace(s.find(R"("answer": "a")"), 13, R"("answer": "c")");
  EXPECT_NE(refusal(s).find("lesson.answer: 'c' is none of the options' ids"), std::string::npos)
      << refusal(s);
  s = minimal();
  s.replace(s.find(R"("measure": "time_us")"), 20, R"("measure": "speed")");
  EXPECT_NE(refusal(s).find("lesson.decide.measure: unknown value 'speed'"), std::string::npos)
      << refusal(s);
  s = minimal();
  s.replace(s.find(R"("tree"])"), 7, R"("tree", "--json", "f"])");
  EXPECT_NE(refusal(s).find("'--json' is the runner's to add"), std::string::npos) << refusal(s);
  s = minimal();
  s.erase(s.find(R"("question": "q?",)"), 17);
  EXPECT_NE(refusal(s).find("x.json: lesson.question: missing"), std::string::npos) << refusal(s);
  s = minimal();
  s.replace(s.find(R"("format": 1)"), 11, R"("format": 9)");
  EXPECT_NE(refusal(s).find("lesson.format: 9 is out of range"), std::string::npos) << refusal(s);
}

TEST(Lessons, TheCourseOrderComesFirstThenTheName) {
  const std::vector<Lesson> all = loadLessons(kDir);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front().name, "what-is-allreduce");
  for (size_t i = 1; i < all.size(); ++i) {
    EXPECT_TRUE(all[i - 1].order < all[i].order ||
                (all[i - 1].order == all[i].order && all[i - 1].name < all[i].name))
        << all[i - 1].name << " before " << all[i].name;
  }
  EXPECT_EQ(parseLesson(minimal(), "x", "x.json").order, kLessonLastOrder);  // unordered: last
  EXPECT_EQ(parseLesson(minimal(R"(, "order": 3)"), "x", "x.json").order, 3);
  EXPECT_NE(refusal(minimal(R"(, "order": 0)")).find("lesson.order: 0 is out of range"),
            std::string::npos)
      << refusal(minimal(R"(, "order": 0)"));
}

TEST(Lessons, OverlappingRangesAreRefused) {
  const std::string s = R"({
    "format": 1, "title": "T", "teaches": "2. x", "text": "t", "question": "q?",
    "options": [{"id": "a", "label": "A", "range": [0, 2]}, {"id": "b", "label": "B", "range": [2, 3]}],
    "answer": "a", "decide": {"by": "value", "quantity": "steps"},
    "experiments": [["--workers", "2"]], "why_this_setup": "w", "if_it_disagrees": "d"})";
  EXPECT_NE(refusal(s).find("the ranges of 'a' and 'b' overlap"), std::string::npos) << refusal(s);
}

ExperimentResult ran(const std::string& id, double v) {
  ExperimentResult r;
  r.optionId = id;
  r.ran = true;
  r.value = v;
  return r;
}

TEST(Verdict, TheFastestWinsWithItsMargin) {
  const Lesson l = parseLesson(minimal(), "x", "x.json");
  Verdict v = decide(l, {ran("a", 100), ran("b", 150)});
  EXPECT_EQ(v.winner, "a");
  EXPECT_EQ(v.runnerUp, "b");
  ASSERT_TRUE(v.margin.has_value());
  EXPECT_DOUBLE_EQ(*v.margin, 1.5);
  EXPECT_TRUE(v.agrees);
  EXPECT_TRUE(v.clear);
  // A coin flip agrees but is not clear; the other way round disagrees and says why.
  v = decide(l, {ran("a", 100), ran("b", 110)});
  EXPECT_TRUE(v.agrees);
  EXPECT_FALSE(v.clear);
  EXPECT_NE(v.reason.find("less than the 1.3x"), std::string::npos) << v.reason;
  v = decide(l, {ran("a", 200), ran("b", 100)});
  EXPECT_EQ(v.winner, "b");
  EXPECT_FALSE(v.agrees);
  EXPECT_NE(v.reason.find("'b' won here, not 'a'"), std::string::npos) << v.reason;
}

TEST(Verdict, AFailedRunDecidesNothing) {
  const Lesson l = parseLesson(minimal(), "x", "x.json");
  ExperimentResult bad;
  bad.optionId = "b";
  bad.error = "rank 1 died";
  const Verdict v = decide(l, {ran("a", 100), bad});
  EXPECT_EQ(v.winner, "");
  EXPECT_FALSE(v.agrees);
  EXPECT_NE(v.reason.find("rank 1 died"), std::string::npos) << v.reason;
}

TEST(Verdict, BandwidthIsBetterHigher) {
  std::string s = minimal();
  s.replace(s.find(R"("measure": "time_us")"), 20, R"("measure": "busbw_gbps")");
  const Verdict v = decide(parseLesson(s, "x", "x.json"), {ran("a", 3.0), ran("b", 1.5)});
  EXPECT_EQ(v.winner, "a");
  EXPECT_DOUBLE_EQ(*v.margin, 2.0);
}

TEST(Verdict, AValueLessonPicksTheRangeThatHoldsEveryExperiment) {
  const std::string s = R"({
    "format": 1, "title": "T", "teaches": "2. x", "text": "t", "question": "q?",
    "options": [{"id": "s", "label": "S", "range": [0.9, 1.1]}, {"id": "2s", "label": "2S", "range": [1.4, 2.0]}],
    "answer": "2s", "decide": {"by": "value", "quantity": "sent_over_size"},
    "experiments": [["--workers", "4"], ["--workers", "8"]], "why_this_setup": "w", "if_it_disagrees": "d"})";
  const Lesson l = parseLesson(s, "x", "x.json");
  Verdict v = decide(l, {ran("", 1.5), ran("", 1.75)});
  EXPECT_EQ(v.winner, "2s");
  EXPECT_TRUE(v.agrees);
  EXPECT_FALSE(v.margin.has_value());           // a fact, not a race
  v = decide(l, {ran("", 1.5), ran("", 1.0)});  // in no range together
  EXPECT_EQ(v.winner, "");
  EXPECT_FALSE(v.agrees);
}

TEST(Verdict, PredictionWithinThirtyFivePercent) {
  ExperimentResult r = ran("a", 1);
  r.timeUs = 130;
  r.predictedUs = 100;
  EXPECT_TRUE(predictionWithin(r));
  r.timeUs = 140;
  EXPECT_FALSE(predictionWithin(r));
  r.timeUs = 75;
  EXPECT_TRUE(predictionWithin(r));
  r.predictedUs = NAN;
  EXPECT_FALSE(predictionWithin(r));
  EXPECT_TRUE(std::isnan(predictionRatio(r)));
}

}  // namespace
}  // namespace arl
