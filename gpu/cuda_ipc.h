// CUDA IPC for the cuda backend (backend/peer_memory.h): handles of its allocations and of
// interprocess events, and the peers' allocations and events this process has opened.
//
// - exportMemory: cudaIpcGetMemHandle of the allocation holding the range (cached per
//   allocation; a handle names a whole cudaMalloc allocation, the range is an offset in it).
// - recordEvent: events made with cudaEventInterprocess | cudaEventDisableTiming (interprocess
//   events may not time), recorded on the backend's stream; their handles from
//   cudaIpcGetEventHandle.
// - openMemory: cudaIpcOpenMemHandle with cudaIpcMemLazyEnablePeerAccess (a peer on another
//   device of this host needs peer access), once per allocation and peer until closePeers().
// - waitEvent: cudaIpcOpenEventHandle once per slot and peer, then cudaStreamWaitEvent on the
//   backend's stream.
// Private to gpu/ (it includes the CUDA runtime's header). Thread-safe.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/peer_memory.h"

namespace arl::gpu {

// The device's UUID as nvidia-smi prints it: "GPU-" and 32 hex digits in groups 8-4-4-4-12.
std::string deviceUuid(int device);

class CudaPeerMemory final : public PeerMemory {
 public:
  // `allocationOf(p, bytes)` returns the base of the backend allocation holding
  // [p, p + bytes), or nullptr when there is none.
  CudaPeerMemory(int device, cudaStream_t stream,
                 std::function<void*(const void*, size_t)> allocationOf);
  // Closes what was opened and destroys this process's events: the backend's stream must
  // have been synchronised.
  ~CudaPeerMemory() override;
  CudaPeerMemory(const CudaPeerMemory&) = delete;
  CudaPeerMemory& operator=(const CudaPeerMemory&) = delete;

  std::string deviceId() const override { return uuid_; }
  std::vector<std::string> reachableDevices() const override { return reach_; }
  Handle exportMemory(const void* p, size_t bytes, uint64_t* offset) override;
  Handle recordEvent(uint32_t slot) override;
  const void* openMemory(int peer, const Handle& memory, uint64_t offset, size_t bytes) override;
  void waitEvent(int peer, uint32_t slot, const Handle& event) override;
  void closePeers() noexcept override;
  // The backend frees allocation `base`: its handle must not be handed out again (a new
  // allocation at the same address has a handle of its own).
  void forget(void* base);

 private:
  struct Local {
    cudaEvent_t event = nullptr;
    Handle handle{};
  };
  struct Opened {
    cudaEvent_t event = nullptr;
    Handle handle{};
  };

  int device_;
  cudaStream_t stream_;
  std::function<void*(const void*, size_t)> allocationOf_;
  std::string uuid_;
  std::vector<std::string> reach_;
  std::mutex mu_;
  std::map<void*, Handle> exported_;                         // by allocation
  std::vector<Local> events_;                                // by slot
  std::map<std::pair<int, Handle>, void*> openedMemory_;     // by (peer, handle)
  std::map<std::pair<int, uint32_t>, Opened> openedEvents_;  // by (peer, slot)
};

}  // namespace arl::gpu
