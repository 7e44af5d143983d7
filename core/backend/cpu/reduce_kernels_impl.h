// Body of the reduction kernels, included by reduce_kernels.cpp once per instruction set,
// inside that set's namespace (and, for AVX2, inside a `#pragma GCC target` region), so one
// source yields every build. No include guard on purpose.
//
// Before inclusion: ARL_VEC_BYTES (16 or 32) is the width of one vector of compute values,
// ARL_USE_F16C says whether VCVTPH2PS/VCVTPS2PH may convert half, and ARL_STREAM_X86 whether
// x86 non-temporal stores exist. Vectors are GCC vector extensions: explicit SIMD that does
// not depend on the auto-vectoriser's cost model (-O2 in the dev build) or on -march.

constexpr size_t kVecBytes = ARL_VEC_BYTES;

template <typename T, size_t Bytes>
struct VecOf {
  // GCC ignores vector_size on a dependent type in a using-alias; a typedef takes it.
  // NOLINTNEXTLINE(modernize-use-using)
  typedef T type __attribute__((vector_size(Bytes)));
};
template <typename T>
using Vec = typename VecOf<T, kVecBytes>::type;

// Reinterprets the bits of a value as another type of the same size. Defined here rather
// than using std::bit_cast so that it is compiled for this file's instruction set.
template <typename To, typename From>
inline To vcast(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To t;
  std::memcpy(&t, &v, sizeof(To));
  return t;
}

template <typename V, typename T>
inline V broadcast(T x) {
  V v = {};
  return v + x;
}

// ---- Storage formats ----
//
// A format loads one vector of storage (kVecBytes bytes, kLanes elements) as kParts vectors
// of compute values and stores them back. Lanes may be permuted between storage and compute
// vectors as long as pack() inverts unpack(): every operator works lane by lane.

template <typename C, size_t N>
struct Parts {
  Vec<C> v[N];
};

// Types computed in themselves. S is the stored type; C the compute type (integers compute in
// their unsigned twin so that sum and product wrap); K the type compared by min/max.
template <typename S, typename C, typename K>
struct Plain {
  using Storage = S;
  using Compute = C;
  using Compare = K;
  using Packed = Vec<C>;
  static constexpr size_t kParts = 1;
  static constexpr size_t kLanes = kVecBytes / sizeof(S);
  static Parts<C, 1> unpack(Packed p) { return {{p}}; }
  static Packed pack(const Parts<C, 1>& x) { return x.v[0]; }
};

// 16-bit floats computed in float. The storage vector is viewed as 32-bit pairs: part 0 holds
// the even elements, part 1 the odd ones, so no lane crosses a 32-bit boundary.
struct Float16Base {
  using Storage = uint16_t;
  using Compute = float;
  using Compare = float;
  using Packed = Vec<uint32_t>;
  using U = Vec<uint32_t>;
  static constexpr size_t kParts = 2;
  static constexpr size_t kLanes = kVecBytes / sizeof(uint16_t);
};

// binary16 bits in the low half of each lane -> float, as VCVTPH2PS (see halfToFloat()).
inline Vec<float> halfBitsToFloat(Vec<uint32_t> h) {
  using U = Vec<uint32_t>;
  const U sign = (h & 0x8000u) << 16;
  const U em = h & 0x7fffu;
  const U normal = (em << 13) + (112u << 23);
  const U quiet = vcast<U>(em > 0x7c00u) & 0x400000u;
  const U special = (em << 13) | 0x7f800000u | quiet;
  // Subnormals: em * 2^-24 through an exact int -> float conversion.
  const Vec<float> subf = __builtin_convertvector(vcast<Vec<int32_t>>(em), Vec<float>) * 0x1p-24f;
  const U sub = vcast<U>(subf);
  const U mag = em < 0x400u ? sub : (em >= 0x7c00u ? special : normal);
  return vcast<Vec<float>>(mag | sign);
}

// float -> binary16 bits in the low half of each lane, round to nearest even, as VCVTPS2PH
// (see floatToHalf()).
inline Vec<uint32_t> floatToHalfBits(Vec<float> v) {
  using U = Vec<uint32_t>;
  const U bits = vcast<U>(v);
  const U sign = (bits >> 16) & 0x8000u;
  const U abs = bits & 0x7fffffffu;
  const U nan = 0x7e00u | ((abs >> 13) & 0x3ffu);
  const U normal = (abs - 0x38000000u + 0xfffu + ((abs >> 13) & 1u)) >> 13;
  const U e = abs >> 23;
  const U m = (abs & 0x7fffffu) | 0x800000u;
  U shift = 126u - e;  // wraps for large e; those lanes take another path below
  shift = shift > 25u ? broadcast<U>(25u) : shift;
  const U q = m >> shift;
  const U rem = m & ((1u << shift) - 1u);
  const U halfway = 1u << (shift - 1u);
  const U up = vcast<U>((rem > halfway) | ((rem == halfway) & ((q & 1u) != 0u))) & 1u;
  const U sub = q + up;
  const U mag = abs > 0x7f800000u ? nan
                                  : (abs >= 0x477ff000u ? broadcast<U>(0x7c00u)
                                                        : (abs >= 0x38800000u ? normal : sub));
  return mag | sign;
}

