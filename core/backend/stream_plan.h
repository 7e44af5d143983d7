// StreamPlan: the dependencies of asynchronous operations spread over several in-order queues
// (CUDA streams), decided from the memory each one reads and writes. Pure logic: no device,
// no clock; the CUDA backend turns its answers into cudaStreamWaitEvent calls.
//
// Each operation belongs to a lane: Compute (reduction kernels, device copies), CopyIn (host to
// device) or CopyOut (device to host). The lanes map onto 1, 2 or 3 streams. Operations on one
// stream run in issue order. An operation on stream S must wait for an earlier operation on
// another stream T when they conflict: the earlier one writes what the new one reads (read
// after write), reads what it writes (write after read), or writes what it writes. Waiting for
// the newest such operation on T covers every earlier one on T (in-order stream), so add()
// returns at most one wait per other stream. The effect is that every operation sees memory as
// if all operations had run one at a time in issue order, while operations on disjoint memory
// (successive slices) run concurrently on different streams.
//
// History is bounded: operations reported complete are forgotten, and past `maxHistory` per
// stream the oldest are dropped; a dropped operation that is not known complete is assumed
// to conflict with everything (a wait for it is always correct, at worst unnecessary).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string_view>
#include <vector>

namespace arl {

enum class Lane : uint8_t { Compute, CopyIn, CopyOut };

std::string_view toString(Lane l);

// Bytes [lo, hi) of one address space (device and pinned host memory share one under CUDA's
// unified addressing). Empty when lo == hi.
struct MemRange {
  uintptr_t lo = 0;
  uintptr_t hi = 0;

  static MemRange of(const void* p, size_t bytes) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    return {a, a + bytes};
  }
  bool overlaps(const MemRange& o) const {
    return lo < o.hi && o.lo < hi && lo < hi && o.lo < o.hi;
  }
};

class StreamPlan {
 public:
  static constexpr int kMaxStreams = 3;

  // `streams` 1: every lane on stream 0 (one in-order queue); 2: Compute on 0, both copy
  // lanes on 1; 3: Compute on 0, CopyIn on 1, CopyOut on 2. Throws ConfigError otherwise.
  explicit StreamPlan(int streams, size_t maxHistory = 256);

  int streams() const { return streams_; }
  int streamOf(Lane lane) const;

  // An earlier operation (by id) on `stream` that a new one must wait for.
  struct Wait {
    int stream = 0;
    uint64_t id = 0;
    bool operator==(const Wait&) const = default;
  };
  struct Planned {
    uint64_t id = 0;  // from 1, in issue order over all streams
    int stream = 0;
    std::vector<Wait> waits;  // at most one per other stream, by stream
  };

  // Plans the next operation on `lane` that reads `reads` and writes `writes`.
  Planned add(Lane lane, std::span<const MemRange> reads, std::span<const MemRange> writes);

  // Operation `id` on `stream` has completed, and with it every earlier one on that stream.
  void completed(int stream, uint64_t id);

  // Operations kept for conflict checks on `stream` (for tests).
  size_t held(int stream) const;

 private:
  struct Rec {
    uint64_t id = 0;
    std::vector<MemRange> reads;
    std::vector<MemRange> writes;
  };
  static bool conflicts(const Rec& earlier, std::span<const MemRange> reads,
                        std::span<const MemRange> writes);

  int streams_;
  size_t maxHistory_;
  std::vector<std::deque<Rec>> history_;  // per stream, oldest first
  std::vector<uint64_t> dropped_;         // per stream: newest id dropped unchecked (0: none)
  std::vector<uint64_t> completed_;       // per stream: newest id known complete (0: none)
  uint64_t next_ = 1;
};

}  // namespace arl
