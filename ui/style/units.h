// How every view of the window writes a time and a rate: one formatter each, so that the
// explanation, the lessons and the charts print the same quantity alike. No Qt, so that the
// charts' plain data (chart_data.h) use them too.
#pragma once

#include <string>

namespace arl::ui {

// What a view shows where a figure has no value.
inline constexpr const char* kNoValue = "\u2013";

// `v` with the decimals that `step` needs and never an exponent: "0", "2.5", "0.25", "12000".
std::string plainNumber(double v, double step);

// The unit a time of `us` microseconds (or an axis over [0, us]) reads in: µs below 1 ms,
// ms below 1 s, s from there on. timeLabel and the charts' time axes both take it, so that a
// bar labelled "6.46 ms" stands on an axis in ms.
struct TimeUnit {
  std::string name;  // "µs", "ms", "s"
  double us = 1;     // microseconds in one unit
};
TimeUnit timeUnitFor(double us);

// A time in microseconds in the unit its own size calls for, three significant digits at most
// and never an exponent: "250 µs", "2.5 ms", "1.5 s"; "0" for zero; kNoValue when not finite.
std::string timeLabel(double us);

// A rate in bytes per second as core's describeRate() writes it (GB = 10⁹ B, as nccl-tests
// counts): "1.25 GB/s", "50 MB/s"; kNoValue when not finite or not positive.
std::string rateLabel(double bytesPerSecond);

}  // namespace arl::ui