// binary16 computed in float.
struct HalfFormat : Float16Base {
#if ARL_USE_F16C
  // F16C converts 8 contiguous halves: part 0 is the low 128 bits, part 1 the high.
  static Parts<float, 2> unpack(Packed p) {
    const __m256i x = vcast<__m256i>(p);
    return {
        { vcast<Vec<float>>(_mm256_cvtph_ps(_mm256_castsi256_si128(x))),
          vcast<Vec<float>>(_mm256_cvtph_ps(_mm256_extracti128_si256(x, 1))) }};
  }
  static Packed pack(const Parts<float, 2>& f) {
    const __m128i lo = _mm256_cvtps_ph(vcast<__m256>(f.v[0]), _MM_FROUND_TO_NEAREST_INT);
    const __m128i hi = _mm256_cvtps_ph(vcast<__m256>(f.v[1]), _MM_FROUND_TO_NEAREST_INT);
    return vcast<Packed>(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
  }
#else
  static Parts<float, 2> unpack(Packed p) {
    return {{halfBitsToFloat(p & 0xffffu), halfBitsToFloat(p >> 16)}};
  }
  static Packed pack(const Parts<float, 2>& f) {
    return floatToHalfBits(f.v[0]) | (floatToHalfBits(f.v[1]) << 16);
  }
#endif
};

// bfloat16 computed in float: the top half of a float, rounded to nearest even.
struct BFloat16Format : Float16Base {
  static Parts<float, 2> unpack(Packed p) {
    return {{vcast<Vec<float>>(p << 16), vcast<Vec<float>>(p & 0xffff0000u)}};
  }
  // Rounds in place: the bfloat16 is the top half of the result (see floatToBf16()).
  static U round(Vec<float> v) {
    const U bits = vcast<U>(v);
    const U rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
    return (bits & 0x7fffffffu) > 0x7f800000u ? (bits | 0x400000u) : rounded;
  }
  static Packed pack(const Parts<float, 2>& f) {
    return (round(f.v[0]) >> 16) | (round(f.v[1]) & 0xffff0000u);
  }
};

template <DataType T>
struct FormatOf;
template <>
struct FormatOf<DataType::Float> : Plain<float, float, float> {};
template <>
struct FormatOf<DataType::Double> : Plain<double, double, double> {};
template <>
struct FormatOf<DataType::Half> : HalfFormat {};
template <>
struct FormatOf<DataType::BFloat16> : BFloat16Format {};
template <>
struct FormatOf<DataType::Int32> : Plain<int32_t, uint32_t, int32_t> {};
template <>
struct FormatOf<DataType::Int64> : Plain<int64_t, uint64_t, int64_t> {};
template <>
struct FormatOf<DataType::Uint8> : Plain<uint8_t, uint8_t, uint8_t> {};

// ---- Operators on compute vectors ----

template <typename F>
inline constexpr bool kFloating = std::is_floating_point_v<typename F::Compute>;

template <typename F>
using BitsVec = Vec<
    std::conditional_t<sizeof(typename F::Compute) == 8, uint64_t,
                       std::conditional_t<sizeof(typename F::Compute) == 4, uint32_t, uint8_t>>>;

struct SumOp {
  template <typename F>
  static Vec<typename F::Compute> apply(Vec<typename F::Compute> a, Vec<typename F::Compute> b) {
    return a + b;
  }
};

struct ProdOp {
  template <typename F>
  static Vec<typename F::Compute> apply(Vec<typename F::Compute> a, Vec<typename F::Compute> b) {
    return a * b;
  }
};

// Floating min/max follow minNum()/maxNum() in numeric.h: a NaN operand is ignored, and for
// equal operands OR (min) / AND (max) of the bits orders -0 below +0.
template <bool kMin>
struct MinMaxOp {
  template <typename F>
  static Vec<typename F::Compute> apply(Vec<typename F::Compute> a, Vec<typename F::Compute> b) {
    using C = Vec<typename F::Compute>;
    if constexpr (kFloating<F>) {
      using B = BitsVec<F>;
      const B ab = vcast<B>(a);
      const B bb = vcast<B>(b);
      const C tie = vcast<C>(kMin ? (ab | bb) : (ab & bb));
      C m = (kMin ? a < b : a > b) ? a : b;
      m = a == b ? tie : m;
      return b != b ? a : m;
    } else {
      using K = Vec<typename F::Compare>;
      const K ka = vcast<K>(a);
      const K kb = vcast<K>(b);
      return (kMin ? ka < kb : ka > kb) ? a : b;
    }
  }
};

// ---- Loops ----

// Non-temporal store of one packed vector; p is aligned to its size.
template <typename P>
inline void streamStore(unsigned char* p, P v) {
#if ARL_STREAM_X86
  if constexpr (sizeof(P) == 32) {
#if ARL_VEC_BYTES == 32
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), vcast<__m256i>(v));
#endif
  } else if constexpr (sizeof(P) == 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), vcast<__m128i>(v));
  } else {
    std::memcpy(p, &v, sizeof(P));
  }
