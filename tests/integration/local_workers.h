// Shared by the integration tests: a Coordinator with local allreduce-worker children, and a
// wait for them to join.
#pragma once

#include <chrono>
#include <cstddef>
#include <thread>

#include "base/clock.h"
#include "runtime/coordinator.h"

namespace arl::test {

inline CoordinatorOptions localOptions(int n) {
  CoordinatorOptions o;
  o.localWorkers = n;
  o.workerBinary = ARL_WORKER_BINARY;
  o.joinTimeout = std::chrono::milliseconds(20000);
  return o;
}

// For tests that do not drain events: polls the published worker list.
inline bool waitForWorkers(const Coordinator& c, size_t n,
                           std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = SteadyClock::now() + timeout;
  while (c.workers().size() < n) {
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace arl::test
