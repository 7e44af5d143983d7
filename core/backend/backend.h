// Backend: owns buffer memory and performs copies and reductions on it. Memory may be device
// memory the host cannot read; operations may be asynchronous (ordered among themselves, like
// a CUDA stream) and complete later, observed through tickets.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
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

  virtual bool done(Ticket t) = 0;
  virtual void wait(Ticket t) = 0;
  virtual void synchronize() = 0;
};

}  // namespace arl
