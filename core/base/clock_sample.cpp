// The NTP offset of a ping exchange (base/clock_sample.h).
#include "base/clock_sample.h"

namespace arl {

ClockSample clockSample(int64_t t0, int64_t t1, int64_t t2, int64_t t3) {
  // Differences in wrapping arithmetic: defined for any input, exact for real timestamps.
  auto diff = [](int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  };
  const int64_t a = diff(t1, t0);
  const int64_t b = diff(t2, t3);
  // (a + b) / 2 without overflowing the sum.
  const int64_t offset = a / 2 + b / 2 + (a % 2 + b % 2) / 2;
  const int64_t delay = diff(diff(t3, t0), diff(t2, t1));
  return ClockSample{offset, delay};
}

std::optional<ClockSample> bestClockSample(std::span<const ClockSample> samples) {
  std::optional<ClockSample> best;
  for (const ClockSample& s : samples) {
    if (s.delayNs < 0) continue;
    if (!best || s.delayNs < best->delayNs) best = s;
  }
  return best;
}

std::optional<int64_t> clockOffsetNs(std::span<const ClockSample> samples) {
  const std::optional<ClockSample> best = bestClockSample(samples);
  if (!best) return std::nullopt;
  bool zeroFits = true;
  for (const ClockSample& s : samples) {
    if (s.delayNs < 0) continue;
    // |offset| <= delay / 2 (for whole nanoseconds, |offset| <= floor(delay / 2)).
    const uint64_t magnitude =
        s.offsetNs < 0 ? 0 - static_cast<uint64_t>(s.offsetNs) : static_cast<uint64_t>(s.offsetNs);
    if (magnitude > static_cast<uint64_t>(s.delayNs) / 2) zeroFits = false;
  }
  return zeroFits ? 0 : best->offsetNs;
}

}  // namespace arl
