#include "model/model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/errors.h"
#include "model/metrics.h"
#include "schedule/generators.h"
#include "schedule/verifier.h"

namespace arl {
namespace {

CostQuery query(std::string_view algo, int n, uint64_t bytes, uint64_t slice,
                Collective c = Collective::AllReduce) {
  CostQuery q;
  q.algorithm = algo;
  q.collective = c;
  q.nranks = n;
  q.bytes = bytes;
  q.sliceBytes = slice;
  return q;
}

Schedule gen(std::string_view algo, int n, uint64_t count, uint64_t sliceElems,
             Collective c = Collective::AllReduce) {
  GenParams p;
  p.collective = c;
  p.nranks = n;
  p.count = count;
  p.sliceElems = sliceElems;
  Schedule s = generate(algo, p);
  const VerifyResult vr = annotate(s);
  EXPECT_TRUE(vr.ok) << vr.message;
  return s;
}

TEST(Model, RingClosedFormIsThakurs) {
  // Unsliced ring all-reduce: 2(n-1) alpha + 2(n-1)/n S beta + (n-1)/n S gamma.
  const CostTerms t = closedForm(query("ring", 8, 8000, 0));
  EXPECT_DOUBLE_EQ(t.alphaCount, 14);
  EXPECT_DOUBLE_EQ(t.betaBytes, 14 * 1000);
  EXPECT_DOUBLE_EQ(t.gammaBytes, 7 * 1000);
  ModelParams p;
  p.alpha = 1e-6;
  p.beta = 1e-9;
  p.gamma = 1e-10;
  EXPECT_DOUBLE_EQ(t.seconds(p), 14e-6 + 14e-6 + 7e-7);
  // One rank moves nothing.
  EXPECT_EQ(predictSeconds(query("ring", 1, 1 << 20, 0)), 0.0);
  // Slicing each n-th into 4 slices: every slice pays every step's latency.
  EXPECT_DOUBLE_EQ(closedForm(query("ring", 8, 8000, 250)).alphaCount, 14 * 4);
}

TEST(Model, TreeBeatsRingWhenSmallAndWideRingWinsWhenLarge) {
  for (int n : {16, 32, 64}) {
    const double ring = predictSeconds(query("ring", n, 8, 8));
    const double tree = predictSeconds(query("tree", n, 8, 8));
    EXPECT_LT(tree, ring) << n << " ranks, 8 bytes";
  }
  for (int n : {4, 8, 16}) {
    const uint64_t big = uint64_t{1} << 30;
    const double ring = predictSeconds(query("ring", n, big, 4 << 20));
    const double tree = predictSeconds(query("tree", n, big, 4 << 20));
    EXPECT_LT(ring, tree) << n << " ranks, 1 GiB";
  }
  // The crossover moves to larger sizes as ranks grow (ring latency grows linearly).
  auto crossover = [](int n) {
    uint64_t b = 8;
    while (b < (uint64_t{1} << 40) && predictSeconds(query("tree", n, b, 1 << 20)) <=
                                          predictSeconds(query("ring", n, b, 1 << 20))) {
      b *= 2;
    }
    return b;
  };
  EXPECT_LT(crossover(8), crossover(64));
}

TEST(Model, EveryAlgorithmHasAClosedForm) {
  for (const std::string& a : algorithmNames()) {
    for (Collective c : kAllCollectives) {
      if (!algorithmSupports(a, c)) {
        EXPECT_THROW(closedForm(query(a, 8, 1 << 20, 1 << 16, c)), GenError) << a;
        continue;
      }
      CostQuery q = query(a, 8, 1 << 20, 1 << 16, c);
      q.ranksPerHost = 4;
      const double t = predictSeconds(q);
      EXPECT_GT(t, 0) << a << " " << toString(c);
      q.bytes *= 4;
      EXPECT_GT(predictSeconds(q), t) << a << " " << toString(c) << " grows with size";
    }
  }
  EXPECT_THROW(closedForm(query("no-such", 8, 1, 1)), GenError);
}

TEST(Model, SimulatedRingIsNearItsClosedForm) {
  // 8 ranks, 1M floats, 64 KiB slices, uniform default links.
  const ModelParams p;
  const Schedule s = gen("ring", 8, 1 << 20, 16384);
  const ModelTimeline tl = simulate(s, LinkModel::fromParams(p));
  const double closed = predictSeconds(query("ring", 8, 4 << 20, 64 << 10), p);
  ASSERT_GT(tl.totalSeconds, 0);
  EXPECT_GT(tl.totalSeconds / closed, 0.67) << tl.totalSeconds << " vs " << closed;
  EXPECT_LT(tl.totalSeconds / closed, 1.5) << tl.totalSeconds << " vs " << closed;
}

// A window of W slices (GenParams::window) takes W slices through each step together: each
// step's latency is paid once a window. The closed form counts ceil(k / W) latencies a step,
// and the simulation of the windowed schedule, on links where latency is all there is, agrees.
TEST(Model, ARingWindowPaysEachStepsLatencyOncePerWindow) {
  CostQuery q = query("ring", 8, 8000, 250);  // 4 slices a chunk
  q.window = 2;
  EXPECT_DOUBLE_EQ(closedForm(q).alphaCount, 14 * 2);
  q.window = 3;
  EXPECT_DOUBLE_EQ(closedForm(q).alphaCount, 14 * 2);
  q.window = 8;
  EXPECT_DOUBLE_EQ(closedForm(q).alphaCount, 14);
  EXPECT_DOUBLE_EQ(closedForm(q).betaBytes, 14 * 1000);
  // Other algorithms take their slices one by one whatever the window.
  CostQuery t = query("tree", 8, 8000, 250);
  const double treeAlpha = closedForm(t).alphaCount;
  t.window = 8;
  EXPECT_DOUBLE_EQ(closedForm(t).alphaCount, treeAlpha);

  LinkModel latencyOnly;
  latencyOnly.port = {1e15, 1e15};
  latencyOnly.defaults = {1e15, 1e-3};  // 1 ms a message, bytes free
  latencyOnly.reduceBytesPerSecond = 0;
  latencyOnly.copyBytesPerSecond = 0;
  GenParams p;
  p.nranks = 4;
  p.count = 64;  // 16 elements a chunk: 16 slices of 1
  p.sliceElems = 1;
  const double plain = simulate(ringSchedule(p), latencyOnly).totalSeconds;
  EXPECT_NEAR(plain, 6 * 16 * 1e-3, 1e-6);  // 2(n-1) latencies a slice, slice after slice
  for (uint32_t w : {4u, 16u}) {
    p.window = w;
    const Schedule s = ringSchedule(p);
    ASSERT_TRUE(verify(s).ok);
    const double windowed = simulate(s, latencyOnly).totalSeconds;
    EXPECT_NEAR(windowed, 6 * (16 / w) * 1e-3, 1e-6) << "window " << w;
  }
}

TEST(Model, SimulationMatchesHandComputedTimes) {
  // Ring all-reduce over 2 ranks, 4 floats, one slice per chunk: rank r sends chunk (r+1)%2
  // at step 0 and receives the other at step 1. Per message: 8 bytes at 8 B/s = 1 s on the
  // link, plus 0.5 s latency; each reduction of 8 bytes at 16 B/s takes 0.5 s; copies free.
  const Schedule s = gen("ring", 2, 4, 2);
  LinkModel m;
  m.defaults = {8.0, 0.5};
  m.reduceBytesPerSecond = 16;
  m.copyBytesPerSecond = 0;  // infinitely fast
  const ModelTimeline tl = simulate(s, m);
  // Step 0 send: [0, 1], arrives 1.5; RecvReduceCopySend: reduce until 2.0, send [2, 3],
  // arrives 3.5; final Recv at 3.5 (copy free). Both ranks are symmetric.
  EXPECT_DOUBLE_EQ(tl.totalSeconds, 3.5);
  ASSERT_EQ(tl.rankSeconds.size(), 2u);
  EXPECT_DOUBLE_EQ(tl.rankSeconds[0], 3.5);
  EXPECT_DOUBLE_EQ(tl.rankSeconds[1], 3.5);
}

// Ports at 8 B/s each way, no latency, free reductions and copies: an 8-byte message holds a
// port for 1 s.
LinkModel portsOf8BytesPerSecond() {
  LinkModel m;
  m.port = {8, 8};
  m.defaults = {0, 0};
  m.reduceBytesPerSecond = 0;
  m.copyBytesPerSecond = 0;
  return m;
}

TEST(Model, ParameterServerIterationsOverlapAsHandComputed) {
  // 3 ranks, 2 floats (8 bytes), one slice. First iteration: both workers push at 0; the
  // server's ingress takes them [0, 1] and [1, 2], its egress answers [2, 3] and [3, 4]:
  // 4 s = 2 (n - 1) S. Then worker 1, done at 3, pushes at 3 while the server still sends to
  // worker 2; the server, done at 4, has worker 1's push at 4 and worker 2's at 5, and answers
  // [5, 6] and [6, 7]: every rank's iteration takes 3 s = n S from then on.
  SimOptions o;
  o.iterations = 4;
  const ModelTimeline tl = simulate(gen("parameter-server", 3, 2, 2), portsOf8BytesPerSecond(), o);
  EXPECT_EQ(tl.iterationSeconds, (std::vector<double>{4.0, 3.0, 3.0, 3.0}));
  EXPECT_DOUBLE_EQ(tl.totalSeconds, 13.0);
  EXPECT_DOUBLE_EQ(iterationSeconds(gen("parameter-server", 3, 2, 2), portsOf8BytesPerSecond()),
                   3.0);
  // The closed form says the same: (n - 1) S + sigma bytes through the server's egress.
  ModelParams p;
  p.alpha = 0;
  p.beta = 1.0 / 8;
  p.gamma = 0;
  EXPECT_DOUBLE_EQ(closedForm(query("parameter-server", 3, 8, 8)).seconds(p), 3.0);
}

TEST(Model, TreeOnFourRanksTakesTheHandComputedTime) {
  // NCCL's double binary tree over 4 ranks (tree 0: 0 <- 2 <- {1, 3}; tree 1: 3 <- 1 <- {2, 0}),
  // 4 floats, each tree carrying one 8-byte half in one slice, 1 s per message:
  //  t0 up:   1 -> 2 and 3 -> 2 start at 0; rank 2's ingress takes them [0, 1], [1, 2]; 2 -> 0
  //           [2, 3].
  //  t1 up:   2 -> 1 [3, 4] (rank 2's egress after 2 -> 0), 0 -> 1 [3, 4] (rank 0 has the sum
  //           of tree 0 at 3); rank 1's ingress takes them [3, 4], [4, 5]; 1 -> 3 [5, 6].
  //  t0 down: 0 -> 2 [4, 5] (rank 0's egress after 0 -> 1); 2 -> 1 [5, 6], 2 -> 3 [6, 7].
  //  t1 down: 3 -> 1 [7, 8] (rank 3 has 2's message at 7); 1 -> 2 [8, 9], 1 -> 0 [9, 10].
  // 10 s, where four passes charged one after another at 2 messages through the busiest port
  // and a pipeline fill each would take 16 s. Back to back, rank 3 (done at 8) and rank 2
  // (done at 9) start the next iteration early, but rank 2's ingress then waits for rank 1,
  // done at 10: every iteration takes 10 s.
  const Schedule s = gen("tree", 4, 4, 2);
  SimOptions o;
  o.iterations = 3;
  const ModelTimeline tl = simulate(s, portsOf8BytesPerSecond(), o);
  EXPECT_EQ(tl.iterationSeconds, (std::vector<double>{10.0, 10.0, 10.0}));
  const ModelTimeline first = simulate(s, portsOf8BytesPerSecond());
  EXPECT_EQ(first.rankSeconds, (std::vector<double>{10.0, 10.0, 9.0, 8.0}));
  // The closed form with the same parameters.
  ModelParams p;
  p.alpha = 0;
  p.beta = 1.0 / 8;
  p.gamma = 0;
  EXPECT_DOUBLE_EQ(closedForm(query("tree", 4, 16, 8)).seconds(p), 10.0);
}

TEST(Model, CappedLinkSlowsTheSimulatedRun) {
  const Schedule s = gen("ring", 8, 1 << 18, 4096);
  const LinkModel uniform = LinkModel::fromParams({});
  LinkModel capped = uniform;
  capped.overrides[{3, 4}] = {uniform.port.egressBytesPerSecond / 10,
                              uniform.defaults.latencySeconds};
  const double base = simulate(s, uniform).totalSeconds;
  const double slow = simulate(s, capped).totalSeconds;
  // Every byte of a ring crosses every link, so one link at a tenth of the bandwidth holds
  // everyone back by several times.
  EXPECT_GT(slow, 3 * base) << slow << " vs " << base;

  LinkModel slowRank = uniform;
  slowRank.rankReduceBytesPerSecond[5] = uniform.reduceBytesPerSecond / 50;
  EXPECT_GT(simulate(s, slowRank).totalSeconds, 1.5 * base);
}

TEST(Model, HierarchicalWinsWhenLinksBetweenHostsAreSlow) {
  // 8 ranks on two hosts of 4; the network between the hosts at a tenth of the bandwidth
  // inside them.
  GenParams p;
  p.nranks = 8;
  p.count = 1 << 18;
  p.sliceElems = 4096;
  p.ranksPerHost = 4;
  Schedule hier = generate("hierarchical", p);
  Schedule ring = generate("ring", p);
  ASSERT_TRUE(annotate(hier).ok);
  ASSERT_TRUE(annotate(ring).ok);
  ModelParams slowNetwork;
  slowNetwork.intraHostBeta = slowNetwork.beta;
  slowNetwork.beta *= 10;
  const LinkModel m = LinkModel::fromParams(slowNetwork, 4);
  const LinkModel uniform = LinkModel::fromParams({});
  // Uniform links: the same ring costs, nearly the same time.
  EXPECT_NEAR(simulate(hier, uniform).totalSeconds / simulate(ring, uniform).totalSeconds, 1.0,
              0.2);
  // Slow inter-host links: the flat ring pushes 2(n-1)/n of the vector through them, the
  // hierarchical one only a 1/K shard per rank.
  const double h = simulate(hier, m).totalSeconds, r = simulate(ring, m).totalSeconds;
  EXPECT_LT(2 * h, r) << h << " vs " << r;
}

TEST(Model, TimelineHasTheShapeOfTelemetry) {
  const Schedule s = gen("ring", 4, 1000, 64);
  SimOptions o;
  o.runId = 7;
  o.iteration = 3;
  const ModelTimeline tl = simulate(s, LinkModel::fromParams({}), o);
  EXPECT_TRUE(tl.predicted);
  size_t sends = 0, recvs = 0, reduces = 0;
  for (const auto& ops : s.ranks) {
    for (const Op& op : ops) {
      sends += opSends(op.kind) ? 1 : 0;
      recvs += opRecvs(op.kind) ? 1 : 0;
      reduces += opReduces(op.kind) ? 1 : 0;
    }
  }
  size_t sendStart = 0, sendEnd = 0, recvEnd = 0, reduceEnd = 0, iterEnd = 0, stepEnd = 0;
  int64_t last = 0;
  for (const TelemetryEvent& e : tl.events) {
    EXPECT_EQ(e.runId, 7u);
    EXPECT_EQ(e.iteration, 3u);
    EXPECT_GE(e.tNs, last);  // ordered by time
    last = e.tNs;
    switch (e.kind) {
      case EventKind::SendStart:
        ++sendStart;
        EXPECT_NE(e.provenance, 0u);
        EXPECT_GE(e.peer, 0);
        break;
      case EventKind::SendEnd: ++sendEnd; break;
      case EventKind::RecvEnd: ++recvEnd; break;
      case EventKind::ReduceEnd: ++reduceEnd; break;
      case EventKind::StepEnd: ++stepEnd; break;
      case EventKind::IterationEnd: ++iterEnd; break;
      default: ADD_FAILURE() << "the executor recorded NCCL's " << toString(e.kind); break;
    }
  }
  EXPECT_EQ(sendStart, sends);
  EXPECT_EQ(sendEnd, sends);
  EXPECT_EQ(recvEnd, recvs);
  EXPECT_EQ(reduceEnd, reduces);
  EXPECT_EQ(iterEnd, 4u);
  EXPECT_GE(stepEnd, 4u);
  EXPECT_EQ(last, std::llround(tl.totalSeconds * 1e9));

  o.telemetry = TelemetryLevel::Steps;
  for (const TelemetryEvent& e : simulate(s, LinkModel::fromParams({}), o).events) {
    EXPECT_TRUE(e.kind == EventKind::StepEnd || e.kind == EventKind::IterationEnd);
  }
  o.telemetry = TelemetryLevel::Off;
  EXPECT_TRUE(simulate(s, LinkModel::fromParams({}), o).events.empty());
}

TEST(Model, UnmatchedReceiveIsReported) {
  Schedule s;
  s.algorithm = "broken";
  s.nranks = 2;
  s.count = 4;
  s.sliceElems = 4;
  s.inputElems = s.outputElems = 4;
  s.nsteps = 1;
  s.ranks.resize(2);
  Op r;
  r.kind = OpKind::Recv;
  r.recvPeer = 0;
  r.dst = {Buffer::Output, 0};
  r.count = 4;
  s.ranks[1].push_back(r);
  try {
    simulate(s, LinkModel{});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 1"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 0"), std::string::npos) << m;
  }
}

