// Staging buffers, reused across operations: page-locked, mapped host memory (between a host
// payload and the device), or device memory (where a copied-in payload waits for its
// reduction). A buffer is either free, held by a caller (acquire() .. release()), or waiting
// for the ticket after which no device work reads or writes it. Buffers are sized in powers
// of two from 64 KiB and kept until the pool is destroyed (pinning is slow: about a
// millisecond per MiB), so a steady run allocates nothing. Private to gpu/. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "gpu/event_tickets.h"

namespace arl::gpu {

class PinnedPool {
 public:
  using Ticket = EventTickets::Ticket;

  enum class Memory : uint8_t { PinnedHost, Device };

  explicit PinnedPool(EventTickets& tickets, Memory memory = Memory::PinnedHost)
      : tickets_(tickets), memory_(memory) {}
  // Frees every buffer; the stream must have been synchronised.
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // A buffer of at least `bytes`, held by the caller, 256-byte aligned. A host buffer's
  // address is valid on the device too (mapped memory under unified addressing).
  void* acquire(size_t bytes);
  // The held buffer that contains `p` is free once ticket `after` completes (0: at once).
  // A pointer into no held buffer is a bug.
  void release(const void* p, Ticket after);
  // Buffers made so far, and their bytes (for tests and reports).
  size_t buffers() const;
  size_t pinnedBytes() const;

 private:
  enum class State : uint8_t { Free, Held, Pending };
  struct Buf {
    unsigned char* p;
    size_t bytes;
    State state;
    Ticket after;
  };

  std::vector<Buf>::iterator findFree(size_t bytes);
  void* make(size_t size);

  EventTickets& tickets_;
  Memory memory_;
  mutable std::mutex mu_;
  std::vector<Buf> bufs_;
};

}  // namespace arl::gpu
