#include <cuda_runtime.h>

#include "gpu/gpu_timer.h"

namespace arl::gpu {

namespace {

// %globaltimer: a 64-bit nanosecond timer of the GPU (PTX ISA, "Special registers").
__global__ void readGlobalTimer(unsigned long long* out) {
  unsigned long long t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  *out = t;
}

}  // namespace

int enqueueGlobalTimerRead(uint64_t* deviceOut, void* stream) {
  readGlobalTimer<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<unsigned long long*>(deviceOut));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace arl::gpu
