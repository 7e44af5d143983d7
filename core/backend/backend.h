// Backend: owns buffer memory and performs copies and reductions on it. Memory may be device
// memory the host cannot read; operations may be asynchronous and complete later, observed
// through tickets.
//
// Ordering contract. Every operation sees backend memory as if all operations had run one at
// a time in the order they were issued: one that reads or writes bytes an earlier one writes
// (or writes bytes an earlier one reads) runs after it. Operations on disjoint memory may run
// concurrently and complete in any order (the CUDA backend spreads them over several streams),
// so a ticket says that its own operation has completed, and nothing of other tickets. The
// executor relies on exactly this (exec/executor.cpp) and checks what it can.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "base/types.h"

namespace arl {

class PeerMemory;

enum class MemoryKind : uint8_t { Host, Device };

class Backend {
 public:
  using Ticket = uint64_t;  // completion token of an asynchronous operation

  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual MemoryKind memoryKind() const = 0;

  virtual void* allocate(size_t bytes) = 0;
  // allocate() for a caller that may give up: returns nullptr, holding nothing, once `cancel`
  // (when not null) is true. A backend whose allocation takes long (the CPU backend touches
  // every page: page faults, up to a second per 256 MiB on a loaded machine) looks at it
  // while it works; this default looks once, before allocating.
  virtual void* allocateUnlessCancelled(size_t bytes, const std::atomic<bool>* cancel) {
    if (cancel != nullptr && cancel->load()) return nullptr;
    return allocate(bytes);
  }
  virtual void deallocate(void* p) = 0;
  // Synchronous transfers between host memory and backend memory.
  virtual void upload(void* dst, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* src, size_t bytes) = 0;

  // dst = local (op) payload, `count` elements. `payload` is host memory received from a
  // peer and must stay valid until the ticket completes; `local` and `dst` are backend
  // memory and may alias each other.
  virtual Ticket reduceFromHost(void* dst, const void* local, const void* payload, size_t count,
                                DataType t, RedOp op) = 0;
  // dst = payload (host memory received from a peer).
  virtual Ticket copyFromHost(void* dst, const void* payload, size_t bytes) = 0;
  // dst = src, both backend memory.
  virtual Ticket copy(void* dst, const void* src, size_t bytes) = 0;
  // Makes `bytes` at backend memory `src` readable by the host for sending. *hostView is
  // valid once the ticket completes and until releaseStaged(*hostView) is called. A host
  // backend returns `src` itself (zero copy).
  virtual Ticket stageOut(const void* src, size_t bytes, const void** hostView) = 0;
  virtual void releaseStaged(const void* hostView) = 0;
  // Completes a reduction whose operator needs a final pass (Avg divides by nranks).
  virtual Ticket finalize(void* dst, size_t count, DataType t, RedOp op, int nranks) = 0;

  // Memory that a process on this host may read in place (backend/peer_memory.h); null
  // when this backend has none (the default).
  virtual PeerMemory* peerMemory() { return nullptr; }

  // Has ticket t's operation completed? Never blocks.
  virtual bool done(Ticket t) = 0;
  // Blocks until ticket t's operation has completed.
  virtual void wait(Ticket t) = 0;
  // Blocks until every operation issued has completed.
  virtual void synchronize() = 0;

  // For a completed ticket: when its operation ended, measured by the device's own clock and
  // mapped to the host's steady clock (steadyNowNs(), base/clock.h). nullopt when this backend
  // does not time its operations on a device (the caller then times what it observes on the
  // host), or no longer knows that ticket's time.
  virtual std::optional<int64_t> deviceEndNs(Ticket t) {
    (void)t;
    return std::nullopt;
  }
};

}  // namespace arl
