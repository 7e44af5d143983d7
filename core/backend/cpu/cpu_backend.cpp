#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "base/errors.h"
#include "reduce_kernels.h"

namespace arl {

namespace {

constexpr size_t kAlignment = 64;  // a cache line, and more than any vector the kernels use

kernels::Isa toIsa(CpuKernels k) {
  return k == CpuKernels::Avx2 ? kernels::Isa::Avx2 : kernels::Isa::Portable;
}

std::string_view kernelsName(CpuKernels k) {
  switch (k) {
    case CpuKernels::Auto: return "auto";
    case CpuKernels::Portable: return "portable";
    case CpuKernels::Avx2: return "avx2";
  }
  return "?";
}

// Either the same start (in place) or disjoint: the kernels read each vector before writing
// it, which is safe for exact aliasing only.
void checkAliasing(const void* dst, const void* src, size_t bytes, const char* what) {
  if (bytes == 0 || dst == src) {
    return;
  }
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  ARL_ENFORCE(d + bytes <= s || s + bytes <= d, "dst " << dst << " partially overlaps " << what
                                                       << " " << src << " over " << bytes
                                                       << " bytes");
}

}  // namespace

bool CpuBackend::kernelsSupported(CpuKernels k) {
  return k == CpuKernels::Auto || kernels::isaSupported(toIsa(k));
}

CpuBackend::CpuBackend(CpuBackendOptions opt) : streamThreshold_(opt.streamThresholdBytes) {
  if (opt.kernels == CpuKernels::Auto) {
    kernels_ = kernels::bestIsa() == kernels::Isa::Avx2 ? CpuKernels::Avx2 : CpuKernels::Portable;
  } else {
    if (!kernels::isaSupported(toIsa(opt.kernels))) {
      throw ConfigError("cpu backend: " + std::string(kernelsName(opt.kernels)) +
                        " kernels are not available on this CPU or build");
    }
    kernels_ = opt.kernels;
  }
}

CpuBackend::~CpuBackend() {
  // Memory a caller forgot to deallocate dies with the backend that owns it.
  for (auto& [p, bytes] : allocations_) {
    std::free(p);
  }
}

void* CpuBackend::allocate(size_t bytes) { return allocateUnlessCancelled(bytes, nullptr); }

void* CpuBackend::allocateUnlessCancelled(size_t bytes, const std::atomic<bool>* cancel) {
  const size_t rounded =
      bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  ARL_ENFORCE(rounded >= bytes, "allocation of " << bytes << " bytes overflows");
  const auto cancelled = [cancel] { return cancel != nullptr && cancel->load(); };
  if (cancelled()) return nullptr;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  // Touch every page now: the first write to a fresh mapping faults page by page. In pieces
  // of a few milliseconds (page faults cost up to 5 ms per MiB on a loaded machine), so that
  // a cancelled run does not wait for a large buffer.
  constexpr size_t kPiece = size_t{1} << 20;
  auto* bytesAt = static_cast<unsigned char*>(p);
  for (size_t off = 0; off < rounded; off += kPiece) {
    if (cancelled()) {
      std::free(p);
      return nullptr;
    }
    std::memset(bytesAt + off, 0, std::min(kPiece, rounded - off));
  }
  std::lock_guard lock(mu_);
  allocations_.emplace(p, rounded);
  return p;
}

void CpuBackend::deallocate(void* p) {
  if (p == nullptr) {
    return;
  }
  {
    std::lock_guard lock(mu_);
    const auto it = allocations_.find(p);
    ARL_ENFORCE(it != allocations_.end(),
                "deallocate of " << p << " not allocated by this backend");
    allocations_.erase(it);
  }
  std::free(p);
}

void CpuBackend::upload(void* dst, const void* host, size_t bytes) {
  if (bytes != 0 && dst != host) {
    std::memmove(dst, host, bytes);
  }
}

void CpuBackend::download(void* host, const void* src, size_t bytes) {
  if (bytes != 0 && host != src) {
    std::memmove(host, src, bytes);
  }
}

Backend::Ticket CpuBackend::reduceFromHost(void* dst, const void* local, const void* payload,
                                           size_t count, DataType t, RedOp op) {
  const size_t bytes = count * dtypeSize(t);
  ARL_ENFORCE(count == 0 || (dst != nullptr && local != nullptr && payload != nullptr),
              "null buffer for " << count << " elements");
  checkAliasing(dst, local, bytes, "local");
  checkAliasing(dst, payload, bytes, "payload");
  kernels::reduce(toIsa(kernels_), dst, local, payload, count, t, op, bytes >= streamThreshold_);
  return issue();
}

Backend::Ticket CpuBackend::copyFromHost(void* dst, const void* payload, size_t bytes) {
  if (bytes != 0 && dst != payload) {
    std::memmove(dst, payload, bytes);
  }
  return issue();
}

Backend::Ticket CpuBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes != 0 && dst != src) {
    std::memmove(dst, src, bytes);
  }
  return issue();
}

Backend::Ticket CpuBackend::stageOut(const void* src, size_t /*bytes*/, const void** hostView) {
  ARL_ENFORCE(hostView != nullptr, "stageOut without hostView");
  *hostView = src;
  return issue();
}

void CpuBackend::releaseStaged(const void* /*hostView*/) {}

Backend::Ticket CpuBackend::finalize(void* dst, size_t count, DataType t, RedOp op, int nranks) {
  ARL_ENFORCE(nranks >= 1, "finalize with nranks " << nranks);
  kernels::finalize(toIsa(kernels_), dst, count, t, op, nranks);
  return issue();
}

bool CpuBackend::done(Ticket t) {
  ARL_ENFORCE(t >= 1 && t <= lastTicket_.load(), "ticket " << t << " was never issued");
  return true;
}

void CpuBackend::wait(Ticket t) { (void)done(t); }

}  // namespace arl
