// NCCL's own events as the lab's telemetry. NCCL's profiler plugin (gpu/nccl_profiler.h) queues
// what NCCL reports about its collectives as NcclRawEvents; the rank's run thread turns them
// into TelemetryEvents of the Nccl* kinds (exec/telemetry.h) with toTelemetry() and records
// them like its own. Those events are NCCL's, not the lab's: no schedule, no chunk, no
// provenance. Their fields, per kind (docs/telemetry.md, "NCCL's events"):
//
//   every kind  tNs        on the coordinator's clock: the worker's steady clock when the
//                          plugin was called (group, collective, proxy steps), or the GPU's
//                          global timer mapped to it (kernel channels, NcclClockMap)
//               iteration  the timed iteration whose collective the event belongs to
//               phase      0 (NCCL's events have no phase of the lab's)
//   NcclColl    bytes      the collective's count times the element size
//               offset     the collective's count (elements)
//               provenance NcclCollInfo, packed: algorithm, protocol, channels, warps
//   NcclKernel* chunk      the channel
//   Nccl*Step*  chunk      the channel;  step: NCCL's step number on it;  peer: the remote
//                          rank;  bytes (End): what the step moved
//
// Every other field is 0 (peer -1).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "exec/telemetry.h"

namespace arl {

// NCCL's algorithms and protocols (ncclAlgoToString, ncclProtoToString in NCCL's
// src/collectives.cc), Unknown for a name this build does not know.
enum class NcclAlgo : uint8_t {
  Unknown,
  Tree,
  Ring,
  CollNetDirect,
  CollNetChain,
  Nvls,
  NvlsTree,
  Pat
};
enum class NcclProto : uint8_t { Unknown, LL, LL128, Simple };

// From NCCL's names ("RING", "SIMPLE"; case-insensitive).
NcclAlgo parseNcclAlgo(std::string_view s);
NcclProto parseNcclProto(std::string_view s);
// As NCCL_ALGO and NCCL_PROTO spell them: "Ring", "Simple", "?" for Unknown.
std::string_view toString(NcclAlgo a);
std::string_view toString(NcclProto p);

// What NCCL chose for one collective.
struct NcclCollInfo {
  NcclAlgo algo = NcclAlgo::Unknown;
  NcclProto proto = NcclProto::Unknown;
  uint8_t nChannels = 0;
  uint8_t nWarps = 0;
  bool operator==(const NcclCollInfo&) const = default;
};
uint64_t packNcclCollInfo(const NcclCollInfo& i);
// Unknown algorithms or protocols (a newer writer) read as Unknown.
NcclCollInfo unpackNcclCollInfo(uint64_t v);

// The lab's call of the collective an event belongs to: 0 for the run's first call (the first
// warm-up iteration); kNoNcclCall when NCCL gave the event no parent the plugin knew.
inline constexpr uint64_t kNoNcclCall = ~uint64_t{0};

// One event as the plugin's callbacks queue it: fixed size, written without a lock.
struct NcclRawEvent {
  EventKind kind = EventKind::NcclColl;
  bool gpuClock = false;  // ns is the GPU's global timer, not the worker's steady clock
  uint8_t channel = 0;
  NcclCollInfo info;  // NcclColl only
  int32_t peer = -1;
  uint32_t step = 0;
  uint64_t call = kNoNcclCall;
  uint64_t count = 0;  // NcclColl: elements
  uint64_t bytes = 0;
  int64_t ns = 0;
};

// GPU global timer = worker steady clock + gpuMinusHostNs, measured by reading both around a
// kernel that reads the global timer (gpu/gpu_clock.h); uncertaintyNs bounds the error.
struct NcclClockMap {
  bool known = false;
  int64_t gpuMinusHostNs = 0;
  int64_t uncertaintyNs = 0;
};

// What the run thread needs to turn a raw event into telemetry.
struct NcclEventContext {
  uint32_t warmup = 0;  // the run's first `warmup` calls are warm-up: not recorded
  // The timed calls after them; later calls (the check's further iterations, RankRunOptions::
  // check) are untimed and not recorded either.
  uint32_t timed = UINT32_MAX;
  int64_t clockOffsetNs = 0;  // coordinator clock - worker clock (ClockSample::offsetNs)
  NcclClockMap gpu;
};

// What the trace and the window say where NCCL reported kernels but no proxy steps.
inline constexpr std::string_view kNcclNoChunksNote =
    "NCCL reports no per-chunk events here: its proxy steps are network transfers, and this "
    "run had none (one node: NCCL moves the data inside its kernels, over NVLink or PCIe)";

enum class NcclEventFate : uint8_t { Recorded, Warmup, NoCall, NoGpuClock };

// The telemetry event for `raw`, or why there is none (`fate`): an untimed call's event
// (Warmup: a warm-up's, or a checked iteration's after the timed ones), one that belongs to no
// call, or a GPU time without a clock map.
std::optional<TelemetryEvent> toTelemetry(const NcclRawEvent& raw, const NcclEventContext& ctx,
                                          NcclEventFate* fate = nullptr);

}  // namespace arl
