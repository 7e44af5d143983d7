// The lab's one clock for durations, deadlines and telemetry timestamps: steady_clock, never
// wall time, so nothing jumps when the system clock is set. A worker's timestamps are mapped
// to the coordinator's clock with the offset of the ping exchange (runtime/protocol.h).
#pragma once

#include <chrono>
#include <cstdint>

namespace arl {

using SteadyClock = std::chrono::steady_clock;

// Nanoseconds since the steady clock's epoch (an arbitrary point, fixed for the machine's uptime).
inline int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

// A wait with no deadline of its own: it ends with its event, an abort, or the peer's end.
// Runs have one deadline, for no progress anywhere (exec/progress.h), not one per wait.
inline constexpr std::chrono::milliseconds kNoTimeout = std::chrono::milliseconds::max();

// now + timeout, saturated: kNoTimeout (or any timeout past the clock's range) gives the
// clock's last time point instead of overflowing.
inline SteadyClock::time_point deadlineAfter(std::chrono::milliseconds timeout) {
  const auto now = SteadyClock::now();
  const auto left = SteadyClock::time_point::max() - now;
  if (timeout >= std::chrono::duration_cast<std::chrono::milliseconds>(left)) {
    return SteadyClock::time_point::max();
  }
  return now + timeout;
}

}  // namespace arl
