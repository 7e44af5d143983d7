// ARL_CUDA_CHECK: throws CudaError naming the call when a CUDA runtime call fails. Private to
// gpu/ (it includes the runtime's header).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "gpu/cuda_device.h"

namespace arl::gpu::detail {

inline void check(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess) throw CudaError(call, static_cast<int>(rc));
}

// The runtime's description of `rc`: "out of memory (cudaErrorMemoryAllocation, 2)".
std::string describe(cudaError_t rc);

}  // namespace arl::gpu::detail

#define ARL_CUDA_CHECK(call) ::arl::gpu::detail::check((call), #call)
