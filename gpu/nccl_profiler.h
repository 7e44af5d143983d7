// NCCL's profiler plugin, inside the worker: NCCL (2.28, profiler interface version 5) finds
// the table `ncclProfiler_v5` in the program itself when NCCL_PROFILER_PLUGIN=STATIC_PLUGIN
// (gpu/nccl_profiler_abi.h says how) and calls it about its own collectives: the group, each
// collective with the algorithm and protocol it chose, each channel's kernel start and end on
// the GPU's global timer, and each network proxy step with its peer and bytes.
//
// The callbacks run on NCCL's threads (the one that issues the collective, NCCL's proxy
// thread) and never block: each writes fixed-size NcclRawEvents into one preallocated
// multi-producer queue (a bounded queue with a sequence number per cell, D. Vyukov's "Bounded
// MPMC queue", 1024cores.net) with a compare-and-swap and two stores, takes its event handles
// from preallocated pools without a lock, and counts what found no room instead of waiting.
// No allocation, lock or system call on a callback's path (init and finalize allocate and
// free a communicator's pools). The rank's run thread takes the events out (drain) between
// iterations and records them as telemetry (exec/nccl_events.h).
//
// Which collective an event belongs to: the library tells the plugin the number of the call it
// is about to issue (setCall); the group and the collective take it when NCCL starts them,
// and NCCL's proxy and kernel events take it from their parent collective. The worker waits
// for each collective before the next, so the number is the right one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "exec/nccl_events.h"
#include "exec/telemetry.h"
#include "gpu/nccl_profiler_abi.h"

namespace arl::gpu {

inline constexpr size_t kNcclProfilerQueueEvents = size_t{1} << 16;
// Per communicator: proxy ops, proxy steps and kernel channels in flight at once, and the
// collectives and groups whose handles children may still name (reused round-robin).
inline constexpr size_t kNcclProfilerHandles = 8192;
inline constexpr size_t kNcclProfilerCollSlots = 1024;

// The event mask (NCCL_PROFILE_EVENT_MASK) for a telemetry level: nothing at Off; the group,
// the collective and the kernel channels at Steps; and the proxy's ops and steps at Chunks.
int ncclProfilerMask(TelemetryLevel level);

struct NcclProfilerCounts {
  uint64_t queued = 0;    // events queued since beginRun
  uint64_t dropped = 0;   // events lost because the queue was full
  uint64_t noHandle = 0;  // events NCCL started while every handle was in use: not recorded
  uint64_t ignored = 0;   // starts of event types this plugin does not record
  uint64_t inits = 0;     // communicators that initialised the plugin since beginRun
  int nNodes = 0;         // nodes of the last of them
  int mask = 0;           // the activation mask the last init returned to NCCL
};

// Before a run's communicator is made, with no communicator alive: empties the queue, zeroes
// the counts and the call number. `elementBytes`: the size of the run's elements, for the
// bytes of a collective whose type NCCL names "Unknown" (ncclDatatypeToString has no name
// for ncclUint8).
void ncclProfilerBeginRun(size_t elementBytes);
// The number of the lab's call about to be issued in this run (0: the first warm-up call).
void ncclProfilerSetCall(uint64_t call);
// The run thread: hands every event queued so far to `f`, in queue order; returns how many.
size_t ncclProfilerDrain(const std::function<void(const NcclRawEvent&)>& f);
NcclProfilerCounts ncclProfilerCounts();
// The table NCCL calls, as exported.
const ncclprof::ProfilerV5& ncclProfilerTable();

}  // namespace arl::gpu

// Exported from the worker (ENABLE_EXPORTS) for NCCL's dlsym; defined in nccl_profiler.cpp.
extern "C" arl::gpu::ncclprof::ProfilerV5 ncclProfiler_v5;
