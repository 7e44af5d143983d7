// The nccl backend: the buffers of a run of NCCL's own collectives, in device memory. It
// allocates, fills and reads back; NCCL does the moving and reducing (nccl_library.h), so
// the operations the lab's executor needs (reductions, staging) are refused: the
// coordinator never sends this backend a schedule (exec/collective_library.h, checkPlaces).
// Every operation completes before it returns (cudaMalloc, cudaMemcpy), on the device current
// on the calling thread, which the rank's NcclLibrary selected.
#pragma once

#include <optional>
#include <string>

#include "backend/backend.h"

namespace arl::gpu {

class NcclBackend final : public Backend {
 public:
  std::string_view name() const override { return "nccl"; }
  MemoryKind memoryKind() const override { return MemoryKind::Device; }

  // Throws ConfigError naming the bytes and CUDA's reason when the device has no room.
  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  void upload(void* dst, const void* host, size_t bytes) override;
  void download(void* host, const void* src, size_t bytes) override;

  // The executor's operations: refused, with ConfigError, since this backend runs no schedule.
  Ticket reduceFromHost(void*, const void*, const void*, size_t, DataType, RedOp) override;
  Ticket copyFromHost(void*, const void*, size_t) override;
  Ticket copy(void*, const void*, size_t) override;
  Ticket stageOut(const void*, size_t, const void**) override;
  void releaseStaged(const void*) override {}
  Ticket finalize(void*, size_t, DataType, RedOp, int) override;

  bool done(Ticket) override { return true; }
  void wait(Ticket) override {}
  void synchronize() override {}  // nothing is ever outstanding
};

// "cudaErrorInsufficientDriver: CUDA driver version is insufficient ..." for a CUDA error.
std::string cudaErrorText(int error);

// nullopt when `device` is a CUDA device this process can use; else one line saying why not
// ("no CUDA device: cudaGetDeviceCount: cudaErrorInsufficientDriver: ...", "device 3 does not
// exist: this machine has 1 CUDA device (0)"). Never throws, never crashes without a GPU.
std::optional<std::string> ncclDeviceProblem(int device);

}  // namespace arl::gpu
