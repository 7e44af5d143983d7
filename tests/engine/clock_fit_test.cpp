// fitClock (base/clock_fit.h): a device clock mapped onto the host's from paired readings,
// checked on synthetic pairs whose offset and drift are known.
#include "base/clock_fit.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace arl {
namespace {

TEST(ClockFit, NoPairsIsNoFit) { EXPECT_FALSE(fitClock({}).valid); }

TEST(ClockFit, OnePairGivesItsOffsetAndNoDrift) {
  const std::vector<ClockPair> pairs = {{1'000'000, 5'000'000'000, 2'000}};
  const ClockFit f = fitClock(pairs);
  ASSERT_TRUE(f.valid);
  EXPECT_EQ(f.drift, 0.0);
  EXPECT_EQ(f.toHost(1'000'000), 5'000'000'000);
  EXPECT_EQ(f.toHost(1'500'000), 5'000'500'000);
  EXPECT_EQ(f.maxResidualNs, 0);
  EXPECT_EQ(f.maxHalfWidthNs, 2'000);
}

// A device clock 20 ppm fast with an epoch 3.7 hours (and a bit) after the host's, read at
// day-long uptimes: offset and drift come back, and mapping hits the host time to the ns.
TEST(ClockFit, RecoversOffsetAndDriftExactlyFromExactPairs) {
  const int64_t deviceBase = 86'400'000'000'000;  // a day of uptime
  const int64_t hostBase = deviceBase + 13'320'123'456'789;
  const double ppm = 20e-6;
  const auto hostOf = [&](int64_t d) {
    return hostBase + (d - deviceBase) -
           static_cast<int64_t>(static_cast<double>(d - deviceBase) * ppm / (1 + ppm));
  };
  std::vector<ClockPair> pairs;
  for (int i = 0; i < 8; ++i) {
    const int64_t d = deviceBase + int64_t{i} * 250'000'000;  // every 250 ms
    pairs.push_back({d, hostOf(d), 0});
  }
  const ClockFit f = fitClock(pairs);
  ASSERT_TRUE(f.valid);
  // Host runs slower than the device by 20 ppm: host ns per device ns is 1/(1+20e-6).
  EXPECT_NEAR(f.drift, 1.0 / (1.0 + ppm) - 1.0, 1e-9);
  EXPECT_LE(f.maxResidualNs, 2);
  for (int64_t d : {deviceBase, deviceBase + 1'000'000'000, deviceBase + 1'750'000'000}) {
    EXPECT_NEAR(static_cast<double>(f.toHost(d)), static_cast<double>(hostOf(d)), 2.0) << d;
  }
  // Extrapolated a second past the last pair, still within a few ns.
  const int64_t later = deviceBase + 2'750'000'000;
  EXPECT_NEAR(static_cast<double>(f.toHost(later)), static_cast<double>(hostOf(later)), 4.0);
}

TEST(ClockFit, NoisyPairsAverageOutAndTheResidualSaysHowNoisy) {
  // Offset 1 ms, no drift; each pair off by 3 us, alternating (which least squares reads as
  // a drift of under 2 ppm).
  std::vector<ClockPair> pairs;
  for (int i = 0; i < 10; ++i) {
    const int64_t d = int64_t{i} * 100'000'000;
    const int64_t noise = (i % 2 ? 3'000 : -3'000);
    pairs.push_back({d, d + 1'000'000 + noise, 4'000});
  }
  const ClockFit f = fitClock(pairs);
  EXPECT_NEAR(f.drift, 0.0, 2e-6);
  EXPECT_NEAR(static_cast<double>(f.toHost(450'000'000)), 451'000'000.0, 2.0);
  EXPECT_GE(f.maxResidualNs, 2'000);
  EXPECT_LE(f.maxResidualNs, 4'000);
  EXPECT_EQ(f.maxHalfWidthNs, 4'000);
}

TEST(ClockFit, AnImplausibleDriftIsClamped) {
  // Two pairs claiming the clocks differ by 1% in rate: a measurement error.
  const std::vector<ClockPair> pairs = {{0, 0, 0}, {1'000'000, 1'010'000, 0}};
  const ClockFit f = fitClock(pairs);
  EXPECT_DOUBLE_EQ(f.drift, kMaxClockDrift);
}

TEST(ClockFit, PairsAtOneInstantGiveTheirMeanOffset) {
  const std::vector<ClockPair> pairs = {{500, 10'500, 0}, {500, 10'700, 0}};
  const ClockFit f = fitClock(pairs);
  EXPECT_EQ(f.drift, 0.0);
  EXPECT_EQ(f.toHost(500), 10'600);
  EXPECT_EQ(f.maxResidualNs, 100);
}

}  // namespace
}  // namespace arl
