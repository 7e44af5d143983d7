// The CPU backend: host memory and vectorised reductions on the calling thread. It is what
// runs on a machine without a GPU, and its arithmetic is the lab's definition of a reduction.
//
// Arithmetic of reduceFromHost (dst = local op payload), element by element; reduceScalar()
// and finalizeScalar() in numeric.h compute exactly the same, for checks and tests:
// - float, double: IEEE 754 in their own precision, round to nearest even.
// - half, bfloat16: both operands widened to float (exact), the operation in float, the result
//   rounded back to nearest even (overflow gives infinity). As NCCL computes them; for half
//   this equals a correctly rounded half operation, float having more than twice half's
//   precision (Figueroa, "When is double rounding innocuous?", SIGNUM 1995).
// - int32, int64, uint8: sum and prod wrap modulo 2^bits; min and max compare signed for
//   int32 and int64, unsigned for uint8.
// - min, max of floating types: as NCCL's fminf/fmaxf, a NaN operand is ignored (both NaN
//   gives NaN); -0 orders below +0 so that results do not depend on the combining order.
//   Sum and prod propagate NaN; which NaN (its payload) is not specified.
// - avg: combines like sum; finalize() then divides by nranks once: floating types in their
//   compute precision (float for half and bfloat16, rounded back to nearest even), integers
//   with truncating division (signed for int32/int64, unsigned for uint8) of the wrapped sum.
//
// Every operation is synchronous: a ticket is complete when the call returns. All methods
// may be called from several threads at once on distinct memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "backend/backend.h"

namespace arl {

// Instruction sets the reduction kernels are built for.
enum class CpuKernels : uint8_t {
  Auto,      // the best one this CPU supports
  Portable,  // plain C++ vectors for the baseline target (SSE2 on x86-64)
  Avx2,      // AVX2 + F16C, chosen at run time (the build itself targets the baseline)
};

struct CpuBackendOptions {
  CpuKernels kernels = CpuKernels::Auto;
  // Reductions writing at least this many bytes use non-temporal stores, which bypass the
  // caches: faster for buffers larger than the last-level cache, slower for slices a
  // pipeline reads again at once. 0 streams always; SIZE_MAX never.
  size_t streamThresholdBytes = size_t{8} << 20;
};

class CpuBackend final : public Backend {
 public:
  // Throws ConfigError when the requested kernels are not available on this CPU or build.
  explicit CpuBackend(CpuBackendOptions opt = {});
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  // Is this instruction set usable here (built, and supported by the CPU)?
  static bool kernelsSupported(CpuKernels k);
  // The kernels in use: Portable or Avx2, never Auto.
  CpuKernels kernels() const { return kernels_; }

  std::string_view name() const override { return "cpu"; }
  MemoryKind memoryKind() const override { return MemoryKind::Host; }

  // 64-byte aligned, zero-filled memory whose pages are touched here, so that no timed
  // iteration pays page faults; kept until deallocate() (never returned to the kernel in
  // between). bytes may be 0.
  void* allocate(size_t bytes) override;
  // Touches the pages 1 MiB at a time, looking at `cancel` in between.
  void* allocateUnlessCancelled(size_t bytes, const std::atomic<bool>* cancel) override;
  // p must come from allocate() of this backend (or be null).
  void deallocate(void* p) override;
  void upload(void* dst, const void* host, size_t bytes) override;
  void download(void* host, const void* src, size_t bytes) override;

  // dst = local (op) payload. dst may be local itself (or payload) but must not overlap
  // either otherwise; the payload needs no alignment.
  Ticket reduceFromHost(void* dst, const void* local, const void* payload, size_t count, DataType t,
                        RedOp op) override;
  Ticket copyFromHost(void* dst, const void* payload, size_t bytes) override;
  // Overlapping ranges are allowed.
  Ticket copy(void* dst, const void* src, size_t bytes) override;
  // Zero copy: *hostView = src.
  Ticket stageOut(const void* src, size_t bytes, const void** hostView) override;
  void releaseStaged(const void* hostView) override;
  Ticket finalize(void* dst, size_t count, DataType t, RedOp op, int nranks) override;

  // Tickets complete on issue; asking about a ticket never issued is a bug (EnforceError).
  bool done(Ticket t) override;
  void wait(Ticket t) override;
  void synchronize() override {}

 private:
  Ticket issue() { return ++lastTicket_; }

  CpuKernels kernels_;
  size_t streamThreshold_;
  std::atomic<Ticket> lastTicket_{0};
  std::mutex mu_;
  std::unordered_map<void*, size_t> allocations_;  // pointer -> bytes, guarded by mu_
};

}  // namespace arl
