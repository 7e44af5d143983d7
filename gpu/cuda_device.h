// CUDA devices as the lab sees them: which exist, and the error a failing runtime call
// becomes. No CUDA header needed.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace arl::gpu {

// A CUDA runtime call that failed: what() names the call, the runtime's text and its code,
// e.g. "cudaMalloc(1073741824 bytes): out of memory (cudaErrorMemoryAllocation, 2)".
struct CudaError : std::runtime_error {
  CudaError(const std::string& call, int code);
  int code;
};

// The device a backend uses for --device `device`: -1 (none given) means device 0.
int resolveDevice(int device);

// nullopt when CUDA device `device` (-1: device 0) exists and can be used by `sharers`
// processes at once; otherwise the one-line reason, naming the backend and the device, e.g.
// "backend 'cuda': no CUDA device (cudaGetDeviceCount: CUDA driver version is insufficient
// for CUDA runtime version (cudaErrorInsufficientDriver, 35))",
// "backend 'cuda': device 3 does not exist (this host has 1: 0..0)", or a device in compute
// mode Exclusive Process that several processes would share while no MPS daemon runs.
// `backend` names the backend that wants the device. Makes no CUDA context.
std::optional<std::string> cudaDeviceProblem(int device, std::string_view backend = "cuda",
                                             int sharers = 1);

// For the process that is about to use `device` itself: in compute mode Exclusive Process,
// makes this process's context there, and says so when another process already holds the
// device (the driver refuses a second context: cudaErrorDevicesUnavailable). nullopt in any
// other mode, without touching the device.
std::optional<std::string> claimExclusiveDevice(int device, std::string_view backend = "cuda");

// Whether an MPS control daemon runs for this user: its control pipe exists in
// CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps). With MPS, the processes of several
// workers share the GPU's time instead of taking turns (time slices between contexts).
bool mpsRunning();

// "NVIDIA H200 (sm_90, 139.8 GiB)" for a device that exists; throws CudaError otherwise.
std::string describeDevice(int device);

}  // namespace arl::gpu