#else
  std::memcpy(p, &v, sizeof(P));
#endif
}

template <typename F, typename Op>
inline typename F::Packed combine(const unsigned char* a, const unsigned char* b) {
  typename F::Packed pa, pb;
  std::memcpy(&pa, a, sizeof(pa));
  std::memcpy(&pb, b, sizeof(pb));
  auto x = F::unpack(pa);
  const auto y = F::unpack(pb);
  for (size_t k = 0; k < F::kParts; ++k) {
    x.v[k] = Op::template apply<F>(x.v[k], y.v[k]);
  }
  return F::pack(x);
}

// Fewer than a vector of elements: through zero-padded temporaries, with the same arithmetic
// as full vectors.
template <typename F, typename Op>
void reducePartial(unsigned char* d, const unsigned char* a, const unsigned char* b, size_t n) {
  using P = typename F::Packed;
  const size_t bytes = n * sizeof(typename F::Storage);
  unsigned char ta[sizeof(P)] = {};
  unsigned char tb[sizeof(P)] = {};
  std::memcpy(ta, a, bytes);
  std::memcpy(tb, b, bytes);
  const P r = combine<F, Op>(ta, tb);
  std::memcpy(d, &r, bytes);
}

template <typename F, typename Op>
void reduceLoop(unsigned char* d, const unsigned char* a, const unsigned char* b, size_t n,
                bool stream) {
  using P = typename F::Packed;
  constexpr size_t kLanes = F::kLanes;
  constexpr size_t kStep = sizeof(P);
  static_assert(kStep == kLanes * sizeof(typename F::Storage));
  size_t i = 0;
#if ARL_STREAM_X86
  if (stream && reinterpret_cast<uintptr_t>(d) % sizeof(typename F::Storage) == 0) {
    // Bring dst to the packed vector's alignment, then write whole vectors around the caches.
    const size_t misalign = reinterpret_cast<uintptr_t>(d) % kStep;
    size_t head = misalign == 0 ? 0 : (kStep - misalign) / sizeof(typename F::Storage);
    if (head > n) {
      head = n;
    }
    if (head > 0) {
      reducePartial<F, Op>(d, a, b, head);
    }
    i = head;
    for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
      const size_t o = i * sizeof(typename F::Storage);
      const P r0 = combine<F, Op>(a + o, b + o);
      const P r1 = combine<F, Op>(a + o + kStep, b + o + kStep);
      streamStore(d + o, r0);
      streamStore(d + o + kStep, r1);
    }
    for (; i + kLanes <= n; i += kLanes) {
      const size_t o = i * sizeof(typename F::Storage);
      streamStore(d + o, combine<F, Op>(a + o, b + o));
    }
    _mm_sfence();
  }
#else
  (void)stream;
#endif
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const size_t o = i * sizeof(typename F::Storage);
    const P r0 = combine<F, Op>(a + o, b + o);
    const P r1 = combine<F, Op>(a + o + kStep, b + o + kStep);
    std::memcpy(d + o, &r0, kStep);
    std::memcpy(d + o + kStep, &r1, kStep);
  }
  for (; i + kLanes <= n; i += kLanes) {
    const size_t o = i * sizeof(typename F::Storage);
    const P r = combine<F, Op>(a + o, b + o);
    std::memcpy(d + o, &r, kStep);
  }
  if (i < n) {
    const size_t o = i * sizeof(typename F::Storage);
    reducePartial<F, Op>(d + o, a + o, b + o, n - i);
  }
}

