// The sweep (runtime/sweep.h) on real local workers, driven from the test's thread the way
// bench and the window drive it: rows in order as they complete, stopping keeps them.
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "runtime/coordinator.h"
#include "runtime/sweep.h"

namespace arl {
namespace {

CoordinatorOptions localOptions(int n) {
  CoordinatorOptions o;
  o.localWorkers = n;
  o.workerBinary = ARL_WORKER_BINARY;
  return o;
}

SweepSpec smallSpec() {
  SweepSpec s;
  s.base.warmup = 1;
  s.base.iterations = 2;
  s.base.telemetry = TelemetryLevel::Chunks;
  s.algorithms = {"ring", "tree"};
  s.sizes = {4096};
  s.sliceSizes = {256, 1024};
  s.inflights = {1, 4};
  s.keepTelemetry = true;
  return s;
}

// The coordinator's workers once `n` have joined (the world a sweep is given).
std::vector<WorkerInfo> joined(const Coordinator& coord, size_t n) {
  const auto deadline = SteadyClock::now() + std::chrono::seconds(30);
  while (coord.workers().size() < n && SteadyClock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(coord.workers().size(), n) << "workers did not join";
  return coord.workers();
}

// Hands the coordinator's events to the sweep until it ends (at most 60 s).
void drive(Coordinator& coord, Sweep& sweep) {
  const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
  std::vector<CoordinatorEvent> evs;
  while (!sweep.finished() && SteadyClock::now() < deadline) {
    evs.clear();
    coord.takeEvents(evs, std::chrono::milliseconds(20));
    for (auto& ev : evs) sweep.onEvent(ev);
  }
  ASSERT_TRUE(sweep.finished()) << "the sweep did not end";
}

TEST(Sweep, EveryAlgorithmSliceAndInflightInOrderWithPredictions) {
  Coordinator coord(localOptions(3));
  std::vector<SweepPoint> reported;
  Sweep sweep(coord, smallSpec(), joined(coord, 3), [&](const SweepRow& r) {
    const RunRequest& q = r.result.request;
    reported.push_back({r.sizeBytes, q.algorithm, q.sliceBytes, q.inflight});
  });
  ASSERT_EQ(sweep.points().size(), 8u);
  sweep.start();
  drive(coord, sweep);
  EXPECT_TRUE(sweep.error().empty()) << sweep.error();
  ASSERT_EQ(sweep.rows().size(), 8u);
  ASSERT_EQ(reported.size(), 8u);
  for (size_t k = 0; k < 8; ++k) {
    const SweepPoint& p = sweep.points()[k];
    const SweepRow& row = sweep.rows()[k];
    SCOPED_TRACE(p.algorithm + " slice " + std::to_string(p.sliceBytes) + " inflight " +
                 std::to_string(p.inflight));
    EXPECT_EQ(reported[k].algorithm, p.algorithm);
    EXPECT_EQ(reported[k].sliceBytes, p.sliceBytes);
    EXPECT_EQ(reported[k].inflight, p.inflight);
    ASSERT_EQ(row.result.state, RunState::Done) << row.result.error;
    EXPECT_EQ(row.metrics.wrong, 0u);
    EXPECT_EQ(row.count, 1024u);
    EXPECT_EQ(row.sizeBytes, 4096u);
    EXPECT_TRUE(std::isfinite(row.predictedUs));
    EXPECT_GT(row.metrics.timeUs, 0);
    EXPECT_GT(row.endNs, row.startNs);
    EXPECT_EQ(row.result.events.size(), row.eventsKept);
    EXPECT_FALSE(row.result.events.empty());
  }
  // The slice size changes the schedule the workers ran: smaller slices, more messages.
  EXPECT_GT(sweep.rows()[0].result.events.size(), sweep.rows()[2].result.events.size());
}

TEST(Sweep, StoppingKeepsTheCompletedRows) {
  Coordinator coord(localOptions(2));
  Sweep* self = nullptr;
  Sweep sweep(coord, smallSpec(), joined(coord, 2), [&](const SweepRow&) { self->stop("enough"); });
  self = &sweep;
  sweep.start();
  drive(coord, sweep);
  ASSERT_EQ(sweep.rows().size(), 1u);
  EXPECT_EQ(sweep.rows()[0].result.state, RunState::Done);
  EXPECT_EQ(sweep.error(), "enough");
}

TEST(Sweep, StoppingMidRunAbortsItAndKeepsItsRow) {
  Coordinator coord(localOptions(2));
  SweepSpec spec = smallSpec();
  spec.base.iterations = 100000;
  spec.base.check = 0;
  spec.base.telemetry = TelemetryLevel::Steps;
  Sweep sweep(coord, spec, joined(coord, 2));
  sweep.start();
  std::vector<CoordinatorEvent> evs;
  int iterations = 0;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(30);
  while (iterations < 4 && !sweep.finished() && SteadyClock::now() < deadline) {
    evs.clear();
    coord.takeEvents(evs, std::chrono::milliseconds(20));
    for (auto& ev : evs) {
      iterations += std::holds_alternative<IterationEvent>(ev) ? 1 : 0;
      sweep.onEvent(ev);
    }
  }
  ASSERT_GE(iterations, 4) << "the long run did not get going: " << sweep.error();
  sweep.stop("stopped by the test");
  drive(coord, sweep);
  ASSERT_EQ(sweep.rows().size(), 1u);
  EXPECT_EQ(sweep.rows()[0].result.state, RunState::Aborted);
  EXPECT_EQ(sweep.error(), "stopped by the test");
}

TEST(Sweep, ARefusedRunEndsTheSweepWithItsError) {
  Coordinator coord(localOptions(2));
  SweepSpec spec = smallSpec();
  spec.base.ringOrder = {1, 1};
  Sweep sweep(coord, spec, joined(coord, 2));
  sweep.start();
  drive(coord, sweep);
  ASSERT_EQ(sweep.rows().size(), 1u);
  EXPECT_EQ(sweep.rows()[0].result.state, RunState::Refused);
  EXPECT_NE(sweep.error().find("(1 comes twice)"), std::string::npos) << sweep.error();
}

TEST(Sweep, PredictsWithTheSharedMemoryPlaneWhereWorkersChooseIt) {
  WorkerInfo a, b;
  a.host = b.host = "h1";
  a.pidNamespace = b.pidNamespace = 7;
  EXPECT_TRUE(runsOverSharedMemory(DataPlaneKind::Auto, {a, b}));
  EXPECT_TRUE(runsOverSharedMemory(DataPlaneKind::Shm, {a, b}));
  EXPECT_FALSE(runsOverSharedMemory(DataPlaneKind::Zmq, {a, b}));
  WorkerInfo other = b;
  other.host = "h2";
  EXPECT_FALSE(runsOverSharedMemory(DataPlaneKind::Auto, {a, other}));
  other = b;
  other.pidNamespace = 8;
  EXPECT_FALSE(runsOverSharedMemory(DataPlaneKind::Auto, {a, other}));
}

}  // namespace
}  // namespace arl
