#include "style/units.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/shaping.h"

namespace arl::ui {

std::string plainNumber(double v, double step) {
  int decimals = 0;
  if (step > 0 && std::isfinite(step)) {
    // The fewest decimals that write every multiple of `step` exactly (2.5 needs one).
    while (decimals < 15) {
      const double scaled = step * std::pow(10.0, decimals);
      if (std::abs(scaled - std::round(scaled)) < 1e-6 * scaled) break;
      ++decimals;
    }
  }
  char buf[400];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string out = buf;
  if (out.find('.') != std::string::npos) {  // 1.0 reads 1, as %g wrote it
    out.erase(out.find_last_not_of('0') + 1);
    if (out.back() == '.') out.pop_back();
  }
  if (out == "-0") return "0";
  return out;
}

TimeUnit timeUnitFor(double us) {
  const double a = std::abs(us);
  if (a < 1e3) return {"\u00B5s", 1};
  if (a < 1e6) return {"ms", 1e3};
  return {"s", 1e6};
}

std::string timeLabel(double us) {
  if (!std::isfinite(us)) return kNoValue;
  const TimeUnit unit = timeUnitFor(us);
  const double v = us / unit.us;
  if (v == 0) return "0";
  // Three significant digits, trailing zeros dropped: 1, 2.5, 0.125, 1000.
  const int decimals = std::clamp(2 - static_cast<int>(std::floor(std::log10(std::abs(v)))), 0, 9);
  return plainNumber(v, std::pow(10.0, -decimals)) + " " + unit.name;
}

std::string rateLabel(double bytesPerSecond) {
  if (!std::isfinite(bytesPerSecond) || bytesPerSecond <= 0) return kNoValue;
  return describeRate(bytesPerSecond);
}

}  // namespace arl::ui
