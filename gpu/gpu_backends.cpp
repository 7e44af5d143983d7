#include "gpu/gpu_backends.h"

#include <memory>

#include "backend/registry.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_device.h"

namespace arl::gpu {

void registerGpuBackends(int device) {
  registerBackend(
      "cuda", [device] { return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(device)); });
}

std::optional<std::string> gpuBackendProblem(std::string_view name, int device) {
  if (name == "cuda" || name == "nccl") return cudaDeviceProblem(device, name);
  return std::nullopt;
}

std::optional<std::string> gpuDevicesProblem(std::string_view name,
                                             const std::vector<int>& devices) {
  if (devices.empty()) return gpuBackendProblem(name, -1);
  for (int d : devices) {
    if (auto why = gpuBackendProblem(name, d)) return why;
  }
  return std::nullopt;
}

}  // namespace arl::gpu
