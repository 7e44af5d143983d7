// A CUDA device's clock as the host sees it. Device times are read from CUDA events with
// timing: cudaEventElapsedTime from an anchor event, in milliseconds as a float (the runtime
// documents a resolution of about 0.5 us), so each is anchorNs + elapsed. To place them on
// the host's steady clock, pair() records an event on a stream of its own and spins on
// cudaEventQuery until the device has passed it, reading steadyNowNs() before the record and
// after the query succeeds: the event's device time lies in that window, paired with its
// midpoint, plus or minus half its width (a few microseconds on an idle device; the tightest
// of three tries is kept). Offset and drift are fitted over the last kPairs pairs
// (base/clock_fit.h), taken at most every kPairEveryNs while the backend is busy. The anchor
// moves to the newest pair once it is kReanchorNs old, so that no elapsed time is long
// enough for the float's 24-bit mantissa to lose more than about a microsecond.
// Private to gpu/. Not thread-safe: its owner (EventTickets) locks.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <deque>

#include "base/clock_fit.h"

namespace arl::gpu {

class DeviceClock {
 public:
  static constexpr size_t kPairs = 16;
  static constexpr int64_t kPairEveryNs = 100'000'000;   // 100 ms
  static constexpr int64_t kReanchorNs = 8'000'000'000;  // 8 s: 8000 ms in a float, 0.5 us steps

  // On the calling thread's current device; takes the first pair.
  DeviceClock();
  ~DeviceClock();
  DeviceClock(const DeviceClock&) = delete;
  DeviceClock& operator=(const DeviceClock&) = delete;

  // Takes a pair when the last is kPairEveryNs old.
  void maybePair();
  // Takes a pair now (the tightest of three tries) and refits.
  void pair();
  // The device time, in ns on this clock's scale, of `event`: a timed event that has completed.
  int64_t deviceNs(cudaEvent_t event) const;
  // Device time `d` on the host's steady clock.
  int64_t toHost(int64_t d) const { return fit_.toHost(d); }
  const ClockFit& fit() const { return fit_; }

 private:
  ClockPair tryOnce();

  cudaStream_t stream_ = nullptr;
  cudaEvent_t anchor_ = nullptr;
  cudaEvent_t probe_ = nullptr;
  int64_t anchorNs_ = 0;  // the anchor's device time
  int64_t anchorHostNs_ = 0;
  int64_t lastPairHostNs_ = 0;
  std::deque<ClockPair> pairs_;
  ClockFit fit_;
};

}  // namespace arl::gpu
