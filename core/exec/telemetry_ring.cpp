#include "exec/telemetry_ring.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "base/errors.h"
#include "exec/telemetry_record.h"

namespace arl {

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kHugePage = size_t{2} << 20;
#ifndef MADV_POPULATE_WRITE
constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14
#endif

// Populates [p, p + bytes): the pages are faulted in, as a write would, without changing what
// they hold, so a producer may be writing into them meanwhile.
void populate(uint8_t* p, size_t bytes) noexcept {
  if (::madvise(p, bytes, MADV_POPULATE_WRITE) != 0) {
    // A kernel before 5.14: touch each page with an atomic add of 0, which keeps a concurrent
    // write.
    for (size_t i = 0; i < bytes; i += kPage) {
      reinterpret_cast<std::atomic<uint8_t>*>(p + i)->fetch_add(0, std::memory_order_relaxed);
    }
  }
}

// Maps `bytes` (a multiple of `align`, a power of two >= kPage) of zeroed memory on an `align`
// boundary and asks for transparent huge pages. Nothing is populated. Throws
// std::system_error.
uint8_t* mapRing(size_t bytes, size_t align) {
  const size_t extra = align - kPage;
  void* raw =
      ::mmap(nullptr, bytes + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    throw std::system_error(errno, std::generic_category(),
                            "mapping a telemetry ring of " + std::to_string(bytes) + " bytes");
  }
  auto* base = static_cast<uint8_t*>(raw);
  const size_t head = (align - reinterpret_cast<uintptr_t>(raw) % align) % align;
  if (head > 0) ::munmap(base, head);
  if (extra > head) ::munmap(base + head + bytes, extra - head);
  uint8_t* ring = base + head;
  // Where the kernel has no huge pages for us, the ring lives on 4 KiB pages.
  if (align == kHugePage) (void)::madvise(ring, bytes, MADV_HUGEPAGE);
  return ring;
}

}  // namespace

TelemetryRing::TelemetryRing(size_t capacity) : mask_(capacity - 1) {
  ARL_ENFORCE(capacity >= 1 && (capacity & (capacity - 1)) == 0,
              "telemetry ring capacity " << capacity << " is not a power of two");
  // Huge pages when the ring fills one: on 4 KiB pages a rank's records walk onto a new page
  // every 85 records, and the page-table work that costs took 3-4 % of a 4 KiB run's CPU on
  // this project's (virtual) machine, ten times the records' own stores (docs/telemetry.md).
  const size_t bytes = capacity * kTelemetryRecordBytes;
  const size_t align = bytes >= kHugePage ? kHugePage : kPage;
  bytes_ = (bytes + align - 1) / align * align;
  buf_ = mapRing(bytes_, align);
  populated_ = std::min(bytes_, kPopulatedAtStart);
  populate(buf_, populated_);
}

void TelemetryRing::populateAhead() noexcept {
  if (populated_ == bytes_) return;
  // Positions count from reset() and wrap at the capacity: once the producer has gone round,
  // every byte has been reached.
  const uint64_t reached = std::min<uint64_t>(written(), capacity()) * kTelemetryRecordBytes;
  const size_t want =
      std::min(bytes_, (static_cast<size_t>(reached) + kPopulateMargin + kPopulateStep - 1) /
                           kPopulateStep * kPopulateStep);
  if (want <= populated_) return;
  populate(buf_ + populated_, want - populated_);
  populated_ = want;
}

TelemetryRing::~TelemetryRing() { ::munmap(buf_, bytes_); }

void TelemetryRing::record(const TelemetryEvent& e) noexcept {
  const uint64_t t = tail_.load(std::memory_order_relaxed);
  if (t - headSeen_ > mask_) {
    headSeen_ = head_.load(std::memory_order_acquire);
    if (t - headSeen_ > mask_) {
      dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return;
    }
  }
  packTelemetryRecord(e, buf_ + (t & mask_) * kTelemetryRecordBytes);
  tail_.store(t + 1, std::memory_order_release);
}

size_t TelemetryRing::View::records() const noexcept {
  return (first.size() + second.size()) / kTelemetryRecordBytes;
}

uint64_t TelemetryRing::clamp(uint64_t upTo) const noexcept {
  return std::clamp(upTo, read(), written());
}

TelemetryRing::View TelemetryRing::peek(uint64_t upTo) const noexcept {
  const uint64_t from = read();
  const uint64_t to = clamp(upTo);
  const size_t n = static_cast<size_t>(to - from);
  const size_t start = static_cast<size_t>(from & mask_);
  const size_t firstCount = std::min(n, capacity() - start);
  View v;
  v.first = {buf_ + start * kTelemetryRecordBytes, firstCount * kTelemetryRecordBytes};
  v.second = {buf_, (n - firstCount) * kTelemetryRecordBytes};
  return v;
}

void TelemetryRing::release(uint64_t upTo) noexcept {
  head_.store(clamp(upTo), std::memory_order_release);
}

void TelemetryRing::reset() noexcept {
  tail_.store(0, std::memory_order_relaxed);
  head_.store(0, std::memory_order_relaxed);
  headSeen_ = 0;
  dropped_.store(0, std::memory_order_relaxed);
}

}  // namespace arl
