#include "gpu/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "base/errors.h"
#include "gpu/cuda_check.h"
#include "gpu/cuda_ipc.h"
#include "gpu/event_tickets.h"
#include "gpu/pinned_pool.h"
#include "gpu/reduce_kernels.h"

namespace arl::gpu {

namespace {

constexpr size_t kMinAllocation = 256;
constexpr size_t kVecBytes = 16;  // the kernels' vector width (gpu/reduce_kernels.cu)

// The device address of `p` when a kernel or the copy engine can read it in place (device
// or managed memory, pinned or registered host memory); nullptr for ordinary host memory.
const void* deviceAddressOf(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // older runtimes fail on unregistered memory: clear it
    return nullptr;
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged: return p;
    case cudaMemoryTypeHost: return attr.devicePointer;
    default: return nullptr;
  }
}

bool overlaps(const void* a, const void* b, size_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

}  // namespace

struct CudaBackend::Impl {
  explicit Impl(int dev) : device(dev) {}

  // Makes this backend's device current on the calling thread (threads start on device 0).
  void activate() const { ARL_CUDA_CHECK(cudaSetDevice(device)); }

  // The payload as the device may read it: in place, or copied into a held pinned buffer
  // (*staged set, to be released after the operation's ticket). `align` places the copy at
  // that address's offset within 16 bytes, so that the kernel's vectors line up with it.
  const void* deviceView(const void* payload, size_t bytes, const void* align, void** staged) {
    *staged = nullptr;
    if (const void* d = deviceAddressOf(payload)) return d;
    const size_t shift = reinterpret_cast<uintptr_t>(align) % kVecBytes;
    auto* p = static_cast<unsigned char*>(pool->acquire(bytes + shift));
    std::memcpy(p + shift, payload, bytes);
    *staged = p;
    return p + shift;
  }

  // Records the ticket of the work just enqueued; a staged buffer is free after it.
  Ticket finish(void* staged) {
    const Ticket t = tickets->record();
    if (staged != nullptr) pool->release(staged, t);
    return t;
  }

  int device;
  cudaStream_t stream = nullptr;
  std::unique_ptr<EventTickets> tickets;
  std::unique_ptr<PinnedPool> pool;
  std::unique_ptr<CudaPeerMemory> peers;  // made on first use
  std::mutex mu;
  std::unordered_set<void*> allocations;  // guarded by mu
};

CudaBackend::CudaBackend(int device) {
  if (auto why = cudaDeviceProblem(device)) throw ConfigError(*why);
  impl_ = std::make_unique<Impl>(resolveDevice(device));
  impl_->activate();
  ARL_CUDA_CHECK(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking));
  impl_->tickets = std::make_unique<EventTickets>(impl_->stream);
  impl_->pool = std::make_unique<PinnedPool>(*impl_->tickets);
}

CudaBackend::~CudaBackend() {
  if (!impl_) return;
  (void)cudaSetDevice(impl_->device);
  (void)cudaStreamSynchronize(impl_->stream);
  impl_->peers.reset();
  impl_->pool.reset();
  impl_->tickets.reset();
  for (void* p : impl_->allocations) (void)cudaFree(p);
  (void)cudaStreamDestroy(impl_->stream);
}

int CudaBackend::device() const { return impl_->device; }

CUstream_st* CudaBackend::stream() const { return impl_->stream; }

std::string CudaBackend::describe() const {
  return "device " + std::to_string(impl_->device) + ": " + describeDevice(impl_->device);
}

size_t CudaBackend::pinnedBuffers() const { return impl_->pool->buffers(); }

void* CudaBackend::allocate(size_t bytes) {
  impl_->activate();
  void* p = nullptr;
  ARL_CUDA_CHECK(cudaMalloc(&p, std::max(bytes, kMinAllocation)));
  const cudaError_t rc = cudaMemsetAsync(p, 0, std::max(bytes, kMinAllocation), impl_->stream);
  if (rc == cudaSuccess) synchronize();
  if (rc != cudaSuccess) {
    (void)cudaFree(p);
    detail::check(rc, "cudaMemsetAsync");
  }
  std::lock_guard lock(impl_->mu);
  impl_->allocations.insert(p);
  return p;
}

