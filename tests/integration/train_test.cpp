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
    if (helperWorkers(algo) > 0) continue;  // switch trains no model (RunRequest refuses it)
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

// The events of `rank` in training step `step` whose kind `pick` accepts, in time order.
std::vector<TelemetryEvent> eventsOf(const RunResult& r, int rank, uint32_t step,
                                     bool (*pick)(EventKind)) {
  std::vector<TelemetryEvent> out;
  for (const TelemetryEvent& e : r.events)
    if (e.rank == rank && e.iteration == step && pick(e.kind)) out.push_back(e);
  return out;
}

bool isChunkSend(EventKind k) { return k == EventKind::SendStart; }
bool isChunkRecv(EventKind k) { return k == EventKind::RecvEnd; }

// Every rank's compute spans travel as telemetry beside its buckets' chunk events: per step,
// a forward event per layer in layer order, a backward event per layer from the last, then
// the optimizer's, each beginning after the one before ended; and the buckets' sends and
// receives. At level steps the compute spans remain and the chunk events go.
TEST(Training, ComputeSpansAreTelemetryBesideTheBucketsChunkEvents) {
  Coordinator coord(localOptions(4));
  EventClient client(coord);
  ASSERT_TRUE(client.waitJoined(4));
  const TrainConfig t = tinyTraining(SyncMode::AllReduce, 3);
  const uint32_t layers = static_cast<uint32_t>(t.layers.size() - 1);
  for (TelemetryLevel level : {TelemetryLevel::Chunks, TelemetryLevel::Steps}) {
    RunRequest base = smallSlices("ring");
    base.telemetry = level;
    const RunResult r = client.run(trainingRequest(base, t));
    ASSERT_EQ(r.state, RunState::Done) << r.error;
    EXPECT_EQ(r.eventsDropped, 0u);
    for (int rank = 0; rank < 4; ++rank) {
      for (uint32_t step = 0; step < t.steps; ++step) {
        const auto c = eventsOf(r, rank, step, isComputeKind);
        ASSERT_EQ(c.size(), 2 * layers + 1) << "rank " << rank << " step " << step;
        for (uint32_t l = 0; l < layers; ++l) {
          EXPECT_EQ(c[l].kind, EventKind::ComputeForward);
          EXPECT_EQ(c[l].chunk, l);
          EXPECT_EQ(c[layers + l].kind, EventKind::ComputeBackward);
          EXPECT_EQ(c[layers + l].chunk, layers - 1 - l);
        }
        EXPECT_EQ(c.back().kind, EventKind::ComputeOptimizer);
        for (size_t i = 0; i < c.size(); ++i) {
          EXPECT_EQ(c[i].peer, -1);
          if (i > 0) {
            EXPECT_GE(computeSpanStartNs(c[i]), c[i - 1].tNs) << "span " << i;
          }
        }
        const size_t sends = eventsOf(r, rank, step, isChunkSend).size();
        const size_t recvs = eventsOf(r, rank, step, isChunkRecv).size();
        if (level == TelemetryLevel::Chunks) {
          EXPECT_GT(sends, 0u) << "rank " << rank << " step " << step;
          EXPECT_GT(recvs, 0u) << "rank " << rank << " step " << step;
        } else {
          EXPECT_EQ(sends + recvs, 0u);
        }
      }
    }
  }
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
