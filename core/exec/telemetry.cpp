#include "exec/telemetry.h"

namespace arl {

std::string_view toString(EventKind k) {
  switch (k) {
    case EventKind::SendStart: return "send_start";
    case EventKind::SendEnd: return "send_end";
    case EventKind::RecvEnd: return "recv_end";
    case EventKind::ReduceEnd: return "reduce_end";
    case EventKind::StepEnd: return "step_end";
    case EventKind::IterationEnd: return "iteration_end";
    case EventKind::NcclGroupStart: return "nccl_group_start";
    case EventKind::NcclGroupEnd: return "nccl_group_end";
    case EventKind::NcclColl: return "nccl_coll";
    case EventKind::NcclKernelStart: return "nccl_kernel_start";
    case EventKind::NcclKernelEnd: return "nccl_kernel_end";
    case EventKind::NcclSendStepStart: return "nccl_send_step_start";
    case EventKind::NcclSendStepEnd: return "nccl_send_step_end";
    case EventKind::NcclRecvStepStart: return "nccl_recv_step_start";
    case EventKind::NcclRecvStepEnd: return "nccl_recv_step_end";
    case EventKind::ComputeForward: return "compute_forward";
    case EventKind::ComputeBackward: return "compute_backward";
    case EventKind::ComputeOptimizer: return "compute_optimizer";
  }
  return "?";
}

std::string_view toString(TelemetryLevel l) {
  switch (l) {
    case TelemetryLevel::Off: return "off";
    case TelemetryLevel::Steps: return "steps";
    case TelemetryLevel::Chunks: return "chunks";
  }
  return "?";
}

std::optional<TelemetryLevel> parseTelemetryLevel(std::string_view s) {
  if (s == "off") return TelemetryLevel::Off;
  if (s == "steps") return TelemetryLevel::Steps;
  if (s == "chunks") return TelemetryLevel::Chunks;
  return std::nullopt;
}

std::string_view toString(ClockSource c) {
  switch (c) {
    case ClockSource::Host: return "host";
    case ClockSource::Device: return "device";
  }
  return "?";
}

std::optional<ClockSource> parseClockSource(std::string_view s) {
  if (s == "host") return ClockSource::Host;
  if (s == "device") return ClockSource::Device;
  return std::nullopt;
}

BoundedSink::BoundedSink(size_t capacity) : capacity_(capacity) {}

void BoundedSink::record(const TelemetryEvent& e) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() >= capacity_) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  try {
    events_.push_back(e);
  } catch (...) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
  }
}

std::vector<TelemetryEvent> BoundedSink::take() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TelemetryEvent> out;
  out.swap(events_);
  return out;
}

}  // namespace arl
