// The lab's hard limits, said once. Everything that bounds ranks, iterations or slices in
// flight (the protocol's decoder, the verifier, the data planes, the command lines) uses these.
#pragma once

#include <cstdint>

namespace arl {

// Ranks are numbered 0..kMaxRanks-1: provenance sets are 64-bit rank masks.
inline constexpr int kMaxRanks = 64;
// Timed iterations, and warm-up iterations, of one run (each).
inline constexpr uint32_t kMaxIterations = 1'000'000;
// Pipeline slices a rank may have in flight.
inline constexpr uint32_t kMaxInflight = 1024;
// A run's stall timeout (no progress anywhere for this long fails it), in milliseconds.
inline constexpr uint32_t kMaxStallTimeoutMs = 3'600'000;

}  // namespace arl
