// What each directed link did in a run, as a bottleneck hunt needs it: how much of the
// iterations' time the link had a message in flight (busy), how fast it moved bytes while it
// did, and, on a shaped network, that pace against the rate the link was shaped to. A link
// busy nearly all the time at its configured pace is the bottleneck; a link idle part of the
// time waits on others. Plain data from a run's telemetry, no Qt: the heat map paints it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/shaping.h"
#include "exec/telemetry.h"
#include "runtime/run_types.h"

namespace arl::ui {

struct LinkLoad {
  uint64_t bytes = 0;         // 0: the link carried nothing
  int64_t busyNs = 0;         // the union of its messages' flights (send start to receive end)
  double busy = 0;            // busyNs over the iterations' time, 0..1
  double bytesPerSecond = 0;  // bytes over busyNs: its throughput while busy
  // The rate the shaping holds the link to: the lowest of its own rate and its sender's and
  // receiver's port rates (base/shaping.h), as the data planes pace it; 0: not shaped.
  double configuredBytesPerSecond = 0;
  double pace = 0;  // bytesPerSecond over configuredBytesPerSecond; 0 when not shaped
};

struct LinkLoads {
  int nranks = 0;
  int iterations = 0;           // the iterations measured
  int64_t iterationNs = 0;      // their time, summed: each from its first event to its last
  std::vector<LinkLoad> links;  // [sender * nranks + receiver]
  // The link busy the largest share of the time (-1, -1: no link carried data), and whether
  // it stands out: busy at least kStandsOut more than the median link with traffic, so that
  // calling it the bottleneck is not reading noise into a balanced run.
  int busiestSender = -1;
  int busiestReceiver = -1;
  bool bottleneck = false;
  double medianBusy = 0;  // over the links with traffic
  static constexpr double kStandsOut = 0.15;

  const LinkLoad& at(int sender, int receiver) const {
    return links[static_cast<size_t>(sender * nranks + receiver)];
  }
  bool shaped() const;  // some link with traffic has a configured rate
};

// "97%": a share (0..1) in whole percent.
std::string percentLabel(double share);

// The loads of the links among `nranks` ranks from a run's telemetry, over the iterations in
// `iterations` (empty: every iteration in the events). A message belongs to the iteration of
// its events; an iteration's time runs from its first event to its last, over all ranks. An
// event of a rank or peer outside [0, nranks) is left out.
LinkLoads linkLoads(const std::vector<TelemetryEvent>& events, int nranks,
                    const LinkShaping& shaping, const std::vector<uint32_t>& iterations = {});

// The timed iterations a run reported (RunResult::perRank), in order.
std::vector<uint32_t> timedIterations(const RunResult& res);

}  // namespace arl::ui
