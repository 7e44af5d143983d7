// CUDA IPC for the cuda backend (backend/peer_memory.h): handles of its allocations and of
// interprocess events, and the peers' allocations and events this process has opened.
//
// - lend: copies the slice (cudaMemcpyAsync, device to device, on the backend's stream) into a
//   buffer of a pool of its own (cudaMalloc, sizes in powers of two from 64 KiB; each with
//   its cudaIpcGetMemHandle), at the slice's own offset modulo 16 bytes (the loan's offset),
//   so that the peer's reduction, reading it beside memory of its own at that offset, keeps
//   to 16-byte vectors; lent until giveBack. A steady run allocates no new buffer: at most
//   loansPerPeer of them per peer are out at once.
// - What this process exported (the pool and its interprocess events) outlives the object: a
//   peer may hold it open until its own run ends, and CUDA leaves freeing it before then
//   undefined. The next CudaPeerMemory on the device takes it over, and frees the buffers
//   that a run since has shown no peer can still hold (gpu/ipc_pool.h has the rule); the
//   process's end frees the rest.
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
#include "gpu/ipc_pool.h"

namespace arl::gpu {

// The device's UUID as nvidia-smi prints it: "GPU-" and 32 hex digits in groups 8-4-4-4-12.
std::string deviceUuid(int device);

class CudaPeerMemory final : public PeerMemory {
 public:
  // `streams`: the backend's streams, its compute stream first. Every operation here is
  // ordered after all work issued on any of them, and all later work on any of them after it
  // (a barrier across the streams): the backend's stream plan does not see these operations,
  // so they may not overlap what it schedules on other streams.
  CudaPeerMemory(int device, std::vector<cudaStream_t> streams);
  // Closes what was opened and leaves what it exported to the next CudaPeerMemory on the
  // device (see above): the backend's streams must have been synchronised.
  ~CudaPeerMemory() override;
  CudaPeerMemory(const CudaPeerMemory&) = delete;
  CudaPeerMemory& operator=(const CudaPeerMemory&) = delete;

  std::string deviceId() const override { return uuid_; }
  std::vector<std::string> reachableDevices() const override { return reach_; }
  Loan lend(const void* p, size_t bytes) override;
  void giveBack(uint64_t id) override;
  // Buffers the pool holds (a steady run makes no new ones).
  size_t buffers() const;
  Handle recordEvent(uint32_t slot) override;
  const void* openMemory(int peer, const Handle& memory, uint64_t offset, size_t bytes) override;
  void waitEvent(int peer, uint32_t slot, const Handle& event) override;
  void closePeers() noexcept override;

 private:
  struct Local {
    cudaEvent_t event = nullptr;
    Handle handle{};
  };
  struct Opened {
    cudaEvent_t event = nullptr;
    Handle handle{};
  };
  struct Exported;
  // Calls `f` with what the CudaPeerMemory objects of `device` left behind (process-wide,
  // under a lock).
  static void withExported(int device, const std::function<void(Exported&)>& f);

  // Orders the compute stream after every other stream's work so far (mu_ held).
  void joinOthers();
  // Orders every other stream's later work after the compute stream's so far (mu_ held).
  void forkOthers();

  int device_;
  std::vector<cudaStream_t> streams_;
  cudaStream_t stream_;               // streams_.front(): where this class works
  std::vector<cudaEvent_t> barrier_;  // one per stream, made on first use (mu_ held)
  std::string uuid_;
  std::vector<std::string> reach_;
  mutable std::mutex mu_;
  IpcPool pool_;                                             // by loan id
  uint64_t run_ = 0;                                         // the ledger's tick at our start
  std::vector<Local> events_;                                // by slot
  std::map<std::pair<int, Handle>, void*> openedMemory_;     // by (peer, handle)
  std::map<std::pair<int, uint32_t>, Opened> openedEvents_;  // by (peer, slot)
};

}  // namespace arl::gpu
