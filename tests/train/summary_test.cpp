// From the ranks' step reports to the rows the table, the exports and the window show.
#include <gtest/gtest.h>

#include <cmath>

#include "train/train_summary.h"

namespace arl {
namespace {

TrainRankStep rankStep(int rank, uint32_t step, uint64_t digest, double loss = 1.0) {
  TrainRankStep s;
  s.rank = rank;
  s.step = step;
  s.loss = loss;
  s.stepNs = 10'000 + rank * 2'000;
  s.computeNs = 6'000;
  s.commNs = 5'000;
  s.exposedNs = s.stepNs - s.computeNs;
  s.hiddenNs = 1'000;
  s.digest = digest;
  return s;
}

TEST(TrainSummary, IdenticalDigestsMakeAnIdenticalRowWithNoSpread) {
  TrainConfig cfg;
  std::vector<TrainRankStep> steps;
  for (int r = 0; r < 4; ++r) steps.push_back(rankStep(r, 0, 77, 1.0 + r));
  const auto rows = trainRows(cfg, 4, steps);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].identical);
  EXPECT_EQ(rows[0].spread, 0.0);
  EXPECT_DOUBLE_EQ(rows[0].loss, 2.5);
  EXPECT_DOUBLE_EQ(rows[0].stepUs, 13.0);  // mean of 10, 12, 14, 16 us
  EXPECT_DOUBLE_EQ(rows[0].hiddenUs, 1.0);
  EXPECT_FALSE(rows[0].staleness.has_value());
}

TEST(TrainSummary, ADivergedSynchronousStepIsNamedAndItsSpreadUnknown) {
  TrainConfig cfg;
  std::vector<TrainRankStep> steps;
  for (uint32_t step = 0; step < 2; ++step)
    for (int r = 0; r < 3; ++r) steps.push_back(rankStep(r, step, step == 1 && r == 2 ? 5 : 9));
  std::string why;
  const auto rows = trainRows(cfg, 3, steps, &why);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].identical);
  EXPECT_FALSE(rows[1].identical);
  EXPECT_TRUE(std::isnan(rows[1].spread));
  EXPECT_EQ(why, "after step 1 rank 2's weights differ from rank 0's");
}

TEST(TrainSummary, AStepNotEveryRankReportedIsLeftOut) {
  TrainConfig cfg;
  std::vector<TrainRankStep> steps = {rankStep(0, 0, 1), rankStep(1, 0, 1), rankStep(0, 1, 1)};
  const auto rows = trainRows(cfg, 2, steps);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].step, 0u);
}

TEST(TrainSummary, PsAsyncTakesTheServersSpreadAndStaleness) {
  TrainConfig cfg;
  cfg.sync = SyncMode::PsAsync;
  std::vector<TrainRankStep> steps;
  for (int r = 0; r < 3; ++r) {
    TrainRankStep s = rankStep(r, 0, 100 + r);
    s.staleness = static_cast<uint32_t>(r);
    s.spread = 0.5 * r;
    steps.push_back(s);
  }
  const auto rows = trainRows(cfg, 3, steps);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].identical);
  EXPECT_DOUBLE_EQ(rows[0].spread, 1.0);
  ASSERT_TRUE(rows[0].staleness.has_value());
  EXPECT_DOUBLE_EQ(*rows[0].staleness, 1.0);
  EXPECT_EQ(rows[0].maxStaleness, 2u);
}

TEST(TrainSummary, SweepPointsAreMediansAfterTheFirstStepAndTheBestIsTheFastest) {
  TrainRun run;
  run.cfg.bucketBytes = 1 << 20;
  run.bucketFloats = {10, 20};
  for (double us : {900.0, 30.0, 10.0, 20.0}) {
    TrainStepRow r;
    r.stepUs = us;
    run.steps.push_back(r);
  }
  const BucketSweepPoint p = sweepPoint(run);
  EXPECT_DOUBLE_EQ(p.stepUs, 20.0);  // the first step's 900 us is left out
  EXPECT_EQ(p.buckets, 2u);
  const auto best = bestBucket({{64, 1, 50, 0, 0}, {1024, 1, 40, 0, 0}, {4096, 1, 45, 0, 0}});
  ASSERT_TRUE(best);
  EXPECT_EQ(best->bucketBytes, 1024u);
  EXPECT_FALSE(bestBucket({}));
}

TEST(TrainSummary, TheTimelineShowsTheLastButOneStep) {
  EXPECT_EQ(sampleStepIndex(50), 48u);
  EXPECT_EQ(sampleStepIndex(1), 0u);
}

}  // namespace
}  // namespace arl
