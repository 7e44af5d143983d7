#include "model/crossover.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/errors.h"
#include "schedule/generators.h"

namespace arl {
namespace {

ModelParams params() {
  ModelParams p;
  p.alpha = 5e-6;
  p.beta = 4e-10;
  p.gamma = 2e-10;
  return p;
}

// The simulation's fastest time for a cell, over every algorithm it can generate.
double bestSimulated(int n, uint64_t bytes, const LinkShaping& network, std::string& who) {
  double best = 0;
  for (const std::string& a : algorithmNames()) {
    CostQuery q;
    q.algorithm = a;
    q.nranks = n;
    q.bytes = bytes;
    q.shaping = network;
    try {
      const double t = simulatedSeconds(q, params());
      if (best == 0 || t < best) {
        best = t;
        who = a;
      }
    } catch (const GenError&) {
    }
  }
  return best;
}

// The closed forms' winner is, by the simulation of its schedule, within a few percent of the
// simulation's own winner: the map's choice costs at most that much.
TEST(CrossoverMap, WinnersAgreeWithSimulationOnASample) {
  MapQuery q;
  q.ranks = {4, 8, 16};
  q.sizes = {4096, 1 << 20, 64 << 20};
  q.params = params();
  const CrossoverMap m = crossoverMap(q);
  ASSERT_EQ(m.cells.size(), 9u);
  for (const MapCell& c : m.cells) {
    ASSERT_FALSE(c.ranked.empty()) << c.nranks << " ranks, " << c.bytes;
    EXPECT_EQ(c.ranked.front().method, MapMethod::ClosedForm);
    EXPECT_GE(c.margin(), 0);
    EXPECT_TRUE(
        std::is_sorted(c.ranked.begin(), c.ranked.end(),
                       [](const MapEntry& a, const MapEntry& b) { return a.seconds < b.seconds; }));
    std::string simWinner;
    const double best = bestSimulated(c.nranks, c.bytes, {}, simWinner);
    CostQuery w;
    w.algorithm = c.ranked.front().algorithm;
    w.nranks = c.nranks;
    w.bytes = c.bytes;
    const double mapWinnerSimulated = simulatedSeconds(w, params());
    EXPECT_LE(mapWinnerSimulated, 1.10 * best)
        << c.nranks << " ranks, " << c.bytes << " bytes: the map says " << w.algorithm
        << ", the simulation " << simWinner;
  }
  // Latency-bound small messages and bandwidth-bound large ones have different winners.
  EXPECT_NE(m.at(2, 0).ranked.front().algorithm, m.at(2, 2).ranked.front().algorithm);
}

// On a topology every cell is simulated (the ring's closed form covers a shaped ring too), and
// rows the topology does not fit are left empty with a note.
TEST(CrossoverMap, TopologyCellsAreSimulatedWhereTheTopologyFits) {
  MapQuery q;
  q.ranks = {8, 16};
  q.sizes = {4096, 1 << 20};
  q.params = params();
  q.topology = parseTopology("torus:4x4@1G");
  q.hopLatencySeconds = 1e-6;
  const CrossoverMap m = crossoverMap(q);
  EXPECT_TRUE(m.at(0, 0).ranked.empty());
  ASSERT_FALSE(m.notes.empty());
  EXPECT_EQ(m.notes.front(), "8 ranks: not priced: torus:4x4 has 16 ranks, the run has 8");
  const MapCell& c = m.at(1, 1);
  ASSERT_GE(c.ranked.size(), 2u);
  for (const MapEntry& e : c.ranked) {
    if (e.algorithm != "ring") {
      EXPECT_EQ(e.method, MapMethod::Simulation) << e.algorithm;
    }
  }
  // A topology's map agrees with a direct simulation of the winner on the expanded network,
  // swing's steps taking the torus's dimensions in turn as the runs' do: there it wins.
  EXPECT_EQ(c.ranked.front().algorithm, "swing");
  CostQuery w;
  w.algorithm = c.ranked.front().algorithm;
  w.nranks = 16;
  w.bytes = 1 << 20;
  w.shaping = expandTopology(*q.topology, 16, {}, 1e-6);
  w.torusDims = {4, 4};
  EXPECT_NEAR(predictSeconds(w, params()), c.ranked.front().seconds, 1e-12);
}

TEST(CrossoverMap, RefusesAnEmptyGridOrARowUnderTwoRanks) {
  MapQuery q;
  q.sizes = {4096};
  EXPECT_THROW(crossoverMap(q), ConfigError);
  q.ranks = {1};
  try {
    crossoverMap(q);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "a map row needs 2 ranks or more, not 1");
  }
}

TEST(CrossoverMap, ShortNamesAreShort) {
  EXPECT_EQ(shortAlgorithmName("ring"), "ring");
  EXPECT_EQ(shortAlgorithmName("halving-doubling"), "hd");
  EXPECT_EQ(shortAlgorithmName("parameter-server"), "ps");
  for (const std::string& a : algorithmNames()) EXPECT_LE(shortAlgorithmName(a).size(), 5u) << a;
}

}  // namespace
}  // namespace arl
