// The reduction kernels: one template per (dtype, operator), memory-bound and grid-stride.
// Each thread moves kUnroll 16-byte vectors of each operand per round (all loads issued
// before the first store, so several are in flight), and a grid of one wave of resident
// blocks strides over the rest. The per-element arithmetic mirrors
// core/backend/cpu/reduce_kernels_impl.h: same compute type, same operand order, same
// NaN and signed-zero rules for min and max.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/errors.h"
#include "gpu/cuda_check.h"
#include "gpu/reduce_kernels.h"

namespace arl::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;
constexpr size_t kVecBytes = sizeof(uint4);

// ---- Element formats: storage S, compute C, compare K (as FormatOf in the CPU kernels) ----

template <DataType T>
struct Elem;

template <>
struct Elem<DataType::Float> {
  using S = float;
  using C = float;
  using Bits = uint32_t;
  static constexpr bool kFloating = true;
  __device__ static C widen(S x) { return x; }
  __device__ static S narrow(C x) { return x; }
  __device__ static Bits bits(C x) { return __float_as_uint(x); }
  __device__ static C fromBits(Bits b) { return __uint_as_float(b); }
};

template <>
struct Elem<DataType::Double> {
  using S = double;
  using C = double;
  using Bits = unsigned long long;
  static constexpr bool kFloating = true;
  __device__ static C widen(S x) { return x; }
  __device__ static S narrow(C x) { return x; }
  __device__ static Bits bits(C x) { return static_cast<Bits>(__double_as_longlong(x)); }
  __device__ static C fromBits(Bits b) { return __longlong_as_double(static_cast<long long>(b)); }
};

// binary16 and bfloat16 are stored as their bits and computed in float: widening is exact,
// narrowing rounds to nearest even (overflow gives infinity), as the CPU backend does.
template <>
struct Elem<DataType::Half> : Elem<DataType::Float> {
  using S = uint16_t;
  __device__ static C widen(S x) { return __half2float(__ushort_as_half(x)); }
  __device__ static S narrow(C x) { return __half_as_ushort(__float2half_rn(x)); }
};

