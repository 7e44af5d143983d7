#include "gpu/cuda_device.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "gpu/cuda_check.h"

namespace arl::gpu {

namespace detail {

std::string describe(cudaError_t rc) {
  return std::string(cudaGetErrorString(rc)) + " (" + cudaGetErrorName(rc) + ", " +
         std::to_string(static_cast<int>(rc)) + ")";
}

}  // namespace detail

CudaError::CudaError(const std::string& call, int c)
    : std::runtime_error(call + ": " + detail::describe(static_cast<cudaError_t>(c))), code(c) {}

int resolveDevice(int device) { return device < 0 ? 0 : device; }

std::optional<std::string> cudaDeviceProblem(int device, std::string_view backend, int sharers) {
  const std::string who = "backend '" + std::string(backend) + "'";
  int count = 0;
  // Without a driver the count is left untouched and error 35 returned: check the code.
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    return who + ": no CUDA device (cudaGetDeviceCount: " + detail::describe(rc) + ")";
  }
  if (count <= 0) return who + ": no CUDA device (cudaGetDeviceCount: 0)";
  const int d = resolveDevice(device);
  if (d >= count) {
    return who + ": device " + std::to_string(d) + " does not exist (this host has " +
           std::to_string(count) + ": 0.." + std::to_string(count - 1) + ")";
  }
  cudaDeviceProp prop{};
  const cudaError_t prc = cudaGetDeviceProperties(&prop, d);
  if (prc != cudaSuccess) {
    return who + ": device " + std::to_string(d) +
           " cannot be used (cudaGetDeviceProperties: " + detail::describe(prc) + ")";
  }
  int mode = cudaComputeModeDefault;
  (void)cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, d);
  if (mode == cudaComputeModeProhibited) {
    return who + ": device " + std::to_string(d) + " (" + prop.name +
           ") is in compute mode Prohibited";
  }
  if (mode == cudaComputeModeExclusiveProcess && sharers > 1 && !mpsRunning()) {
    return who + ": device " + std::to_string(d) + " (" + prop.name +
           ") is in compute mode Exclusive Process, which lets one process use it, and " +
           std::to_string(sharers) + " local workers would share it: give each worker a device " +
           "of its own (--device 0,1,...), start MPS (nvidia-cuda-mps-control -d) or set the " +
           "mode to Default (nvidia-smi -c DEFAULT)";
  }
  return std::nullopt;
}

std::optional<std::string> claimExclusiveDevice(int device, std::string_view backend) {
  const int d = resolveDevice(device);
  int mode = cudaComputeModeDefault;
  if (cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, d) != cudaSuccess ||
      mode != cudaComputeModeExclusiveProcess) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  // Since CUDA 12 cudaSetDevice makes the primary context; cudaFree(nullptr) makes sure.
  cudaError_t rc = cudaSetDevice(d);
  if (rc == cudaSuccess) rc = cudaFree(nullptr);
  if (rc == cudaSuccess) return std::nullopt;
  (void)cudaGetLastError();
  return "backend '" + std::string(backend) + "': device " + std::to_string(d) +
         " is in compute mode Exclusive Process and another process holds it (" +
         detail::describe(rc) + "): give each worker a device of its own, start MPS " +
         "(nvidia-cuda-mps-control -d) or set the mode to Default (nvidia-smi -c DEFAULT)";
}

bool mpsRunning() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");  // NOLINT(concurrency-mt-unsafe)
  const std::string pipe =
      std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp/nvidia-mps") + "/control";
  return ::access(pipe.c_str(), F_OK) == 0;
}

std::string describeDevice(int device) {
  cudaDeviceProp prop{};
  ARL_CUDA_CHECK(cudaGetDeviceProperties(&prop, resolveDevice(device)));
  char mem[32];
  std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(prop.totalGlobalMem) / (1 << 30));
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + mem + ")";
}

}  // namespace arl::gpu
