// TelemetryCollector: a run's telemetry gathered from its batches and handed back in time
// order (what Coordinator::run and the sweep keep for a run's row).
#pragma once

#include <cstddef>
#include <vector>

#include "exec/telemetry.h"
#include "runtime/run_types.h"

namespace arl {

// Orders events by time, stably: for a vector whose order says nothing (a run's telemetry
// as a TelemetryCollector gathers it is better merged).
void sortByTime(std::vector<TelemetryEvent>& events);

// Gathers a run's telemetry from its TelemetryBatchEvents and hands it back sorted by time.
// A rank records its events as they happen, so each rank's batches arrive in time order:
// take() merges the ranks' streams (n log k for k ranks) instead of sorting every event.
// Events of one rank keep their order; equal times of different ranks come out in rank
// order. A rank whose events are out of time order is sorted (stably) on its own first.
class TelemetryCollector {
 public:
  // Keeps `events` of rank `rank` (0..kMaxRanks-1), after those it already has of that rank.
  void add(int rank, std::vector<TelemetryEvent>&& events);
  void add(TelemetryBatchEvent& batch) { add(batch.rank, std::move(batch.events)); }
  size_t size() const { return size_; }
  // Every event added since the last take(), sorted by time; the collector is empty after.
  std::vector<TelemetryEvent> take();

 private:
  std::vector<std::vector<std::vector<TelemetryEvent>>> batches_;  // [rank][batch]
  size_t size_ = 0;
};

}  // namespace arl