template <>
struct Elem<DataType::BFloat16> : Elem<DataType::Float> {
  using S = uint16_t;
  __device__ static C widen(S x) { return __bfloat162float(__ushort_as_bfloat16(x)); }
  __device__ static S narrow(C x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
};

// Integers compute in their unsigned twin (sum and product wrap) and compare as K.
template <typename SS, typename CC, typename KK>
struct IntElem {
  using S = SS;
  using C = CC;
  using K = KK;
  static constexpr bool kFloating = false;
  __device__ static C widen(S x) { return static_cast<C>(x); }
  __device__ static S narrow(C x) { return static_cast<S>(x); }
};

template <>
struct Elem<DataType::Int32> : IntElem<int32_t, uint32_t, int32_t> {};
template <>
struct Elem<DataType::Int64> : IntElem<int64_t, uint64_t, int64_t> {};
template <>
struct Elem<DataType::Uint8> : IntElem<uint8_t, uint8_t, uint8_t> {};

// ---- Operators on compute values ----

struct SumOp {
  template <typename E>
  __device__ static typename E::C apply(typename E::C a, typename E::C b) {
    return static_cast<typename E::C>(a + b);
  }
};

struct ProdOp {
  template <typename E>
  __device__ static typename E::C apply(typename E::C a, typename E::C b) {
    return static_cast<typename E::C>(a * b);
  }
};

// Floating: a NaN operand is ignored (both NaN gives a), and equal operands combine their
// bits (OR for min, AND for max) so that -0 orders below +0, as minNum()/maxNum() in
// exec/numeric.h and the CPU kernels' MinMaxOp.
template <bool kMin>
struct MinMaxOp {
  template <typename E>
  __device__ static typename E::C apply(typename E::C a, typename E::C b) {
    using C = typename E::C;
    if constexpr (E::kFloating) {
      const auto ab = E::bits(a);
      const auto bb = E::bits(b);
      const C tie = E::fromBits(kMin ? (ab | bb) : (ab & bb));
      C m = (kMin ? a < b : a > b) ? a : b;
      m = a == b ? tie : m;
      return b != b ? a : m;
    } else {
      const auto ka = static_cast<typename E::K>(a);
      const auto kb = static_cast<typename E::K>(b);
      return (kMin ? ka < kb : ka > kb) ? a : b;
    }
  }
};

template <typename E, typename Op>
__device__ __forceinline__ typename E::S combine(typename E::S a, typename E::S b) {
  return E::narrow(Op::template apply<E>(E::widen(a), E::widen(b)));
}

template <typename E, typename Op>
__device__ __forceinline__ uint4 combineVec(uint4 a, uint4 b) {
  using S = typename E::S;
  constexpr int kLanes = kVecBytes / sizeof(S);
  S x[kLanes];
  S y[kLanes];
  memcpy(x, &a, kVecBytes);
  memcpy(y, &b, kVecBytes);
#pragma unroll
  for (int i = 0; i < kLanes; ++i) x[i] = combine<E, Op>(x[i], y[i]);
  uint4 r;
  memcpy(&r, x, kVecBytes);
  return r;
}

// d[i] = a[i] op b[i] for i < n. Elements [head, head + nvec * lanes) move as 16-byte
// vectors (16-byte aligned in all three arrays); the rest, before and after, one by one.
// d may be a or b itself: every element is read before it is written, by the same thread.
template <typename E, typename Op>
__global__ void __launch_bounds__(kThreads)
    reduceKernel(typename E::S* d, const typename E::S* a, const typename E::S* b, size_t n,
                 size_t head, size_t nvec) {
  using S = typename E::S;
  constexpr size_t kLanes = kVecBytes / sizeof(S);
  const size_t tid = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t threads = static_cast<size_t>(gridDim.x) * blockDim.x;
  const auto* va = reinterpret_cast<const uint4*>(a + head);
  const auto* vb = reinterpret_cast<const uint4*>(b + head);
  auto* vd = reinterpret_cast<uint4*>(d + head);
  for (size_t base = blockIdx.x * static_cast<size_t>(blockDim.x) * kUnroll + threadIdx.x;
       base < nvec; base += threads * kUnroll) {
    uint4 x[kUnroll] = {};
    uint4 y[kUnroll] = {};
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + static_cast<size_t>(u) * blockDim.x;
      if (i < nvec) {
        x[u] = va[i];
        y[u] = vb[i];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + static_cast<size_t>(u) * blockDim.x;
      if (i < nvec) vd[i] = combineVec<E, Op>(x[u], y[u]);
    }
  }
  for (size_t i = tid; i < head; i += threads) d[i] = combine<E, Op>(a[i], b[i]);
  for (size_t i = head + nvec * kLanes + tid; i < n; i += threads) {
    d[i] = combine<E, Op>(a[i], b[i]);
  }
}

// Avg's division, as the CPU backend's finalize(): floating types in their compute precision
// (correctly rounded: nvcc's -prec-div=true), integers by truncating division in 64 bits,
// signed for int32 and int64, unsigned for uint8.
template <typename E>
__global__ void __launch_bounds__(kThreads) divideKernel(typename E::S* d, size_t n, int nranks) {
  const size_t threads = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += threads) {
    if constexpr (E::kFloating) {
      d[i] = E::narrow(E::widen(d[i]) / static_cast<typename E::C>(nranks));
    } else {
      using S = typename E::S;
      using W = std::conditional_t<std::is_signed_v<S>, int64_t, uint64_t>;
      d[i] = static_cast<S>(static_cast<W>(d[i]) / static_cast<W>(nranks));
    }
  }
}

// ---- Launch ----

// Multiprocessors of the current device, asked once per device.
int smCount() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices] = {};
  int dev = 0;
  ARL_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev >= kMaxDevices) dev = kMaxDevices - 1;
  int sms = cached[dev].load(std::memory_order_relaxed);
  if (sms == 0) {
    ARL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cached[dev].store(sms, std::memory_order_relaxed);
  }
  return sms;
}

// Blocks of `kernel` that fit on one multiprocessor at once (registers limit it), asked once
// per kernel: a grid of one resident wave strides over the rest, so no block waits for
// another wave to start.
template <typename K>
int residentBlocksPerSm(K kernel) {
  int n = 0;
  ARL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, 0));
  return std::max(n, 1);
}

// Blocks for `units` of per-thread work: enough to cover them, at most one resident wave.
unsigned gridFor(size_t units, int blocksPerSm) {
  const size_t want = (units + kThreads - 1) / kThreads;
  const size_t cap = static_cast<size_t>(smCount()) * static_cast<size_t>(blocksPerSm);
  return static_cast<unsigned>(std::max<size_t>(1, std::min(want, cap)));
}

void checkLaunch(const char* what) { detail::check(cudaGetLastError(), what); }

