#include "base/clock_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace arl {

int64_t ClockFit::toHost(int64_t deviceNs) const {
  const auto dx = static_cast<double>(deviceNs - deviceRef);
  return hostRef + (deviceNs - deviceRef) + static_cast<int64_t>(std::llround(dx * drift));
}

ClockFit fitClock(std::span<const ClockPair> pairs) {
  ClockFit f;
  if (pairs.empty()) return f;
  f.valid = true;
  // Differences from the first pair keep the sums small enough for doubles to hold exactly
  // (nanosecond clocks read 1e18 and more after days of uptime).
  const ClockPair& base = pairs.front();
  const auto n = static_cast<double>(pairs.size());
  double mx = 0, my = 0;
  for (const ClockPair& p : pairs) {
    mx += static_cast<double>(p.deviceNs - base.deviceNs);
    my += static_cast<double>(p.hostNs - base.hostNs);
  }
  mx /= n;
  my /= n;
  double sxx = 0, sxy = 0;
  for (const ClockPair& p : pairs) {
    const double x = static_cast<double>(p.deviceNs - base.deviceNs) - mx;
    const double y = static_cast<double>(p.hostNs - base.hostNs) - my;
    sxx += x * x;
    sxy += x * y;
  }
  // y - x is the offset's change; its slope on x is the drift.
  f.drift = sxx > 0 ? std::clamp(sxy / sxx - 1.0, -kMaxClockDrift, kMaxClockDrift) : 0.0;
  // The line passes through the means; its reference is the device mean, rounded.
  const double rx = std::round(mx);
  f.deviceRef = base.deviceNs + static_cast<int64_t>(rx);
  f.hostRef = base.hostNs + static_cast<int64_t>(std::llround(my + (rx - mx) * (1.0 + f.drift)));
  for (const ClockPair& p : pairs) {
    f.maxResidualNs =
        std::max<int64_t>(f.maxResidualNs, std::llabs(f.toHost(p.deviceNs) - p.hostNs));
    f.maxHalfWidthNs = std::max(f.maxHalfWidthNs, p.halfWidthNs);
  }
  return f;
}

}  // namespace arl
