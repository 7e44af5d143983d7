#include "base/topology.h"

#include <gtest/gtest.h>

#include <string>

#include "base/shaping.h"
#include "model/model.h"
#include "transport/pacing.h"

namespace arl {
namespace {

// The message of the TopologyError parseTopology and checkTopology throw, or "".
std::string refusal(const std::string& text, int nranks) {
  try {
    checkTopology(parseTopology(text), nranks);
    return "";
  } catch (const TopologyError& e) {
    return e.what();
  }
}

TEST(Topology, TorusHopsAreTheGridDistanceTheShorterWayRound) {
  const Topology t = parseTopology("torus:4x4");
  EXPECT_EQ(t.rows, 4);
  EXPECT_EQ(t.cols, 4);
  // Rank r sits at row r / 4, column r % 4.
  EXPECT_EQ(topologyHops(t, 0, 1), 1);
  EXPECT_EQ(topologyHops(t, 0, 4), 1);
  EXPECT_EQ(topologyHops(t, 0, 3), 1) << "wrap-around in the row";
  EXPECT_EQ(topologyHops(t, 0, 12), 1) << "wrap-around in the column";
  EXPECT_EQ(topologyHops(t, 3, 4), 2) << "end of a row to the start of the next";
  EXPECT_EQ(topologyHops(t, 0, 2), 2);
  EXPECT_EQ(topologyHops(t, 0, 5), 2);
  EXPECT_EQ(topologyHops(t, 0, 10), 4) << "the farthest: two each way";
  EXPECT_EQ(topologyHops(t, 15, 0), 2);
  int neighbours = 0;
  for (int b = 1; b < 16; ++b) neighbours += topologyHops(t, 0, b) == 1;
  EXPECT_EQ(neighbours, 4);
}

TEST(Topology, TorusExpandsIntoEveryPairAtTheLinkRateOverHops) {
  const Topology t = parseTopology("torus:4x4@1G");
  const LinkShaping s = expandTopology(t, 16, {}, 2e-6);
  EXPECT_EQ(s.linkBytesPerSecond.size(), 16u * 15u);
  EXPECT_EQ(s.linkLatencySeconds.size(), 16u * 15u);
  EXPECT_DOUBLE_EQ(s.linkRate(0, 1), 1e9);
  EXPECT_DOUBLE_EQ(s.linkRate(1, 0), 1e9);
  EXPECT_DOUBLE_EQ(s.linkRate(0, 12), 1e9);
  EXPECT_DOUBLE_EQ(s.linkRate(3, 4), 0.5e9);
  EXPECT_DOUBLE_EQ(s.linkRate(0, 10), 0.25e9);
  EXPECT_DOUBLE_EQ(s.pathLatency(0, 1), 2e-6);
  EXPECT_DOUBLE_EQ(s.pathLatency(0, 10), 8e-6);
  EXPECT_EQ(s.portBytesPerSecond, 0) << "ports stay unshaped without --nic-bw";
  EXPECT_FALSE(s.uniform());
  EXPECT_NO_THROW(checkShaping(s, 16));
  EXPECT_EQ(describeShaping(s), "240 links at 250 MB/s to 1 GB/s, 240 links +2 us to +8 us");
}

TEST(Topology, LinkRateComesFromThePortsWithoutRate) {
  LinkShaping ports;
  ports.portBytesPerSecond = 100e6;
  ports.addedLatencySeconds = 1e-6;
  const LinkShaping s = expandTopology(parseTopology("torus:2x3"), 6, ports, 0);
  EXPECT_DOUBLE_EQ(s.portBytesPerSecond, 100e6);
  EXPECT_DOUBLE_EQ(s.addedLatencySeconds, 1e-6);
  EXPECT_TRUE(s.linkLatencySeconds.empty());
  // 2x3: rank 0 (0,0) and rank 5 (1,2) are 1 + 1 hops apart.
  EXPECT_DOUBLE_EQ(s.linkRate(0, 5), 50e6);
  EXPECT_DOUBLE_EQ(s.pathRate(0, 5), 50e6);
  EXPECT_DOUBLE_EQ(s.pathRate(0, 1), 100e6);
  const LinkShaping byDefault = expandTopology(parseTopology("torus:2x3"), 6, {}, 0);
  EXPECT_DOUBLE_EQ(byDefault.linkRate(0, 1), kDefaultLinkBytesPerSecond);
  EXPECT_DOUBLE_EQ(byDefault.linkRate(0, 5), kDefaultLinkBytesPerSecond / 2);
}

TEST(Topology, FatTreeRunsAtTheLinkRateInsideALeafAndOversubscribedBetween) {
  const Topology t = parseTopology("fat-tree:4:2@800M");
  EXPECT_EQ(t.groupSize, 4);
  EXPECT_DOUBLE_EQ(t.oversubscription, 2);
  EXPECT_EQ(topologyName(t), "fat-tree:4:2@800M");
  const LinkShaping s = expandTopology(t, 8, {}, 1e-6);
  EXPECT_DOUBLE_EQ(s.linkRate(0, 3), 800e6);
  EXPECT_DOUBLE_EQ(s.linkRate(4, 7), 800e6);
  EXPECT_DOUBLE_EQ(s.linkRate(3, 4), 400e6);
  EXPECT_DOUBLE_EQ(s.linkRate(7, 0), 400e6);
  EXPECT_DOUBLE_EQ(s.pathLatency(0, 3), 2e-6);
  EXPECT_DOUBLE_EQ(s.pathLatency(0, 4), 4e-6);
  EXPECT_EQ(parseTopology("fat-tree:8").oversubscription, 1);
  EXPECT_EQ(topologyName(parseTopology("fat-tree:8")), "fat-tree:8");
}

TEST(Topology, RefusesWhatItCannotBuildNamingTheRule) {
  EXPECT_EQ(refusal("torus:4x4", 16), "");
  EXPECT_EQ(refusal("fat-tree:4:1.5@1G", 8), "");
  EXPECT_EQ(refusal("torus:4x4", 8), "torus:4x4 has 16 ranks, the run has 8");
  EXPECT_EQ(refusal("fat-tree:3", 8), "fat-tree:3: leaves of 3 ranks do not divide 8 ranks");
  EXPECT_EQ(refusal("ring:4", 4),
            "unknown topology 'ring': expected torus:RxC[@RATE] or fat-tree:K[:O][@RATE]");
  EXPECT_EQ(refusal("torus", 4), "expected torus:RxC[@RATE] or fat-tree:K[:O][@RATE]");
  EXPECT_EQ(refusal("torus:4", 4),
            "torus dimensions '4': expected RxC, two whole numbers above 0, e.g. torus:4x4");
  EXPECT_EQ(refusal("torus:0x4", 4),
            "torus dimensions '0x4': expected RxC, two whole numbers above 0, e.g. torus:4x4");
  EXPECT_EQ(refusal("fat-tree:x", 4),
            "fat-tree leaf size 'x': expected a whole number of ranks above 0, e.g. fat-tree:8");
  EXPECT_EQ(refusal("fat-tree:4:0.5", 8),
            "fat-tree oversubscription '0.5': expected a number of 1 or more (O for O:1), e.g. "
            "fat-tree:8:4");
  EXPECT_EQ(refusal("torus:2x2@fast", 4),
            "link rate 'fast': expected bytes per second above 0, e.g. @1G (K, M, G = 1e3, 1e6, "
            "1e9)");
}

TEST(Topology, LinkLatencyIsPacedOnArrivalAndRefusedWhenBad) {
  LinkShaping s;
  s.addedLatencySeconds = 1e-6;
  s.linkLatencySeconds[{0, 1}] = 3e-6;
  Pacer toOne(s, 1, 2, 0);
  EXPECT_EQ(toOne.claimReceive(0, 0, 1000), 1000 + 4000) << "added plus the link's own";
  Pacer toZero(s, 0, 2, 0);
  EXPECT_EQ(toZero.claimReceive(1, 0, 1000), 1000 + 1000) << "the other way has none of its own";
  s.linkLatencySeconds[{0, 1}] = -1;
  EXPECT_THROW(checkShaping(s, 2), ShapingError);
  s.linkLatencySeconds.clear();
  s.linkLatencySeconds[{1, 1}] = 1e-6;
  try {
    checkShaping(s, 2);
    FAIL();
  } catch (const ShapingError& e) {
    EXPECT_STREQ(e.what(), "link latency 1-1: a link joins two different ranks");
  }
}

// The simulation prices a link's own latency: a ring all-reduce of a tiny message on a torus
// pays, over its 2(n-1) steps, the latencies of the links its chain of messages crosses, about
// their mean per step, as the closed form says.
TEST(Topology, ModelPricesHopsByClosedFormAndSimulationAlike) {
  CostQuery q;
  q.algorithm = "ring";
  q.nranks = 16;
  q.bytes = 64;
  q.shaping = expandTopology(parseTopology("torus:4x4@1G"), 16, {}, 10e-6);
  ModelParams p;
  p.alpha = 1e-6;
  p.beta = 1e-10;
  p.gamma = 1e-10;
  ASSERT_TRUE(closedFormCovers(q));
  const double closed = predictSeconds(q, p);
  // The ring 0..15 crosses 3 -> 4, 7 -> 8, 11 -> 12 and 15 -> 0 at two hops (20 us), its 12
  // other links at one (10 us): a mean of 12.5 us, plus alpha, per step.
  EXPECT_NEAR(closed, 2 * 15 * 13.5e-6, 2 * 15 * 0.5e-6);
  EXPECT_NEAR(simulatedSeconds(q, p) / closed, 1.0, 0.1);
}

}  // namespace
}  // namespace arl
