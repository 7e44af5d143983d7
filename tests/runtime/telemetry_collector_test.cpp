// TelemetryCollector (runtime/coordinator.h): the ranks' batches in, as they arrive, one vector
// sorted by time out, each rank's events in their own order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "base/errors.h"
#include "runtime/telemetry_collector.h"

namespace arl {
namespace {

TelemetryEvent at(int rank, int64_t t, uint32_t seq) {
  TelemetryEvent e;
  e.runId = 1;
  e.rank = rank;
  e.tNs = t;
  e.chunk = seq;  // the event's place in its rank's stream
  return e;
}

// What take() promises: sorted by time, equal times in rank order, and each rank's events
// in the order they were added.
std::vector<TelemetryEvent> expected(std::vector<std::vector<TelemetryEvent>> perRank) {
  std::vector<TelemetryEvent> all;
  for (auto& r : perRank) {
    std::stable_sort(r.begin(), r.end(), [](const TelemetryEvent& a, const TelemetryEvent& b) {
      return a.tNs < b.tNs;
    });
    all.insert(all.end(), r.begin(), r.end());
  }
  std::stable_sort(all.begin(), all.end(), [](const TelemetryEvent& a, const TelemetryEvent& b) {
    return a.tNs != b.tNs ? a.tNs < b.tNs : a.rank < b.rank;
  });
  return all;
}

TEST(TelemetryCollector, MergesTheRanksStreamsByTime) {
  std::mt19937_64 rng(7);
  constexpr int kRanks = 5;
  std::vector<std::vector<TelemetryEvent>> perRank(kRanks);
  std::vector<std::vector<TelemetryBatchEvent>> batches(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    int64_t t = static_cast<int64_t>(rng() % 100);
    uint32_t seq = 0;
    // Batches of varying sizes (some empty); times that repeat within and across ranks.
    for (int b = 0; b < 20; ++b) {
      TelemetryBatchEvent batch{1, r, {}};
      const size_t n = rng() % 50;
      for (size_t i = 0; i < n; ++i) {
        t += static_cast<int64_t>(rng() % 3);
        batch.events.push_back(at(r, t, seq++));
      }
      perRank[static_cast<size_t>(r)].insert(perRank[static_cast<size_t>(r)].end(),
                                             batch.events.begin(), batch.events.end());
      batches[static_cast<size_t>(r)].push_back(std::move(batch));
    }
  }
  // The ranks' batches interleave as they arrive, each rank's in its own order.
  std::vector<TelemetryBatchEvent> arrivals;
  std::vector<size_t> next(kRanks, 0);
  while (arrivals.size() < kRanks * 20u) {
    const auto r = static_cast<size_t>(rng() % kRanks);
    if (next[r] < batches[r].size()) arrivals.push_back(std::move(batches[r][next[r]++]));
  }
  TelemetryCollector c;
  size_t total = 0;
  for (auto& b : arrivals) {
    total += b.events.size();
    c.add(b);
  }
  EXPECT_EQ(c.size(), total);
  const std::vector<TelemetryEvent> got = c.take();
  const std::vector<TelemetryEvent> want = expected(perRank);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i] == want[i]) << "position " << i << ": rank " << got[i].rank << " t "
                                   << got[i].tNs << " #" << got[i].chunk << ", expected rank "
                                   << want[i].rank << " t " << want[i].tNs << " #" << want[i].chunk;
  }
  EXPECT_EQ(c.size(), 0u);
  EXPECT_TRUE(c.take().empty());
}

TEST(TelemetryCollector, EqualTimesKeepRankOrderAndEachRanksOwnOrder) {
  TelemetryCollector c;
  c.add(2, {at(2, 10, 0), at(2, 10, 1)});
  c.add(0, {at(0, 10, 0), at(0, 20, 1)});
  c.add(2, {at(2, 10, 2), at(2, 30, 3)});
  c.add(1, {at(1, 5, 0)});
  const auto got = c.take();
  const std::vector<std::pair<int, uint32_t>> order = {{1, 0}, {0, 0}, {2, 0}, {2, 1},
                                                       {2, 2}, {0, 1}, {2, 3}};
  ASSERT_EQ(got.size(), order.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].rank, order[i].first) << "position " << i;
    EXPECT_EQ(got[i].chunk, order[i].second) << "position " << i;
  }
}

TEST(TelemetryCollector, SortsARankWhoseEventsAreOutOfOrder) {
  // Not what a worker sends, but a client may add events of its own: still sorted, stably.
  TelemetryCollector c;
  c.add(0, {at(0, 30, 0), at(0, 10, 1)});
  c.add(0, {at(0, 10, 2), at(0, 5, 3)});
  c.add(1, {at(1, 7, 0), at(1, 40, 1)});
  const auto got = c.take();
  std::vector<int64_t> times;
  for (const auto& e : got) times.push_back(e.tNs);
  EXPECT_EQ(times, (std::vector<int64_t>{5, 7, 10, 10, 30, 40}));
  EXPECT_EQ(got[2].chunk, 1u);  // equal times of one rank keep their order
  EXPECT_EQ(got[3].chunk, 2u);
}

TEST(TelemetryCollector, RefusesARankOutOfRange) {
  TelemetryCollector c;
  EXPECT_THROW(c.add(-1, {at(0, 1, 0)}), EnforceError);
  EXPECT_THROW(c.add(64, {at(0, 1, 0)}), EnforceError);
  c.add(63, {});
  EXPECT_TRUE(c.take().empty());
}

TEST(TelemetryCollector, SortByTimeIsStable) {
  std::vector<TelemetryEvent> v = {at(3, 20, 0), at(1, 10, 1), at(0, 20, 2), at(2, 10, 3)};
  sortByTime(v);
  std::vector<uint32_t> seqs;
  for (const auto& e : v) seqs.push_back(e.chunk);
  EXPECT_EQ(seqs, (std::vector<uint32_t>{1, 3, 0, 2}));
}

}  // namespace
}  // namespace arl
