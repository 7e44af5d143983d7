// A single-producer single-consumer ring of packed telemetry records
// (exec/telemetry_record.h): the sink a worker's rank records into. record() is the rank's
// hot path: the record's stores into preallocated memory and one release store; no
// allocation, no lock, no system call, no wake-up of another thread. When the consumer has
// fallen `capacity` records behind, record() counts the event as dropped instead (telemetry
// never blocks a run). The consumer (the worker's control thread) reads the records where
// they lie and gives their room back.
//
// Positions count records since reset(): written() is where the producer is, read() where
// the consumer is; the records in [read(), written()) are readable.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "exec/telemetry.h"

namespace arl {

class TelemetryRing final : public TelemetrySink {
 public:
  // Room for `capacity` records, a power of two >= 1 (ARL_ENFORCE). The memory is mapped
  // (on transparent huge pages when it fills one and the kernel has them) and populated here,
  // so that record() never takes a page fault; throws std::system_error when it cannot be
  // mapped.
  explicit TelemetryRing(size_t capacity);
  ~TelemetryRing() override;
  TelemetryRing(const TelemetryRing&) = delete;
  TelemetryRing& operator=(const TelemetryRing&) = delete;

  size_t capacity() const noexcept { return mask_ + 1; }

  // Producer only.
  void record(const TelemetryEvent& e) noexcept override;

  // Any thread. written() is an acquire: records before it are complete for the reader.
  uint64_t written() const noexcept { return tail_.load(std::memory_order_acquire); }
  uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

  // Records [read(), upTo) in place, in at most two pieces (the second when they wrap).
  struct View {
    std::span<const uint8_t> first;
    std::span<const uint8_t> second;
    size_t records() const noexcept;
  };
  // Consumer only. `upTo` is clamped to [read(), written()].
  uint64_t read() const noexcept { return head_.load(std::memory_order_relaxed); }
  View peek(uint64_t upTo) const noexcept;
  // Consumer only: the records before `upTo` are no longer needed (clamped as in peek).
  void release(uint64_t upTo) noexcept;

  // Neither thread may be using the ring: empties it and zeroes the drop count.
  void reset() noexcept;

 private:
  uint64_t clamp(uint64_t upTo) const noexcept;

  const size_t mask_;
  size_t bytes_ = 0;
  uint8_t* buf_ = nullptr;
  // The producer's and the consumer's positions on cache lines of their own, so that a
  // record does not bounce the consumer's line; the producer reads head_ only when its copy
  // (headSeen_) says the ring is full.
  alignas(64) std::atomic<uint64_t> tail_{0};
  uint64_t headSeen_ = 0;  // producer only
  std::atomic<uint64_t> dropped_{0};
  alignas(64) std::atomic<uint64_t> head_{0};
};

}  // namespace arl
