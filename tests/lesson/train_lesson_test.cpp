// Lessons whose experiments are training runs (allreduce-lab train): the file names which
// command each experiment is, a measure that does not fit the experiment is refused naming the
// field, and the verdict decides from training records (built here, as train writes them):
// exposed communication by the margin and the steadiness rules of any speed, the replicas'
// identical steps as a fact.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/errors.h"
#include "lesson/lesson.h"
#include "lesson/train_result.h"
#include "lesson/verdict.h"

namespace arl {
namespace {

std::string trainLesson(const std::string& measure, const std::string& a = R"("train")",
                        const std::string& b = R"("train")") {
  return R"({
    "format": 1, "title": "T", "teaches": "7. x", "text": "t", "question": "q?",
    "options": [
      {"id": "on", "label": "On", )" +
         a + R"(: ["--workers", "2", "--overlap", "on"]},
      {"id": "off", "label": "Off", )" +
         b + R"(: ["--workers", "2", "--overlap", "off"]}],
    "answer": "on", "decide": {"by": "fastest", "measure": ")" +
         measure + R"("},
    "why_this_setup": "w", "if_it_disagrees": "d"})";
}

std::string valueLesson(const std::string& quantity, const std::string& experiment) {
  return R"({
    "format": 1, "title": "T", "teaches": "1. x", "text": "t", "question": "q?",
    "options": [{"id": "all", "label": "A", "range": [1, 1]}, {"id": "some", "label": "S", "range": [0, 0.99]}],
    "answer": "all", "decide": {"by": "value", "quantity": ")" +
         quantity + R"("},
    "experiments": [)" +
         experiment + R"(], "why_this_setup": "w", "if_it_disagrees": "d"})";
}

std::string refusal(const std::string& text) {
  try {
    parseLesson(text, "x", "x.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(TrainLessons, AnOptionsExperimentIsATrainingRun) {
  const Lesson l = parseLesson(trainLesson("exposed_us"), "x", "x.json");
  ASSERT_EQ(l.options.size(), 2u);
  EXPECT_EQ(l.measure, SpeedMeasure::ExposedUs);
  EXPECT_EQ(l.options[0].experiment.kind, ExperimentKind::Train);
  EXPECT_EQ(l.options[1].experiment.args.back(), "off");
  EXPECT_TRUE(lowerIsBetter(SpeedMeasure::ExposedUs));
  EXPECT_FALSE(lowerIsBetter(SpeedMeasure::IdenticalShare));
  EXPECT_FALSE(isFact(l));
  EXPECT_TRUE(isFact(parseLesson(trainLesson("identical_share"), "x", "x.json")));
  const Lesson v = parseLesson(valueLesson("identical_share", R"({"train": ["--workers", "2"]})"),
                               "x", "x.json");
  ASSERT_EQ(v.experiments.size(), 1u);
  EXPECT_EQ(v.experiments[0].kind, ExperimentKind::Train);
}

TEST(TrainLessons, AnExperimentThatTheMeasureDoesNotFitIsRefusedNamingTheField) {
  std::string r = refusal(trainLesson("exposed_us", R"("bench")"));
  EXPECT_NE(r.find("x.json: lesson.options[0].bench: the measure 'exposed_us' needs a train "
                   "experiment"),
            std::string::npos)
      << r;
  r = refusal(trainLesson("time_us", R"("bench")", R"("train")"));
  EXPECT_NE(r.find("lesson.options[1].train: the measure 'time_us' needs a bench experiment; a "
                   "train experiment is measured by exposed_us, step_us or identical_share"),
            std::string::npos)
      << r;
  r = refusal(valueLesson("identical_share", R"(["--workers", "2"])"));
  EXPECT_NE(r.find("lesson.experiments[0]: the quantity 'identical_share' needs a train "
                   "experiment"),
            std::string::npos)
      << r;
  r = refusal(valueLesson("steps", R"({"train": ["--workers", "2"]})"));
  EXPECT_NE(r.find("lesson.experiments[0].train: the quantity 'steps' needs a bench experiment"),
            std::string::npos)
      << r;
}

TEST(TrainLessons, AnOptionGivesExactlyOneExperiment) {
  const std::string first = R"("train": ["--workers", "2", "--overlap", "on"])";
  std::string s = trainLesson("step_us");
  s.replace(s.find(first), first.size(),
            R"("train": ["--workers", "2"], "bench": ["--workers", "2"])");
  std::string r = refusal(s);
  EXPECT_NE(r.find("lesson.options[0]: give \"bench\" or \"train\", not both"), std::string::npos)
      << r;
  s = trainLesson("step_us");
  s.replace(s.find(first), first.size(), R"("x": 1)");
  r = refusal(s);
  EXPECT_NE(r.find("lesson.options[0].bench: missing (or \"train\""), std::string::npos) << r;
  s = trainLesson("step_us");
  const std::string off = R"("--overlap", "off"])";
  s.replace(s.find(off), off.size(), R"("--overlap", "off", "--json", "f"])");
  r = refusal(s);
  EXPECT_NE(r.find("lesson.options[1].train: '--json' is the runner's to add (give only train's "
                   "own options)"),
            std::string::npos)
      << r;
}

// A run as train records it: `steps` rows with this split (in us) and these replicas.
TrainRun run(SyncMode sync, bool overlap, uint32_t steps, double computeUs, double exposedUs,
             uint32_t identical = UINT32_MAX) {
  TrainRun r;
  r.cfg.sync = sync;
  r.cfg.overlap = overlap;
  r.cfg.steps = steps;
  r.workers = 2;
  for (uint32_t s = 0; s < steps; ++s) {
    TrainStepRow row;
    row.step = s;
    // The first step pays for first touches: the means leave it out.
    const double slow = s == 0 ? 10 : 1;
    row.computeUs = computeUs * slow;
    row.exposedUs = exposedUs * slow;
    row.commUs = exposedUs * 2;
    row.hiddenUs = row.commUs - row.exposedUs;
    row.stepUs = row.computeUs + row.exposedUs;
    row.identical = s < identical;
    if (sync == SyncMode::PsAsync) {
      row.spread = 0.01 * (s + 1);
      row.staleness = 1.0;
      row.maxStaleness = 2;
    } else {
      row.spread = row.identical ? 0 : NAN;
    }
    r.steps.push_back(row);
  }
  return r;
}

ExperimentResult result(const Lesson& l, const std::string& id, const TrainRun& r) {
  ExperimentResult x = trainResult(l, TrainRecord{{r}, {}});
  x.optionId = id;
  return x;
}

TEST(TrainLessons, ExposedCommunicationDecidesWithTheSpeedRules) {
  const Lesson l = parseLesson(trainLesson("exposed_us"), "x", "x.json");
  const ExperimentResult on = result(l, "on", run(SyncMode::AllReduce, true, 6, 80'000, 30'000));
  const ExperimentResult off =
      result(l, "off", run(SyncMode::AllReduce, false, 6, 80'000, 108'000));
  ASSERT_TRUE(on.ran) << on.error;
  EXPECT_DOUBLE_EQ(on.value, 30'000);  // the steps after the first
  EXPECT_DOUBLE_EQ(on.timeUs, 110'000);
  EXPECT_NE(on.note.find("step 110.0 ms = compute 80.0 + exposed 30.0"), std::string::npos)
      << on.note;
  Verdict v = decide(l, {on, off});
  EXPECT_EQ(v.winner, "on");
  ASSERT_TRUE(v.margin.has_value());
  EXPECT_DOUBLE_EQ(*v.margin, 3.6);
  EXPECT_TRUE(v.clear);
  // A margin below 1.3x is not clear, as for any speed.
  v = decide(l, {on, result(l, "off", run(SyncMode::AllReduce, false, 6, 80'000, 33'000))});
  EXPECT_TRUE(v.agrees);
  EXPECT_FALSE(v.clear);
  // All of it hidden beats any that is not.
  v = decide(l, {result(l, "on", run(SyncMode::AllReduce, true, 6, 80'000, 0)), off});
  EXPECT_EQ(v.winner, "on");
  EXPECT_TRUE(std::isinf(*v.margin));
  EXPECT_TRUE(v.clear);
  // The step time of the same runs.
  const Lesson s = parseLesson(trainLesson("step_us"), "x", "x.json");
  v = decide(s, {result(s, "on", run(SyncMode::AllReduce, true, 6, 80'000, 30'000)),
                 result(s, "off", run(SyncMode::AllReduce, false, 6, 80'000, 108'000))});
  EXPECT_EQ(v.winner, "on");
  EXPECT_NEAR(*v.margin, 188.0 / 110.0, 1e-12);
}

TEST(TrainLessons, IdenticalStepsAreAFactWithTheirCountAndSpread) {
  std::string text = trainLesson("identical_share");
  const Lesson l = parseLesson(text, "x", "x.json");
  const ExperimentResult sync = result(l, "on", run(SyncMode::AllReduce, true, 12, 1000, 100));
  const ExperimentResult async = result(l, "off", run(SyncMode::PsAsync, true, 12, 1000, 100, 0));
  EXPECT_DOUBLE_EQ(sync.value, 1.0);
  EXPECT_DOUBLE_EQ(async.value, 0.0);
  EXPECT_EQ(sync.note, "12 of 12 steps identical, largest spread 0");
  EXPECT_EQ(async.note, "0 of 12 steps identical, largest spread 0.12; staleness mean 1.00, max 2");
  Verdict v = decide(l, {async, sync});
  EXPECT_EQ(v.winner, "on");
  EXPECT_EQ(v.runnerUp, "off");
  EXPECT_FALSE(v.margin.has_value());  // no ratio against none
  EXPECT_TRUE(v.agrees);
  EXPECT_TRUE(v.clear);
  EXPECT_EQ(v.detail, "on: " + sync.note + "; off: " + async.note);
  // Synchronous replicas that differ are counted, their spread not claimed.
  const ExperimentResult broken = result(l, "on", run(SyncMode::AllReduce, true, 12, 1000, 100, 9));
  EXPECT_DOUBLE_EQ(broken.value, 0.75);
  EXPECT_EQ(broken.note,
            "9 of 12 steps identical; the others' spread is not measured (digests "
            "differ)");
  // A tie picks no option.
  v = decide(l, {sync, result(l, "off", run(SyncMode::Ps, true, 12, 1000, 100))});
  EXPECT_EQ(v.winner, "");
  EXPECT_FALSE(v.agrees);
  EXPECT_NE(v.reason.find("the options tie"), std::string::npos) << v.reason;
}

TEST(TrainLessons, ARecordThatIsNotOneWholeRunDecidesNothing) {
  const Lesson l = parseLesson(trainLesson("exposed_us"), "x", "x.json");
  TrainRun partial = run(SyncMode::AllReduce, true, 6, 1000, 100);
  partial.cfg.steps = 10;
  ExperimentResult r = trainResult(l, TrainRecord{{partial}, {}});
  EXPECT_FALSE(r.ran);
  EXPECT_EQ(r.error, "every rank reported 6 of the 10 steps");
  r = trainResult(l, TrainRecord{{partial, partial}, {}});
  EXPECT_FALSE(r.ran);
  EXPECT_EQ(r.error, "the training record holds 2 runs, not one");
  r.optionId = "on";
  const Verdict v = decide(l, {r, result(l, "off", run(SyncMode::AllReduce, false, 6, 1, 1))});
  EXPECT_EQ(v.winner, "");
  EXPECT_NE(v.reason.find("option 'on' did not run: the training record holds 2 runs"),
            std::string::npos)
      << v.reason;
}

}  // namespace
}  // namespace arl
