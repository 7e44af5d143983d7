#include "gpu/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "base/errors.h"
#include "gpu/cuda_check.h"
#include "gpu/cuda_ipc.h"
#include "gpu/device_clock.h"
#include "gpu/event_tickets.h"
#include "gpu/pinned_pool.h"
#include "gpu/reduce_kernels.h"

namespace arl::gpu {

namespace {

constexpr size_t kMinAllocation = 256;
constexpr size_t kVecBytes = 16;  // the kernels' vector width (gpu/reduce_kernels.cu)

// Where a payload lies, as the device sees it (cudaPointerGetAttributes).
enum class Where : uint8_t {
  Device,      // device or managed memory: a kernel reads it in place
  PinnedHost,  // pinned or registered host memory: the copy engine reads it
  Pageable,    // ordinary host memory: copied into a pinned buffer first
};

// `p`'s kind, and the address the device reads it at (for device and pinned memory).
Where whereIs(const void* p, const void** deviceAddress) {
  *deviceAddress = nullptr;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // older runtimes fail on unregistered memory: clear it
    return Where::Pageable;
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged: *deviceAddress = p; return Where::Device;
    case cudaMemoryTypeHost:
      *deviceAddress = attr.devicePointer;
      return attr.devicePointer != nullptr ? Where::PinnedHost : Where::Pageable;
    default: return Where::Pageable;
  }
}

MemRange range(const void* p, size_t bytes) { return MemRange::of(p, bytes); }

bool overlaps(const void* a, const void* b, size_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

}  // namespace

int cudaStreamsFromEnv() {
  const char* v = std::getenv(kCudaStreamsEnv);
  if (v == nullptr || *v == '\0') return kDefaultCudaStreams;
  const std::string s = v;
  if (s == "1" || s == "2" || s == "3") return s[0] - '0';
  throw ConfigError(std::string(kCudaStreamsEnv) + "='" + s +
                    "': expected 1, 2 or 3 (the streams of the cuda backend)");
}

struct CudaBackend::Impl {
  explicit Impl(int dev) : device(dev) {}

  // Makes this backend's device current on the calling thread (threads start on device 0).
  void activate() const { ARL_CUDA_CHECK(cudaSetDevice(device)); }

  // Copies host `payload` to device memory `dst` on the copy-in stream: from where it lies
  // when the device can read it (pinned), else through a pinned copy the calling thread
  // makes, given back to the pool once the copy-in completes.
  Ticket copyIn(void* dst, const void* payload, size_t bytes) {
    const void* src = nullptr;
    void* pinned = nullptr;
    if (whereIs(payload, &src) == Where::Pageable) {
      pinned = hostPool->acquire(bytes);
      std::memcpy(pinned, payload, bytes);
      src = pinned;
    }
    const MemRange w[] = {range(dst, bytes)};
    Ticket t = 0;
    try {
      t = tickets->issue(Lane::CopyIn, {}, w, [&](cudaStream_t s) {
        ARL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
      });
    } catch (...) {
      if (pinned != nullptr) hostPool->release(pinned, 0);  // the copy was not enqueued
      throw;
    }
    if (pinned != nullptr) hostPool->release(pinned, t);
    return t;
  }