template <typename E, typename Op>
void launchTyped(void* dst, const void* a, const void* b, size_t n, cudaStream_t stream) {
  using S = typename E::S;
  constexpr size_t kLanes = kVecBytes / sizeof(S);
  const auto ud = reinterpret_cast<uintptr_t>(dst);
  const auto ua = reinterpret_cast<uintptr_t>(a);
  const auto ub = reinterpret_cast<uintptr_t>(b);
  ARL_ENFORCE(ud % sizeof(S) == 0 && ua % sizeof(S) == 0 && ub % sizeof(S) == 0,
              "reduce operands " << dst << ", " << a << ", " << b << " are not aligned to their "
                                 << sizeof(S) << "-byte elements");
  size_t head = n;
  size_t nvec = 0;
  if (ud % kVecBytes == ua % kVecBytes && ua % kVecBytes == ub % kVecBytes) {
    head = std::min(n, ((kVecBytes - ud % kVecBytes) % kVecBytes) / sizeof(S));
    nvec = (n - head) / kLanes;
  }
  const size_t scalar = n - nvec * kLanes;
  const size_t units = std::max((nvec + kUnroll - 1) / kUnroll, scalar);
  static const int perSm = residentBlocksPerSm(reduceKernel<E, Op>);
  reduceKernel<E, Op><<<gridFor(units, perSm), kThreads, 0, stream>>>(
      static_cast<S*>(dst), static_cast<const S*>(a), static_cast<const S*>(b), n, head, nvec);
  checkLaunch("reduceKernel<<<>>>");
}

template <DataType T>
void launchForType(void* dst, const void* a, const void* b, size_t n, RedOp op, cudaStream_t s) {
  using E = Elem<T>;
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg: launchTyped<E, SumOp>(dst, a, b, n, s); return;
    case RedOp::Prod: launchTyped<E, ProdOp>(dst, a, b, n, s); return;
    case RedOp::Min: launchTyped<E, MinMaxOp<true>>(dst, a, b, n, s); return;
    case RedOp::Max: launchTyped<E, MinMaxOp<false>>(dst, a, b, n, s); return;
  }
  ARL_ENFORCE(false, "unknown RedOp " << static_cast<int>(op));
}

template <DataType T>
void launchDivide(void* dst, size_t n, int nranks, cudaStream_t s) {
  using E = Elem<T>;
  ARL_ENFORCE(reinterpret_cast<uintptr_t>(dst) % sizeof(typename E::S) == 0,
              "finalize of " << dst << " not aligned to its elements");
  static const int perSm = residentBlocksPerSm(divideKernel<E>);
  divideKernel<E>
      <<<gridFor(n, perSm), kThreads, 0, s>>>(static_cast<typename E::S*>(dst), n, nranks);
  checkLaunch("divideKernel<<<>>>");
}

}  // namespace

void launchReduce(void* dst, const void* a, const void* b, size_t count, DataType t, RedOp op,
                  CUstream_st* stream) {
  if (count == 0) return;
  ARL_ENFORCE(dst != nullptr && a != nullptr && b != nullptr,
              "null operand for " << count << " elements");
  switch (t) {
    case DataType::Float: launchForType<DataType::Float>(dst, a, b, count, op, stream); return;
    case DataType::Double: launchForType<DataType::Double>(dst, a, b, count, op, stream); return;
    case DataType::Half: launchForType<DataType::Half>(dst, a, b, count, op, stream); return;
    case DataType::BFloat16:
      launchForType<DataType::BFloat16>(dst, a, b, count, op, stream);
      return;
    case DataType::Int32: launchForType<DataType::Int32>(dst, a, b, count, op, stream); return;
    case DataType::Int64: launchForType<DataType::Int64>(dst, a, b, count, op, stream); return;
    case DataType::Uint8: launchForType<DataType::Uint8>(dst, a, b, count, op, stream); return;
  }
  ARL_ENFORCE(false, "unknown DataType " << static_cast<int>(t));
}

void launchFinalize(void* dst, size_t count, DataType t, RedOp op, int nranks,
                    CUstream_st* stream) {
  ARL_ENFORCE(nranks >= 1, "finalize with nranks " << nranks);
  if (op != RedOp::Avg || count == 0) return;
  switch (t) {
    case DataType::Float: launchDivide<DataType::Float>(dst, count, nranks, stream); return;
    case DataType::Double: launchDivide<DataType::Double>(dst, count, nranks, stream); return;
    case DataType::Half: launchDivide<DataType::Half>(dst, count, nranks, stream); return;
    case DataType::BFloat16: launchDivide<DataType::BFloat16>(dst, count, nranks, stream); return;
    case DataType::Int32: launchDivide<DataType::Int32>(dst, count, nranks, stream); return;
    case DataType::Int64: launchDivide<DataType::Int64>(dst, count, nranks, stream); return;
    case DataType::Uint8: launchDivide<DataType::Uint8>(dst, count, nranks, stream); return;
  }
  ARL_ENFORCE(false, "unknown DataType " << static_cast<int>(t));
}

}  // namespace arl::gpu
