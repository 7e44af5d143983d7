#include "gpu/gpu_backends.h"

#include <memory>

#include "backend/registry.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_device.h"
#include "gpu/nccl_loader.h"

namespace arl::gpu {

void registerGpuBackends(int device) {
  registerBackend(
      "cuda", [device] { return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(device)); });
  for (std::string_view name : {"cuda", "nccl"}) {
    registerDeviceCheck(name,
                        [name](int d, int sharers) { return gpuBackendProblem(name, d, sharers); });
  }
}

std::optional<std::string> gpuBackendProblem(std::string_view name, int device, int sharers) {
  if (name == "nccl") {
    // First: a missing NCCL is this program's setting, whatever the device.
    if (auto why = ncclLoadProblem()) return "backend 'nccl': " + *why;
  }
  if (name == "cuda" || name == "nccl") return cudaDeviceProblem(device, name, sharers);
  return std::nullopt;
}

std::optional<std::string> gpuWorkerProblem(std::string_view name, int device) {
  if (auto why = gpuBackendProblem(name, device)) return why;
  if (name == "cuda" || name == "nccl") return claimExclusiveDevice(device, name);
  return std::nullopt;
}

}  // namespace arl::gpu
