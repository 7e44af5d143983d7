// What each rank's telemetry says it sent: the bytes of its IterationEnd events (what the rank
// sent in one timed iteration, recorded once every op of it had retired; docs/telemetry.md,
// every level but `off`) and, at `chunks`, the bytes of its SendEnd events (one per slice the
// transport was done with). These are the run's own reports, kept apart from the schedule's
// count (bytesSent(), schedule.h) so that the two can be compared.
#pragma once

#include <cstdint>
#include <map>
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
class SentTally {
 public:
  void add(const TelemetryEvent& e);
  void add(const std::vector<TelemetryEvent>& events);
  // One entry per rank 0 .. nranks - 1 (ranks without events: all 0).
  std::vector<RankSent> ranks(int nranks) const;

 private:
  std::map<int, RankSent> byRank_;
};

// SentTally over `events` (a recorded run's).
std::vector<RankSent> sentOf(const std::vector<TelemetryEvent>& events, int nranks);

}  // namespace arl
