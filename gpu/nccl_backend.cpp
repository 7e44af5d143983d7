#include "gpu/nccl_backend.h"

#include <cuda_runtime_api.h>

#include "base/errors.h"

namespace arl::gpu {

namespace {

[[noreturn]] void refuseOp(const char* what) {
  throw ConfigError(std::string("backend 'nccl' runs NCCL's own collectives only; ") + what +
                    " belongs to the lab's executor (use --backend cuda for the lab's algorithms)");
}

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw ConfigError(what + ": " + cudaErrorText(e));
}

}  // namespace

std::string cudaErrorText(int error) {
  const auto e = static_cast<cudaError_t>(error);
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

void* NcclBackend::allocate(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
  return p;
}

void NcclBackend::deallocate(void* p) {
  // Freeing cannot usefully fail here: a failure means the context is already gone.
  (void)cudaFree(p);
}

void NcclBackend::upload(void* dst, const void* host, size_t bytes) {
  check(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice),
        "cudaMemcpy of " + std::to_string(bytes) + " bytes to the device");
}

void NcclBackend::download(void* host, const void* src, size_t bytes) {
  check(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost),
        "cudaMemcpy of " + std::to_string(bytes) + " bytes from the device");
}

Backend::Ticket NcclBackend::reduceFromHost(void*, const void*, const void*, size_t, DataType,
                                            RedOp) {
  refuseOp("reduceFromHost");
}
Backend::Ticket NcclBackend::copyFromHost(void*, const void*, size_t) { refuseOp("copyFromHost"); }
Backend::Ticket NcclBackend::copy(void*, const void*, size_t) { refuseOp("copy"); }
Backend::Ticket NcclBackend::stageOut(const void*, size_t, const void**) { refuseOp("stageOut"); }
Backend::Ticket NcclBackend::finalize(void*, size_t, DataType, RedOp, int) { refuseOp("finalize"); }

std::optional<std::string> ncclDeviceProblem(int device) {
  int n = 0;
  // Without a driver this returns cudaErrorInsufficientDriver (35) and leaves n alone.
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return "no CUDA device: cudaGetDeviceCount: " + cudaErrorText(e);
  if (n <= 0) return std::string("no CUDA device on this machine");
  if (device >= n) {
    return "device " + std::to_string(device) + " does not exist: this machine has " +
           std::to_string(n) + " CUDA device" + (n == 1 ? "" : "s") + " (0.." +
           std::to_string(n - 1) + ")";
  }
  return std::nullopt;
}

}  // namespace arl::gpu