void CudaBackend::deallocate(void* p) {
  if (p == nullptr) return;
  {
    std::lock_guard lock(impl_->mu);
    ARL_ENFORCE(impl_->allocations.erase(p) == 1,
                "deallocate of " << p << " not allocated by this backend");
  }
  impl_->activate();
  synchronize();  // work still queued may use it
  ARL_CUDA_CHECK(cudaFree(p));
}

void CudaBackend::upload(void* dst, const void* host, size_t bytes) {
  if (bytes == 0) return;
  impl_->activate();
  ARL_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyDefault, impl_->stream));
  synchronize();
}

void CudaBackend::download(void* host, const void* src, size_t bytes) {
  if (bytes == 0) return;
  impl_->activate();
  ARL_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDefault, impl_->stream));
  synchronize();
}

Backend::Ticket CudaBackend::reduceFromHost(void* dst, const void* local, const void* payload,
                                            size_t count, DataType t, RedOp op) {
  const size_t bytes = count * dtypeSize(t);
  impl_->activate();
  if (bytes == 0) return impl_->finish(nullptr);
  ARL_ENFORCE(dst != nullptr && local != nullptr && payload != nullptr,
              "null buffer for " << count << " elements");
  ARL_ENFORCE(
      dst == local || !overlaps(dst, local, bytes),
      "dst " << dst << " partially overlaps local " << local << " over " << bytes << " bytes");
  void* staged = nullptr;
  const void* b = impl_->deviceView(payload, bytes, dst, &staged);
  try {
    launchReduce(dst, local, b, count, t, op, impl_->stream);
  } catch (...) {
    if (staged != nullptr) impl_->pool->release(staged, 0);
    throw;
  }
  return impl_->finish(staged);
}

Backend::Ticket CudaBackend::copyFromHost(void* dst, const void* payload, size_t bytes) {
  impl_->activate();
  if (bytes == 0) return impl_->finish(nullptr);
  ARL_ENFORCE(dst != nullptr && payload != nullptr, "null buffer for " << bytes << " bytes");
  void* staged = nullptr;
  const void* src = impl_->deviceView(payload, bytes, dst, &staged);
  const cudaError_t rc = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, impl_->stream);
  if (rc != cudaSuccess && staged != nullptr) impl_->pool->release(staged, 0);
  detail::check(rc, "cudaMemcpyAsync(host to device)");
  return impl_->finish(staged);
}

Backend::Ticket CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  impl_->activate();
  if (bytes != 0 && dst != src) {
    ARL_ENFORCE(!overlaps(dst, src, bytes),
                "copy of " << bytes << " bytes from " << src << " to " << dst << " overlaps");
    ARL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, impl_->stream));
  }
  return impl_->finish(nullptr);
}

Backend::Ticket CudaBackend::stageOut(const void* src, size_t bytes, const void** hostView) {
  ARL_ENFORCE(hostView != nullptr, "stageOut without hostView");
  impl_->activate();
  void* p = impl_->pool->acquire(std::max<size_t>(bytes, 1));
  if (bytes != 0) {
    const cudaError_t rc = cudaMemcpyAsync(p, src, bytes, cudaMemcpyDeviceToHost, impl_->stream);
    if (rc != cudaSuccess) impl_->pool->release(p, 0);
    detail::check(rc, "cudaMemcpyAsync(device to host)");
  }
  *hostView = p;
  return impl_->tickets->record();
}

void CudaBackend::releaseStaged(const void* hostView) {
  // The copy into it may still be queued when a failing run gives it back early.
  impl_->pool->release(hostView, impl_->tickets->last());
}

Backend::Ticket CudaBackend::finalize(void* dst, size_t count, DataType t, RedOp op, int nranks) {
  ARL_ENFORCE(nranks >= 1, "finalize with nranks " << nranks);
  impl_->activate();
  launchFinalize(dst, count, t, op, nranks, impl_->stream);
  return impl_->finish(nullptr);
}

PeerMemory* CudaBackend::peerMemory() {
  if (!impl_->peers) {
    impl_->activate();
    impl_->peers = std::make_unique<CudaPeerMemory>(impl_->device, impl_->stream);
  }
  return impl_->peers.get();
}

bool CudaBackend::done(Ticket t) {
  impl_->activate();
  return impl_->tickets->done(t);
}

void CudaBackend::wait(Ticket t) {
  impl_->activate();
  impl_->tickets->wait(t);
}

void CudaBackend::synchronize() {
  impl_->activate();
  ARL_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
  impl_->tickets->markAllDone();
}

}  // namespace arl::gpu