  int device;
  int nstreams = kDefaultCudaStreams;
  std::vector<cudaStream_t> streams;
  std::unique_ptr<DeviceClock> clock;
  std::unique_ptr<EventTickets> tickets;
  std::unique_ptr<PinnedPool> hostPool;
  std::unique_ptr<PinnedPool> devicePool;
  std::unique_ptr<CudaPeerMemory> peers;  // made on first use
  std::mutex mu;
  std::unordered_set<void*> allocations;                // guarded by mu
  std::unordered_map<const void*, Ticket> stagedViews;  // guarded by mu: view -> its copy-out
};

CudaBackend::CudaBackend(int device, int streams) {
  if (auto why = cudaDeviceProblem(device)) throw ConfigError(*why);
  if (streams < 0 || streams > StreamPlan::kMaxStreams) {
    throw ConfigError("backend 'cuda': " + std::to_string(streams) +
                      " streams; expected 1, 2 or 3");
  }
  impl_ = std::make_unique<Impl>(resolveDevice(device));
  impl_->nstreams = streams == 0 ? cudaStreamsFromEnv() : streams;
  impl_->activate();
  for (int i = 0; i < impl_->nstreams; ++i) {
    cudaStream_t s = nullptr;
    ARL_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    impl_->streams.push_back(s);
  }
  impl_->clock = std::make_unique<DeviceClock>();
  impl_->tickets = std::make_unique<EventTickets>(impl_->streams, impl_->clock.get());
  impl_->hostPool = std::make_unique<PinnedPool>(*impl_->tickets, PinnedPool::Memory::PinnedHost);
  impl_->devicePool = std::make_unique<PinnedPool>(*impl_->tickets, PinnedPool::Memory::Device);
}

CudaBackend::~CudaBackend() {
  if (!impl_) return;
  (void)cudaSetDevice(impl_->device);
  for (cudaStream_t s : impl_->streams) (void)cudaStreamSynchronize(s);
  impl_->peers.reset();
  impl_->hostPool.reset();
  impl_->devicePool.reset();
  impl_->tickets.reset();
  impl_->clock.reset();
  for (void* p : impl_->allocations) (void)cudaFree(p);
  for (cudaStream_t s : impl_->streams) (void)cudaStreamDestroy(s);
}

int CudaBackend::device() const { return impl_->device; }

CUstream_st* CudaBackend::stream() const { return impl_->streams.front(); }

int CudaBackend::streams() const { return impl_->nstreams; }

std::string CudaBackend::describe() const {
  return "device " + std::to_string(impl_->device) + ": " + describeDevice(impl_->device);
}

size_t CudaBackend::pinnedBuffers() const {
  return impl_->hostPool->buffers() + impl_->devicePool->buffers();
}

void* CudaBackend::allocate(size_t bytes) {
  impl_->activate();
  const size_t size = std::max(bytes, kMinAllocation);
  void* p = nullptr;
  ARL_CUDA_CHECK(cudaMalloc(&p, size));
  try {
    const MemRange w[] = {range(p, size)};
    wait(impl_->tickets->issue(Lane::Compute, {}, w, [&](cudaStream_t s) {
      ARL_CUDA_CHECK(cudaMemsetAsync(p, 0, size, s));
    }));
  } catch (...) {
    synchronize();
    (void)cudaFree(p);
    throw;
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
  const MemRange w[] = {range(dst, bytes)};
  wait(impl_->tickets->issue(Lane::CopyIn, {}, w, [&](cudaStream_t s) {
    ARL_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyDefault, s));
  }));
}

void CudaBackend::download(void* host, const void* src, size_t bytes) {
  if (bytes == 0) return;
  impl_->activate();
  const MemRange r[] = {range(src, bytes)};
  wait(impl_->tickets->issue(Lane::CopyOut, r, {}, [&](cudaStream_t s) {
    ARL_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDefault, s));
  }));
}

Backend::Ticket CudaBackend::reduceFromHost(void* dst, const void* local, const void* payload,
                                            size_t count, DataType t, RedOp op) {
  const size_t bytes = count * dtypeSize(t);
  impl_->activate();
  if (bytes == 0) return impl_->tickets->issue(Lane::Compute, {}, {}, [](cudaStream_t) {});
  ARL_ENFORCE(dst != nullptr && local != nullptr && payload != nullptr,
              "null buffer for " << count << " elements");
  ARL_ENFORCE(
      dst == local || !overlaps(dst, local, bytes),
      "dst " << dst << " partially overlaps local " << local << " over " << bytes << " bytes");
  const MemRange w[] = {range(dst, bytes)};
  const void* b = nullptr;
  if (whereIs(payload, &b) == Where::Device) {
    const MemRange r[] = {range(local, bytes)};
    return impl_->tickets->issue(
        Lane::Compute, r, w, [&](cudaStream_t s) { launchReduce(dst, local, b, count, t, op, s); });
  }
  // Host memory is copied in to device memory placed at dst's offset within 16 bytes, so
  // that the kernel's vectors line up; the kernel waits for the copy (it reads what the copy
  // wrote).
  const size_t shift = reinterpret_cast<uintptr_t>(dst) % kVecBytes;
  auto* staged = static_cast<unsigned char*>(impl_->devicePool->acquire(bytes + shift));
  Ticket in = 0;
  try {
    in = impl_->copyIn(staged + shift, payload, bytes);
  } catch (...) {
    impl_->devicePool->release(staged, 0);
    throw;
  }
  const MemRange r[] = {range(local, bytes), range(staged + shift, bytes)};
  Ticket k = 0;
  try {
    k = impl_->tickets->issue(Lane::Compute, r, w, [&](cudaStream_t s) {
      launchReduce(dst, local, staged + shift, count, t, op, s);
    });
  } catch (...) {
    impl_->devicePool->release(staged, in);  // free once the copy into it is done
    throw;
  }
  impl_->devicePool->release(staged, k);
  return k;
}