TEST(Model, LineFitRecoversExactPoints) {
  const LinearFit f = fitLine({0, 1000, 5000, 1e6}, {2e-6, 3e-6, 7e-6, 1.002e-3});
  EXPECT_NEAR(f.intercept, 2e-6, 1e-15);
  EXPECT_NEAR(f.slope, 1e-9, 1e-20);
  EXPECT_LT(f.rmsResidual, 1e-15);
  EXPECT_EQ(f.points, 4u);
  EXPECT_THROW(fitLine({5, 5}, {1, 2}), ConfigError);
  EXPECT_THROW(fitLine({5}, {1}), ConfigError);
}

TEST(Model, AlphaBetaFitRecoversParametersOfAnAlgorithm) {
  ModelParams truth;
  truth.alpha = 35e-6;
  truth.beta = 1.0 / 2.2e9;
  truth.gamma = 1.0 / 3e9;
  for (std::string_view algo : {"ring", "tree", "halving-doubling"}) {
    CostQuery q = query(algo, 8, 0, 64 << 10);
    std::vector<MeasuredPoint> pts;
    for (uint64_t b = 1 << 10; b <= (64u << 20); b *= 4) {
      q.bytes = b;
      pts.push_back({b, predictSeconds(q, truth)});
    }
    const AlphaBetaFit f = fitAlphaBeta(q, pts, truth.gamma);
    EXPECT_NEAR(f.alpha / truth.alpha, 1.0, 1e-6) << algo;
    EXPECT_NEAR(f.beta / truth.beta, 1.0, 1e-6) << algo;
    EXPECT_LT(f.rmsResidual, 1e-12) << algo;
    EXPECT_EQ(f.points, pts.size());
  }
  // Noise shows up in the residual.
  std::vector<CostTerms> terms{{1, 1000, 0}, {1, 2000, 0}, {1, 4000, 0}};
  const AlphaBetaFit noisy = fitAlphaBeta(terms, {1.0, 1.5, 3.5}, 0);
  EXPECT_GT(noisy.rmsResidual, 0.01);
  // Proportional columns cannot be separated.
  EXPECT_THROW(fitAlphaBeta({{1, 100, 0}, {2, 200, 0}}, {1, 2}, 0), ConfigError);
}

}  // namespace
}  // namespace arl
