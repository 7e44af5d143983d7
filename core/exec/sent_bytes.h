// What each rank's telemetry says it sent: the bytes of its IterationEnd events (what the rank
// sent in one timed iteration, recorded once every op of it had retired; docs/telemetry.md,
// every level but `off`) and, at `chunks`, the bytes of its SendEnd events (one per slice the
// transport was done with). These are the run's own reports, kept apart from the schedule's
// count (bytesSent(), schedule.h) so that the two can be compared.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exec/telemetry.h"

namespace arl {

struct RankSent {
  uint32_t iterations = 0;    // IterationEnd events seen (0: nothing was measured)
  uint64_t bytes = 0;         // per iteration, as they say (the largest, when they differ)
  bool varies = false;        // they did not all say the same
  uint64_t sendEnds = 0;      // SendEnd events seen, over every timed iteration
  uint64_t sendEndBytes = 0;  // their bytes, summed
  bool operator==(const RankSent&) const = default;
};

// Counts a run's events as they pass (in any order, batch by batch), keeping none of them.
// The coordinator counts every event it receives (up to about a million a second), so an
// event of a batch costs a compare of its kind and an add or two.
class SentTally {
 public:
  // For ranks 0 .. nranks - 1.
  explicit SentTally(int nranks);
  // An event of any rank; one of a rank outside the run is not counted.
  void add(const TelemetryEvent& e);
  // The events of one batch of rank `rank`, every one credited to `rank` without reading its
  // own (the protocol's decoder refuses a batch that holds another rank's event); a rank
  // outside the run: none counted.
  void add(int rank, std::span<const TelemetryEvent> events);
  // One entry per rank (ranks without events: all 0).
  const std::vector<RankSent>& ranks() const { return ranks_; }

 private:
  std::vector<RankSent> ranks_;
};

// SentTally over `events` (a recorded run's).
std::vector<RankSent> sentOf(const std::vector<TelemetryEvent>& events, int nranks);

}  // namespace arl
