// The one mapping from a bench configuration to its sweep (export/bench_sweep.h): every run
// setting of the configuration reaches every run, and nothing else changes the sweep.
#include "export/bench_sweep.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "exec/run_request.h"
#include "export/session_json.h"
#include "runtime/run_plan.h"

namespace arl {
namespace {

// A configuration whose every run setting differs from its default.
BenchConfig unusualConfig() {
  BenchConfig c;
  c.iters = 7;
  c.warmup = 2;
  c.check = 0;
  c.op = RedOp::Max;
  c.dtype = DataType::Int32;
  c.collective = Collective::AllGather;
  c.algorithms = {"tree", "ring"};
  c.ranksPerHost = 2;
  c.sliceSizes = {16 << 10, 64 << 10};
  c.inflights = {1, 8};
  c.ringOrder = {0, 2, 1, 3};
  c.telemetry = TelemetryLevel::Steps;
  c.maxEvents = 1234;
  c.dataPlane = DataPlaneKind::Zmq;
  c.cudaIpc = false;
  c.stallTimeout = std::chrono::milliseconds(4321);
  c.shaping.portBytesPerSecond = 200e6;
  c.shaping.addedLatencySeconds = 5e-6;
  c.shaping.rankPortBytesPerSecond[1] = 100e6;
  c.root = 3;
  c.inPlace = true;
  return c;
}

TEST(BenchSweep, EveryRunSettingOfTheConfigurationReachesTheRuns) {
  const BenchConfig c = unusualConfig();
  const std::vector<uint64_t> sizes = {4 << 10, 64 << 10};
  const SweepSpec s = sweepSpecOf(c, sizes);
  EXPECT_EQ(s.algorithms, c.algorithms);
  EXPECT_EQ(s.sizes, sizes);
  EXPECT_EQ(s.sliceSizes, c.sliceSizes);
  EXPECT_EQ(s.inflights, c.inflights);
  EXPECT_EQ(s.shaping, c.shaping);
  EXPECT_FALSE(s.keepTelemetry);  // the caller's to set
  EXPECT_EQ(s.model, ModelParams{});

  const std::vector<SweepPoint> points = sweepPoints(s);
  ASSERT_EQ(points.size(), 2u * 2u * 2u * 2u);
  const SweepPoint& p = points.back();
  const RunRequest q = sweepRequest(s, p, 4);
  EXPECT_EQ(q.algorithm, "ring");
  EXPECT_EQ(q.collective, Collective::AllGather);
  EXPECT_EQ(q.dtype, DataType::Int32);
  EXPECT_EQ(q.op, RedOp::Max);
  EXPECT_EQ(q.count, apiCountForSize(Collective::AllGather, 4, 64 << 10, DataType::Int32));
  EXPECT_EQ(q.sliceBytes, uint64_t{64} << 10);
  EXPECT_EQ(q.root, 3);
  EXPECT_EQ(q.ranksPerHost, 2);
  EXPECT_EQ(q.ringOrder, (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(q.inflight, 8);
  EXPECT_TRUE(q.inPlace);
  EXPECT_EQ(q.warmup, 2);
  EXPECT_EQ(q.iterations, 7);
  EXPECT_EQ(q.check, 0u);
  EXPECT_EQ(q.telemetry, TelemetryLevel::Steps);
  EXPECT_EQ(q.maxEvents, 1234u);
  EXPECT_EQ(q.stallTimeout, std::chrono::milliseconds(4321));
  EXPECT_EQ(q.dataPlane, DataPlaneKind::Zmq);
  EXPECT_FALSE(q.cudaIpc);
  EXPECT_EQ(q.shaping, c.shaping);
}

// The defaults of a configuration are the defaults of the runs: a client that leaves a
// setting alone gets what bench runs without its flag.
TEST(BenchSweep, TheConfigurationsDefaultsAreTheRunsDefaults) {
  const SweepSpec s = sweepSpecOf(BenchConfig{}, {1 << 20});
  const BenchConfig d;
  EXPECT_EQ(s.base.iterations, d.iters);
  EXPECT_EQ(s.base.warmup, d.warmup);
  EXPECT_EQ(s.base.maxEvents, d.maxEvents);
  EXPECT_EQ(s.base.stallTimeout, d.stallTimeout);
  EXPECT_EQ(s.base.dataPlane, DataPlaneKind::Auto);
  EXPECT_TRUE(s.base.cudaIpc);
  EXPECT_EQ(s.base.check, 1u);
  EXPECT_EQ(s.base.telemetry, TelemetryLevel::Chunks);
}

// Random data has no expected result: whatever -c says, nothing is checked, and every place
// that asks takes it from the request (RunRequest::checkedIterations): the ranks' RunConfig,
// the in-process run, the results JSON's configuration.
TEST(BenchSweep, RandomDataChecksNothingWhereverItIsAsked) {
  BenchConfig c;
  c.check = 3;
  c.randomData = true;
  const RunRequest q = runRequestOf(c);
  EXPECT_EQ(q.check, 3u);
  EXPECT_EQ(q.checkedIterations(), 0u);
  EXPECT_EQ(sweepSpecOf(c, {4096}).base.checkedIterations(), 0u);
  ResolvedRun run;
  run.nranks = 2;
  run.ranksPerHost = 2;
  run.ringOrder = {0, 1};
  EXPECT_EQ(runConfigOf(q, run, {}).check, 0u);
  EXPECT_EQ(localRunOptions(q).check, 0u);
  const Json config = configJson(c);
  EXPECT_EQ(config.at("check"), false);
  EXPECT_EQ(config.at("check_iterations"), 0);
  // Checkable data keeps -c's count.
  c.randomData = false;
  EXPECT_EQ(runRequestOf(c).checkedIterations(), 3u);
  EXPECT_EQ(runConfigOf(runRequestOf(c), run, {}).check, 3u);
  EXPECT_EQ(configJson(c).at("check_iterations"), 3);
}

// What the configuration says about workers, sizes' bounds and outputs is not the runs'.
TEST(BenchSweep, WorkersAndOutputsLeaveTheSweepAlone) {
  const BenchConfig c = unusualConfig();
  BenchConfig other = c;
  other.workers = 9;
  other.expect = 2;
  other.listen = "tcp://*:5555";
  other.backend = "cuda";
  other.devices = {1};
  other.minBytes = 1;
  other.maxBytes = 2;
  other.stepFactor = 4;
  other.jsonPath = "r.json";
  other.recordPath = "r.arlrec";
  EXPECT_EQ(sweepSpecOf(other, {4096}), sweepSpecOf(c, {4096}));
  other.stallTimeout += std::chrono::milliseconds(1);
  EXPECT_NE(sweepSpecOf(other, {4096}), sweepSpecOf(c, {4096}));
}

}  // namespace
}  // namespace arl
