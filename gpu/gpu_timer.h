// The GPU's global timer (PTX %globaltimer, nanoseconds), the clock NCCL's kernels stamp their
// channels' start and end with (ncclProfilerEventDescr_v5_t::kernelCh.pTimer). Read by a
// one-thread kernel, so that the host can pair it with its own clock (gpu/nccl_profiler.h,
// measureGpuClock).
#pragma once

#include <cstdint>

namespace arl::gpu {

// Enqueues on `stream` (a cudaStream_t) a kernel that stores the global timer at `deviceOut`
// (device memory). Returns the launch's cudaError_t (0: enqueued).
int enqueueGlobalTimerRead(uint64_t* deviceOut, void* stream);

}  // namespace arl::gpu
