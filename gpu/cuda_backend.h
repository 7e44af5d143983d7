// The CUDA backend: buffers in device memory; copies and reductions spread over up to three
// CUDA streams, a compute stream for kernels and device copies, a copy-in stream (host to
// device) and a copy-out stream (device to host), so that successive slices overlap: one
// slice copied in while the previous is reduced and the one before copied out. Each
// operation waits for the events of earlier ones on other streams whose memory it touches
// (StreamPlan, backend/stream_plan.h), which keeps Backend's ordering contract; its ticket is
// an event recorded after it, complete when that operation is (gpu/event_tickets.h).
//
// - Arithmetic: the CPU backend's, bit for bit (gpu/reduce_kernels.h).
// - Host payloads (reduceFromHost, copyFromHost) are moved by the copy engine, on the
//   copy-in stream, to device memory: dst itself for a copy, a device staging buffer for a
//   reduction, whose kernel (on the compute stream) waits for that copy. A payload in
//   ordinary (pageable) host memory is first copied by the calling thread into a pinned
//   staging buffer, and may be reused as soon as the call returns; one in pinned or
//   registered host memory is read where it lies, and one in device memory is read by the
//   kernel in place: those must stay valid until the ticket completes (Backend's rule).
// - stageOut copies device bytes into a pinned buffer (device to host, on the copy-out
//   stream), which the caller owns until releaseStaged().
// - upload, download, allocate and deallocate are synchronous.
// - Times: every ticket's event is timed; deviceEndNs() gives when the device finished an
//   operation, on the host's steady clock, through a fitted offset and drift
//   (gpu/device_clock.h).
// - peerMemory(): other processes of this host read its allocations in place (CUDA IPC); a
//   payload in a peer's memory (reduceFromHost, copyFromHost) is device memory, read in place.
// Every method may be called from any thread. No CUDA header is needed to use this class.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <optional>
#include <vector>

#include "backend/backend.h"
#include "backend/stream_plan.h"

struct CUstream_st;

namespace arl::gpu {

// When one operation ran, on the host's steady clock (mapped from the device's clock).
struct OpTime {
  uint64_t ticket = 0;
  Lane lane = Lane::Compute;
  int stream = 0;
  int64_t startNs = 0;
  int64_t endNs = 0;
};

// The environment variable that sets the streams of every CUDA backend a program makes: 1
// (every operation on one stream, in issue order), 2 (copies share one stream) or 3.
inline constexpr const char* kCudaStreamsEnv = "ARL_CUDA_STREAMS";
inline constexpr int kDefaultCudaStreams = 3;

// The stream count ARL_CUDA_STREAMS asks for (kDefaultCudaStreams when unset); throws
// ConfigError naming the variable and its value when it is not 1, 2 or 3.
int cudaStreamsFromEnv();

class CudaBackend final : public Backend {
 public:
  // Uses CUDA device `device` (-1: device 0) with `streams` streams (0: cudaStreamsFromEnv()).
  // Throws ConfigError, naming the device, when it does not exist or cannot be used
  // ("backend 'cuda': no CUDA device (...)"), or when streams is not 0 to 3.
  explicit CudaBackend(int device, int streams = 0);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  MemoryKind memoryKind() const override { return MemoryKind::Device; }
  int device() const;
  // The compute stream, where kernels run (cudaStream_t).
  CUstream_st* stream() const;
  int streams() const;
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
  std::optional<int64_t> deviceEndNs(Ticket t) override;

  // Pinned and device staging buffers made so far (a steady run stops making them).
  size_t pinnedBuffers() const;

  // While on, the start and end of every operation are timed too (an extra event each);
  // takeOpTimes() returns those completed since the last call.
  void recordOpTimes(bool on);
  std::vector<OpTime> takeOpTimes();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace arl::gpu
