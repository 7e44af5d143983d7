#include "gpu/pinned_pool.h"

#include <algorithm>

#include "base/errors.h"
#include "gpu/cuda_check.h"

namespace arl::gpu {

namespace {

constexpr size_t kMinBuffer = size_t{64} << 10;

size_t sizeClass(size_t bytes) {
  size_t s = kMinBuffer;
  while (s < bytes) s *= 2;
  return s;
}

}  // namespace

PinnedPool::~PinnedPool() {
  for (const Buf& b : bufs_) {
    (void)(memory_ == Memory::Device ? cudaFree(b.p) : cudaFreeHost(b.p));
  }
}

void* PinnedPool::make(size_t size) {
  void* p = nullptr;
  if (memory_ == Memory::Device) {
    ARL_CUDA_CHECK(cudaMalloc(&p, size));
    return p;
  }
  ARL_CUDA_CHECK(cudaHostAlloc(&p, size, cudaHostAllocMapped | cudaHostAllocPortable));
  void* dev = nullptr;
  const cudaError_t rc = cudaHostGetDevicePointer(&dev, p, 0);
  if (rc != cudaSuccess || dev != p) {
    (void)cudaFreeHost(p);
    detail::check(rc, "cudaHostGetDevicePointer");
    ARL_ENFORCE(false, "pinned buffer " << p << " is mapped at another device address " << dev
                                        << ": unified addressing is required");
  }
  return p;
}

// The smallest buffer that fits and is free, or pending on a ticket that has completed.
std::vector<PinnedPool::Buf>::iterator PinnedPool::findFree(size_t bytes) {
  auto best = bufs_.end();
  for (auto it = bufs_.begin(); it != bufs_.end(); ++it) {
    if (it->bytes < bytes || it->state == State::Held) continue;
    if (best != bufs_.end() && best->bytes <= it->bytes) continue;
    if (it->state == State::Pending) {
      if (!tickets_.done(it->after)) continue;
      it->state = State::Free;
    }
    best = it;
  }
  return best;
}

void* PinnedPool::acquire(size_t bytes) {
  std::lock_guard lock(mu_);
  auto it = findFree(bytes);
  if (it == bufs_.end()) {
    const size_t size = sizeClass(bytes);
    bufs_.push_back({static_cast<unsigned char*>(make(size)), size, State::Free, 0});
    it = bufs_.end() - 1;
  }
  it->state = State::Held;
  it->after = 0;
  return it->p;
}

void PinnedPool::release(const void* p, Ticket after) {
  std::lock_guard lock(mu_);
  const auto* q = static_cast<const unsigned char*>(p);
  const auto it = std::find_if(bufs_.begin(), bufs_.end(), [q](const Buf& b) {
    return b.state == State::Held && q >= b.p && q < b.p + b.bytes;
  });
  ARL_ENFORCE(it != bufs_.end(), "release of " << p << ", which is in no held pinned buffer");
  it->state = after == 0 ? State::Free : State::Pending;
  it->after = after;
}

size_t PinnedPool::buffers() const {
  std::lock_guard lock(mu_);
  return bufs_.size();
}

size_t PinnedPool::pinnedBytes() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const Buf& b : bufs_) n += b.bytes;
  return n;
}

}  // namespace arl::gpu