Backend::Ticket CudaBackend::copyFromHost(void* dst, const void* payload, size_t bytes) {
  impl_->activate();
  if (bytes == 0) return impl_->tickets->issue(Lane::CopyIn, {}, {}, [](cudaStream_t) {});
  ARL_ENFORCE(dst != nullptr && payload != nullptr, "null buffer for " << bytes << " bytes");
  return impl_->copyIn(dst, payload, bytes);
}

Backend::Ticket CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  impl_->activate();
  if (bytes == 0 || dst == src) {
    return impl_->tickets->issue(Lane::Compute, {}, {}, [](cudaStream_t) {});
  }
  ARL_ENFORCE(!overlaps(dst, src, bytes),
              "copy of " << bytes << " bytes from " << src << " to " << dst << " overlaps");
  const MemRange r[] = {range(src, bytes)};
  const MemRange w[] = {range(dst, bytes)};
  return impl_->tickets->issue(Lane::Compute, r, w, [&](cudaStream_t s) {
    ARL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
  });
}

Backend::Ticket CudaBackend::stageOut(const void* src, size_t bytes, const void** hostView) {
  ARL_ENFORCE(hostView != nullptr, "stageOut without hostView");
  impl_->activate();
  void* p = impl_->hostPool->acquire(std::max<size_t>(bytes, 1));
  const MemRange r[] = {range(src, bytes)};
  const MemRange w[] = {range(p, bytes)};
  Ticket t = 0;
  try {
    t = impl_->tickets->issue(Lane::CopyOut, r, w, [&](cudaStream_t s) {
      if (bytes != 0) ARL_CUDA_CHECK(cudaMemcpyAsync(p, src, bytes, cudaMemcpyDeviceToHost, s));
    });
  } catch (...) {
    impl_->hostPool->release(p, t);
    throw;
  }
  {
    std::lock_guard lock(impl_->mu);
    impl_->stagedViews[p] = t;
  }
  *hostView = p;
  return t;
}

void CudaBackend::releaseStaged(const void* hostView) {
  Ticket t = 0;
  {
    std::lock_guard lock(impl_->mu);
    const auto it = impl_->stagedViews.find(hostView);
    ARL_ENFORCE(it != impl_->stagedViews.end(),
                "releaseStaged of " << hostView << ", which is not staged");
    t = it->second;
    impl_->stagedViews.erase(it);
  }
  // The copy into it may still be queued when a failing run gives it back early.
  impl_->hostPool->release(hostView, t);
}

Backend::Ticket CudaBackend::finalize(void* dst, size_t count, DataType t, RedOp op, int nranks) {
  ARL_ENFORCE(nranks >= 1, "finalize with nranks " << nranks);
  impl_->activate();
  const MemRange rw[] = {range(dst, count * dtypeSize(t))};
  return impl_->tickets->issue(
      Lane::Compute, rw, rw, [&](cudaStream_t s) { launchFinalize(dst, count, t, op, nranks, s); });
}

PeerMemory* CudaBackend::peerMemory() {
  if (!impl_->peers) {
    impl_->activate();
    impl_->peers = std::make_unique<CudaPeerMemory>(impl_->device, impl_->streams);
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
  for (cudaStream_t s : impl_->streams) ARL_CUDA_CHECK(cudaStreamSynchronize(s));
  impl_->tickets->markAllDone();
}

std::optional<int64_t> CudaBackend::deviceEndNs(Ticket t) { return impl_->tickets->deviceEndNs(t); }

void CudaBackend::recordOpTimes(bool on) { impl_->tickets->recordOpTimes(on); }

std::vector<OpTime> CudaBackend::takeOpTimes() { return impl_->tickets->takeOpTimes(); }

}  // namespace arl::gpu
