// Training runs on real worker processes: the replicas stay bitwise identical under every
// algorithm, the loss falls, ps-async with a slow rank drifts, a killed worker ends the run
// naming the rank and the training step.
#include <signal.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../runtime/event_client.h"
#include "local_workers.h"
#include "runtime/coordinator.h"
#include "runtime/run_plan.h"
#include "schedule/generators.h"
#include "train/train_summary.h"

namespace arl {
namespace {

using test::EventClient;
using test::localOptions;

// Three layers whose buckets of 256 bytes are one per layer, so every step reduces several
// buckets, each in several slices of 64 bytes.
TrainConfig tinyTraining(SyncMode sync, uint32_t steps) {
  TrainConfig t;
  t.layers = {24, 16, 12, 4};
  t.steps = steps;
  t.batch = 32;
  t.bucketBytes = 256;
  t.sync = sync;
  t.lr = 0.1f;
  return t;
}

RunRequest smallSlices(const std::string& algorithm) {
  RunRequest base;
  base.algorithm = algorithm;
  base.sliceBytes = 64;
  base.telemetry = TelemetryLevel::Off;
  if (algorithm == "hierarchical") base.ranksPerHost = 2;
  return base;
}

std::vector<TrainRankStep> stepsOf(const RunResult& r) {
  std::vector<TrainRankStep> out;
  for (const RankIteration& it : r.perRank)
    if (it.train) out.push_back(*it.train);
  return out;
}

TEST(Training, ReplicasStayBitwiseIdenticalUnderEveryAlgorithm) {
  Coordinator coord(localOptions(4));
  EventClient client(coord);
  ASSERT_TRUE(client.waitJoined(4));
  for (const std::string& algo : algorithmNames()) {
    const TrainConfig t = tinyTraining(SyncMode::AllReduce, 4);
    const RunResult r = client.run(trainingRequest(smallSlices(algo), t));
    ASSERT_EQ(r.state, RunState::Done) << algo << ": " << r.error;
    std::string divergence;
    const std::vector<TrainStepRow> rows = trainRows(t, 4, stepsOf(r), &divergence);
    ASSERT_EQ(rows.size(), 4u) << algo;
    EXPECT_TRUE(divergence.empty()) << algo << ": " << divergence;
    for (const TrainStepRow& row : rows) {
      EXPECT_TRUE(row.identical) << algo << " step " << row.step;
      EXPECT_EQ(row.spread, 0.0) << algo;
      EXPECT_TRUE(std::isfinite(row.loss)) << algo;
      EXPECT_GT(row.computeUs, 0) << algo;
      EXPECT_GT(row.commUs, 0) << algo << ": no bucket was reduced";
    }
  }
  // The synchronous parameter server keeps them identical too.
  const TrainConfig ps = tinyTraining(SyncMode::Ps, 3);
  const RunResult r = client.run(trainingRequest(smallSlices("ring"), ps));
  ASSERT_EQ(r.state, RunState::Done) << r.error;
  for (const TrainStepRow& row : trainRows(ps, 4, stepsOf(r))) EXPECT_TRUE(row.identical);
}

TEST(Training, TheLossFallsWithOverlapOnAndOff) {
  Coordinator coord(localOptions(4));
  EventClient client(coord);
  ASSERT_TRUE(client.waitJoined(4));
  for (bool overlap : {true, false}) {
    TrainConfig t = tinyTraining(SyncMode::AllReduce, 40);
    t.layers = {128, 32, 16, 4};  // 24 inputs carry too little of the classes to learn fast
    t.overlap = overlap;
    const RunResult r = client.run(trainingRequest(smallSlices("ring"), t));
    ASSERT_EQ(r.state, RunState::Done) << r.error;
    const auto rows = trainRows(t, 4, stepsOf(r));
    ASSERT_EQ(rows.size(), 40u);
    EXPECT_LT(rows.back().loss, 0.7 * rows.front().loss)
        << "overlap " << overlap << ": " << rows.front().loss << " -> " << rows.back().loss;
  }
}

TEST(Training, PsAsyncWithASlowRankDriftsApart) {
  Coordinator coord(localOptions(4));
  EventClient client(coord);
  ASSERT_TRUE(client.waitJoined(4));
  TrainConfig t = tinyTraining(SyncMode::PsAsync, 12);
  t.slowComputeRank = 3;
  t.slowComputeFactor = 8;
  const RunResult r = client.run(trainingRequest(smallSlices("ring"), t));
  ASSERT_EQ(r.state, RunState::Done) << r.error;
  const auto rows = trainRows(t, 4, stepsOf(r));
  ASSERT_EQ(rows.size(), 12u);
  double maxSpread = 0;
  uint32_t maxStale = 0;
  bool anyApart = false;
  for (const TrainStepRow& row : rows) {
    maxSpread = std::max(maxSpread, row.spread);
    maxStale = std::max(maxStale, row.maxStaleness);
    anyApart = anyApart || !row.identical;
    ASSERT_TRUE(row.staleness.has_value());
  }
  EXPECT_GT(maxSpread, 0.0);
  EXPECT_GT(maxStale, 0u);
  EXPECT_TRUE(anyApart);
}

TEST(Training, AKilledWorkerEndsTheRunNamingTheRankAndTheStep) {
  Coordinator coord(localOptions(4));
  EventClient client(coord);
  ASSERT_TRUE(client.waitJoined(4));
  TrainConfig t = tinyTraining(SyncMode::AllReduce, 100000);
  const uint64_t id = coord.submit(trainingRequest(smallSlices("ring"), t));
  ASSERT_TRUE(client.waitRun(id, [](const test::RunRecord& r) { return r.iterations >= 20; }))
      << "training did not get going";
  int64_t victim = 0;
  for (const auto& w : coord.workers())
    if (w.rank == 2) victim = w.pid;
  ASSERT_GT(victim, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  const auto got = client.waitResult(id, std::chrono::seconds(10));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->state, RunState::Failed);
  EXPECT_EQ(got->failedRank, 2);
  EXPECT_NE(got->error.find("rank 2"), std::string::npos) << got->error;
  EXPECT_NE(got->error.find("training step"), std::string::npos) << got->error;
}

TEST(Training, ARefusedConfigNamesTheField) {
  Coordinator coord(localOptions(2));
  EventClient client(coord);
  ASSERT_TRUE(client.waitJoined(2));
  TrainConfig t = tinyTraining(SyncMode::AllReduce, 2);
  t.batch = 33;  // not a multiple of 2 ranks
  const RunResult r = client.run(trainingRequest(smallSlices("ring"), t));
  EXPECT_EQ(r.state, RunState::Refused);
  EXPECT_NE(r.error.find("--batch 33"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace arl
