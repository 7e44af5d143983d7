// A run's rendezvous store (exec/collective_library.h) kept on the coordinator and reached
// over the worker's control connection, so that a library such as Gloo needs no store server
// of its own. A set is a StoreSet; a get asks with StoreGet until the coordinator's
// StoreValue says the key is there, every few milliseconds, looking at the run's abort
// between asks. The coordinator keeps the run's keys, bounded (kMaxStoreKeys, kMaxStoreValueBytes),
// and drops them when the run ends. Private to core/runtime.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "exec/collective_library.h"

namespace arl {

struct RunJob;

class ControlStore final : public RendezvousStore {
 public:
  // The store of `job`'s run; the job outlives it.
  explicit ControlStore(RunJob& job) : j_(job) {}

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout,
                  const std::atomic<bool>& cancel) override;

 private:
  // One StoreGet and its answer: whether the key was found, its value in `value`. Waits at
  // most until `deadline`; throws PeerError once the run is aborted.
  bool ask(const std::string& key, std::chrono::steady_clock::time_point deadline,
           std::string& value);

  RunJob& j_;
  uint32_t seq_ = 0;
};

}  // namespace arl
