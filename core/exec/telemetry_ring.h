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
  // (on transparent huge pages when it fills one and the kernel has them), and its first
  // kPopulatedAtStart bytes are populated here; populateAhead() populates the rest ahead of
  // the producer, so that record() takes no page fault while the consumer keeps up. Throws
  // std::system_error when the ring cannot be mapped.
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

  // Consumer only (a system call at most, never on the producer's path): populates the
  // ring's memory up to kPopulateMargin bytes beyond the producer's position, in whole huge
  // pages, so that record() does not fault. A ring populated to its end stays so. A run
  // records a few hundred to a few hundred thousand records a rank: memory it never reaches
  // is not populated, because populated memory the run does not touch is not free here
  // (docs/telemetry.md, "Populating ahead").
  void populateAhead() noexcept;
  // Bytes of the ring populated so far, and its size in bytes (rounded up to its pages).
  size_t populatedBytes() const noexcept { return populated_; }
  size_t mappedBytes() const noexcept { return bytes_; }

  // A huge page; the ring's memory is populated in such steps.
  static constexpr size_t kPopulateStep = size_t{2} << 20;
  static constexpr size_t kPopulatedAtStart = kPopulateStep;
  static constexpr size_t kPopulateMargin = size_t{1} << 20;

 private:
  uint64_t clamp(uint64_t upTo) const noexcept;

  const size_t mask_;
  size_t bytes_ = 0;
  size_t populated_ = 0;  // consumer only after construction
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
