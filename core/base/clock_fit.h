// Mapping a device's clock onto the host's: from pairs of readings taken together, (device ns,
// host ns), a line host = hostRef + (device - deviceRef) x (1 + drift) fitted by least squares.
// The offset is what separates the two clocks' epochs; the drift is their rate difference
// (crystals differ by some parts per million, so 10 ppm is 10 us a second). With one pair, or
// pairs taken at one instant, the drift is 0 and the fit is the pair's offset.
//
// A pair is only as good as its window: the host reads its clock before and after asking for
// the device's reading, and pairs the midpoint, half the window either way (halfWidthNs).
// The CUDA backend keeps the tightest of several tries (gpu/device_clock.h).
#pragma once

#include <cstdint>
#include <span>

namespace arl {

struct ClockPair {
  int64_t deviceNs = 0;
  int64_t hostNs = 0;       // midpoint of the host's window around the device reading
  int64_t halfWidthNs = 0;  // half that window: how far the true instant may be from hostNs
};

struct ClockFit {
  bool valid = false;  // false: no pairs
  int64_t deviceRef = 0;
  int64_t hostRef = 0;
  double drift = 0;           // host ns per device ns, minus 1
  int64_t maxResidualNs = 0;  // largest |fitted - paired host time| over the pairs
  int64_t maxHalfWidthNs = 0;

  // The host time of device time `deviceNs`.
  int64_t toHost(int64_t deviceNs) const;
};

// Least-squares line through `pairs` (host on device). Drifts beyond +-kMaxDrift (a clock
// that runs 0.1% fast or slow is a measurement error, not a crystal) are clamped to it.
ClockFit fitClock(std::span<const ClockPair> pairs);

inline constexpr double kMaxClockDrift = 1e-3;

}  // namespace arl
