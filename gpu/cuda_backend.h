// The CUDA backend: buffers in device memory, copies and reductions on one CUDA stream per
// backend, completion observed through tickets (events recorded on that stream).
//
// - Arithmetic: the CPU backend's, bit for bit (gpu/reduce_kernels.h).
// - Host payloads (reduceFromHost, copyFromHost) that the device cannot address are first
//   copied by the calling thread into a pinned, mapped staging buffer; the kernel then reads
//   that buffer in place (reduce) or the copy engine moves it (copy). A payload already
//   addressable by the device (pinned or registered host memory, device memory) is used
//   directly. Either way the payload may be reused as soon as the call returns.
// - stageOut copies device bytes into a pinned buffer (device to host, on the stream), which
//   the caller owns until releaseStaged().
// - upload, download, allocate and deallocate are synchronous.
// - peerMemory(): other processes of this host read its allocations in place (CUDA IPC); a
//   payload in a peer's memory (reduceFromHost, copyFromHost) is device memory, read in place.
// Every method may be called from any thread; operations are ordered as issued. No CUDA
// header is needed to use this class.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "backend/backend.h"

struct CUstream_st;

namespace arl::gpu {

class CudaBackend final : public Backend {
 public:
  // Uses CUDA device `device` (-1: device 0). Throws ConfigError, naming the device, when it
  // does not exist or cannot be used ("backend 'cuda': no CUDA device (...)").
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  MemoryKind memoryKind() const override { return MemoryKind::Device; }
  int device() const;
  // The stream every operation of this backend runs on (cudaStream_t).
  CUstream_st* stream() const;
  // "device 0: NVIDIA H200 (sm_90, 139.8 GiB)".
  std::string describe() const;

  // Zero-filled device memory (at least 256 bytes, 256-byte aligned).
  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  void upload(void* dst, const void* host, size_t bytes) override;
  void download(void* host, const void* src, size_t bytes) override;

  // dst = local (op) payload; dst may be local itself but must not overlap it otherwise.
  Ticket reduceFromHost(void* dst, const void* local, const void* payload, size_t count, DataType t,
                        RedOp op) override;
  Ticket copyFromHost(void* dst, const void* payload, size_t bytes) override;
  // dst == src copies nothing; partially overlapping ranges are a bug (EnforceError).
  Ticket copy(void* dst, const void* src, size_t bytes) override;
  Ticket stageOut(const void* src, size_t bytes, const void** hostView) override;
  void releaseStaged(const void* hostView) override;
  Ticket finalize(void* dst, size_t count, DataType t, RedOp op, int nranks) override;
  // CUDA IPC of this backend's allocations and events (gpu/cuda_ipc.h), made on first use.
  PeerMemory* peerMemory() override;

  bool done(Ticket t) override;
  void wait(Ticket t) override;
  void synchronize() override;

  // Pinned staging buffers made so far (a steady run stops making them).
  size_t pinnedBuffers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace arl::gpu
