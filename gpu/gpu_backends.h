// What the GPU library adds to the backend registry (backend/registry.h). Programs that link
// arl_gpu (they see ARL_HAVE_GPU=1) call registerGpuBackends() once at start-up, before
// parsing a backend name.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace arl::gpu {

// Registers `cuda`: its backends use CUDA device `device` (-1: device 0). Also registers the
// device check of `cuda` and `nccl` (gpuBackendProblem), which core's localDevicesProblem()
// asks for the window and bench: neither of them includes a header of gpu/.
void registerGpuBackends(int device);

// nullopt when backend `name` (cuda, nccl) can run here on device `device` (-1: device 0) for
// `sharers` processes at once, or when it is not a GPU backend; else the one-line reason,
// e.g. "backend 'cuda': no CUDA device (cudaGetDeviceCount: ...)", or for nccl, first, why
// no NCCL the backend can use was found (absent, or lacking a function the backend calls:
// ncclLoadProblem, gpu/nccl_loader.h). The worker asks the same (gpuWorkerProblem), so bench
// and the window refuse before starting a worker whatever a worker would refuse. For checks
// before a run starts; makes no CUDA context.
std::optional<std::string> gpuBackendProblem(std::string_view name, int device, int sharers = 1);

// What a worker asks at start, for the device it will use itself: gpuBackendProblem(), then,
// in compute mode Exclusive Process, whether another process holds the device (this one then
// holds it: claimExclusiveDevice in gpu/cuda_device.h).
std::optional<std::string> gpuWorkerProblem(std::string_view name, int device);

}  // namespace arl::gpu
