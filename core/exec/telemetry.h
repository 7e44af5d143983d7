// Telemetry: flat, small events describing every chunk movement, timestamped on the
// worker's clock (aligned to the coordinator's at join). Telemetry never fails a run: a sink
// that cannot keep up counts what it dropped.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

namespace arl {

// The lab's own events (SendStart .. IterationEnd), then NCCL's: what NCCL's profiler plugin
// reported about its own collectives (exec/nccl_events.h says what their fields hold), then a
// training step's compute spans (one event per span, at its end; fields below).
enum class EventKind : uint8_t {
  SendStart,
  SendEnd,
  RecvEnd,
  ReduceEnd,
  StepEnd,
  IterationEnd,
  NcclGroupStart,     // NCCL's group around the collective began (host)
  NcclGroupEnd,       // ... and ended (host)
  NcclColl,           // NCCL started a collective, with the algorithm and protocol it chose
  NcclKernelStart,    // one channel of NCCL's kernel started (GPU global timer)
  NcclKernelEnd,      // ... and ended
  NcclSendStepStart,  // NCCL's proxy posted a network send step to `peer`
  NcclSendStepEnd,    // ... and it completed, `bytes` sent
  NcclRecvStepStart,  // NCCL's proxy posted a network receive step from `peer`
  NcclRecvStepEnd,    // ... and it completed, `bytes` received
  ComputeForward,     // a training step's forward pass through one layer ended
  ComputeBackward,    // ... the backward pass through one layer
  ComputeOptimizer,   // ... the optimizer's update of every weight
};
inline constexpr EventKind kLastEventKind = EventKind::ComputeOptimizer;
// Whether `k` is one of NCCL's events rather than the lab's.
constexpr bool isNcclKind(EventKind k) {
  return k >= EventKind::NcclGroupStart && k <= EventKind::NcclRecvStepEnd;
}
// Whether `k` is a training step's compute span. Its fields: `iteration` the training step,
// `chunk` the layer (0 for the optimizer), `tNs` the span's end, `offset` its length in ns
// (computeSpanStartNs), `step` 0, `peer` -1, `bytes` and `provenance` 0.
constexpr bool isComputeKind(EventKind k) { return k >= EventKind::ComputeForward; }
enum class TelemetryLevel : uint8_t { Off, Steps, Chunks };
// Which clock timed an event. Host: the worker's steady clock when the executor observed it.
// Device: the device's own timer when the device finished the work (a CUDA event), mapped to
// the worker's steady clock by a fitted offset and drift (base/clock_fit.h). Either way tNs
// then reads on the coordinator's clock.
enum class ClockSource : uint8_t { Host, Device };

std::string_view toString(EventKind k);
std::string_view toString(TelemetryLevel l);
std::optional<TelemetryLevel> parseTelemetryLevel(std::string_view s);
std::string_view toString(ClockSource c);  // "host", "device"
std::optional<ClockSource> parseClockSource(std::string_view s);

struct TelemetryEvent {
  uint64_t runId = 0;
  uint32_t iteration = 0;
  int32_t rank = -1;
  uint32_t step = 0;
  EventKind kind = EventKind::SendStart;
  uint8_t phase = 0;                      // arl::Phase
  ClockSource clock = ClockSource::Host;  // what timed tNs
  int32_t peer = -1;
  uint32_t chunk = 0;
  uint64_t offset = 0;  // elements
  uint64_t bytes = 0;
  int64_t tNs = 0;          // worker clock, aligned to the coordinator's
  uint64_t provenance = 0;  // rank mask of contributions in the chunk

  bool operator==(const TelemetryEvent&) const = default;
};

// When a compute span (isComputeKind) began: its end less its length, saturated (events come
// from files).
inline int64_t computeSpanStartNs(const TelemetryEvent& e) {
  const auto len = static_cast<int64_t>(std::min<uint64_t>(e.offset, uint64_t{1} << 62));
  int64_t start = 0;
  return __builtin_sub_overflow(e.tNs, len, &start) ? INT64_MIN : start;
}

class TelemetrySink {
 public:
  virtual ~TelemetrySink() = default;
  virtual void record(const TelemetryEvent& e) noexcept = 0;
};

// Keeps up to `capacity` events and counts the rest as dropped. Thread-safe.
class BoundedSink final : public TelemetrySink {
 public:
  explicit BoundedSink(size_t capacity);
  void record(const TelemetryEvent& e) noexcept override;
  std::vector<TelemetryEvent> take();  // moves the kept events out
  uint64_t dropped() const { return dropped_.load(); }

 private:
  std::mutex mu_;
  size_t capacity_;
  std::vector<TelemetryEvent> events_;
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace arl