template <DataType T>
void reduceType(unsigned char* d, const unsigned char* a, const unsigned char* b, size_t n,
                RedOp op, bool stream) {
  using F = FormatOf<T>;
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg: reduceLoop<F, SumOp>(d, a, b, n, stream); return;
    case RedOp::Prod: reduceLoop<F, ProdOp>(d, a, b, n, stream); return;
    case RedOp::Min: reduceLoop<F, MinMaxOp<true>>(d, a, b, n, stream); return;
    case RedOp::Max: reduceLoop<F, MinMaxOp<false>>(d, a, b, n, stream); return;
  }
  ARL_ENFORCE(false, "unknown RedOp " << static_cast<int>(op));
}

template <typename F>
inline typename F::Packed divide(typename F::Packed p, Vec<typename F::Compute> div) {
  auto x = F::unpack(p);
  for (size_t k = 0; k < F::kParts; ++k) {
    x.v[k] = x.v[k] / div;
  }
  return F::pack(x);
}

// Avg's division of floating types, in their compute precision (float for half and
// bfloat16, rounded back to nearest even).
template <DataType T>
void divideFloating(unsigned char* d, size_t n, int nranks) {
  using F = FormatOf<T>;
  using C = typename F::Compute;
  using P = typename F::Packed;
  const Vec<C> div = broadcast<Vec<C>>(static_cast<C>(nranks));
  size_t i = 0;
  for (; i + F::kLanes <= n; i += F::kLanes) {
    unsigned char* p = d + i * sizeof(typename F::Storage);
    P v;
    std::memcpy(&v, p, sizeof(P));
    v = divide<F>(v, div);
    std::memcpy(p, &v, sizeof(P));
  }
  if (i < n) {
    unsigned char* p = d + i * sizeof(typename F::Storage);
    const size_t bytes = (n - i) * sizeof(typename F::Storage);
    P v = {};
    std::memcpy(&v, p, bytes);
    // Padding lanes hold 0 (or +0.0): dividing them is harmless.
    v = divide<F>(v, div);
    std::memcpy(p, &v, bytes);
  }
}

// Avg's division of integer types: truncating, signed for int32/int64, unsigned for uint8.
template <typename S>
void divideInteger(unsigned char* d, size_t n, int nranks) {
  using W = std::conditional_t<std::is_signed_v<S>, int64_t, uint64_t>;
  const W div = static_cast<W>(nranks);
  for (size_t i = 0; i < n; ++i) {
    S v;
    std::memcpy(&v, d + i * sizeof(S), sizeof(S));
    v = static_cast<S>(static_cast<W>(v) / div);
    std::memcpy(d + i * sizeof(S), &v, sizeof(S));
  }
}

void reduceEntry(void* dst, const void* a, const void* b, size_t count, DataType t, RedOp op,
                 bool stream) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  switch (t) {
    case DataType::Float: reduceType<DataType::Float>(d, pa, pb, count, op, stream); return;
    case DataType::Double: reduceType<DataType::Double>(d, pa, pb, count, op, stream); return;
    case DataType::Half: reduceType<DataType::Half>(d, pa, pb, count, op, stream); return;
    case DataType::BFloat16: reduceType<DataType::BFloat16>(d, pa, pb, count, op, stream); return;
    case DataType::Int32: reduceType<DataType::Int32>(d, pa, pb, count, op, stream); return;
    case DataType::Int64: reduceType<DataType::Int64>(d, pa, pb, count, op, stream); return;
    case DataType::Uint8: reduceType<DataType::Uint8>(d, pa, pb, count, op, stream); return;
  }
  ARL_ENFORCE(false, "unknown DataType " << static_cast<int>(t));
}

void finalizeEntry(void* dst, size_t count, DataType t, RedOp op, int nranks) {
  ARL_ENFORCE(nranks >= 1, "nranks " << nranks);
  if (op != RedOp::Avg || count == 0) {
    return;
  }
  auto* d = static_cast<unsigned char*>(dst);
  switch (t) {
    case DataType::Float: divideFloating<DataType::Float>(d, count, nranks); return;
    case DataType::Double: divideFloating<DataType::Double>(d, count, nranks); return;
    case DataType::Half: divideFloating<DataType::Half>(d, count, nranks); return;
    case DataType::BFloat16: divideFloating<DataType::BFloat16>(d, count, nranks); return;
    case DataType::Int32: divideInteger<int32_t>(d, count, nranks); return;
    case DataType::Int64: divideInteger<int64_t>(d, count, nranks); return;
    case DataType::Uint8: divideInteger<uint8_t>(d, count, nranks); return;
  }
  ARL_ENFORCE(false, "unknown DataType " << static_cast<int>(t));
}
