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

}  // namespace arl
