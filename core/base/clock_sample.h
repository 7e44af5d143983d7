// Offsetting one machine's clock against another's from a timed exchange, as NTP does: the
// worker's Ping/Pong with the coordinator (runtime/protocol.h carries the timestamps). Beside
// clock_fit.h, which maps a device's clock onto its host's from paired readings.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace arl {

// One Ping/Pong exchange, as NTP reads it (RFC 5905, section 8): with t0 the worker's send
// time, t1 the coordinator's receive time, t2 its send time and t3 the worker's receive time,
//   offset = ((t1 - t0) + (t2 - t3)) / 2     (coordinator clock minus worker clock)
//   delay  = (t3 - t0) - (t2 - t1)           (round trip spent on the network)
// A worker timestamp t maps to the coordinator's clock as t + offset. The error of the offset
// is at most delay / 2, so the sample with the smallest delay is the one to trust.
// This is the lab's one sign convention for a clock offset, wherever one is stored or sent
// (Ready::clockOffsetNs, the coordinator's worker list, recordings' clock_offset_ns).
struct ClockSample {
  int64_t offsetNs = 0;
  int64_t delayNs = 0;
  bool operator==(const ClockSample&) const = default;
};
ClockSample clockSample(int64_t t0Ns, int64_t t1Ns, int64_t t2Ns, int64_t t3Ns);
// The sample with the smallest non-negative delay (NTP's clock filter, reduced to its core);
// nullopt when there is none (a negative delay means a timestamp is wrong).
std::optional<ClockSample> bestClockSample(std::span<const ClockSample> samples);
// The offset to use: 0 when every sample allows it (each bounds the true offset to within its
// delay / 2 of its own offset), which is what a worker sharing the coordinator's steady clock
// always sees, since then t0 <= t1 <= t2 <= t3; else the best sample's. Processes on one host
// read one clock, and a midpoint of an unevenly delayed exchange (a busy coordinator answering
// late) would shift their events against each other by up to half the delay. Steady clocks of
// two machines differ by their boot times, far more than any delay. nullopt without a sample.
std::optional<int64_t> clockOffsetNs(std::span<const ClockSample> samples);

}  // namespace arl
