#include "gpu/cuda_device.h"

#include <cstdio>

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

std::optional<std::string> cudaDeviceProblem(int device, std::string_view backend) {
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
  return std::nullopt;
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
