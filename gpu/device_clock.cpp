#include "gpu/device_clock.h"

#include <cmath>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "gpu/cuda_check.h"

namespace arl::gpu {

DeviceClock::DeviceClock() {
  ARL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  ARL_CUDA_CHECK(cudaEventCreate(&anchor_));
  ARL_CUDA_CHECK(cudaEventCreate(&probe_));
  // The anchor is device time 0 of this clock's scale.
  ARL_CUDA_CHECK(cudaEventRecord(anchor_, stream_));
  ARL_CUDA_CHECK(cudaEventSynchronize(anchor_));
  anchorHostNs_ = steadyNowNs();
  pair();
}

DeviceClock::~DeviceClock() {
  (void)cudaStreamSynchronize(stream_);
  (void)cudaEventDestroy(probe_);
  (void)cudaEventDestroy(anchor_);
  (void)cudaStreamDestroy(stream_);
}

int64_t DeviceClock::deviceNs(cudaEvent_t event) const {
  float ms = 0;
  ARL_CUDA_CHECK(cudaEventElapsedTime(&ms, anchor_, event));
  return anchorNs_ + std::llround(static_cast<double>(ms) * 1e6);
}

ClockPair DeviceClock::tryOnce() {
  const int64_t before = steadyNowNs();
  ARL_CUDA_CHECK(cudaEventRecord(probe_, stream_));
  cudaError_t rc = cudaErrorNotReady;
  while ((rc = cudaEventQuery(probe_)) == cudaErrorNotReady) {
  }
  const int64_t after = steadyNowNs();
  detail::check(rc, "cudaEventQuery");
  return {deviceNs(probe_), before + (after - before) / 2, (after - before) / 2};
}

void DeviceClock::pair() {
  ClockPair best = tryOnce();
  for (int i = 0; i < 2; ++i) {
    const ClockPair p = tryOnce();
    if (p.halfWidthNs < best.halfWidthNs) best = p;
  }
  lastPairHostNs_ = steadyNowNs();
  pairs_.push_back(best);
  if (pairs_.size() > kPairs) pairs_.pop_front();
  fit_ = fitClock(std::vector<ClockPair>(pairs_.begin(), pairs_.end()));
  // Move the anchor: the probe (just completed, at a known device time) becomes it.
  if (lastPairHostNs_ - anchorHostNs_ > kReanchorNs) {
    const int64_t probeNs = deviceNs(probe_);
    std::swap(anchor_, probe_);
    anchorNs_ = probeNs;
    anchorHostNs_ = lastPairHostNs_;
  }
}

void DeviceClock::maybePair() {
  if (steadyNowNs() - lastPairHostNs_ >= kPairEveryNs) pair();
}

}  // namespace arl::gpu
