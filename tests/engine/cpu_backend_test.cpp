// The CPU backend's kernels against the scalar reference of numeric.h (every type, operator,
// kernel build, in and out of place, odd lengths, unaligned payloads), and the reference
// itself against hand-computed roundings.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "base/errors.h"
#include "exec/numeric.h"
#include "base/types.h"

namespace arl {
namespace {

using Bytes = std::vector<unsigned char>;

Bytes randomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Bytes b(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t r = rng();
    std::memcpy(b.data() + i, &r, std::min<size_t>(8, n - i));
  }
  return b;
}

template <typename T>
Bytes bytesOf(std::initializer_list<T> values) {
  Bytes b(values.size() * sizeof(T));
  size_t i = 0;
  for (T v : values) {
    std::memcpy(b.data() + sizeof(T) * i++, &v, sizeof(T));
  }
  return b;
}

template <typename T>
T elem(const Bytes& b, size_t i) {
  T v;
  std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
  return v;
}

// Every kernel build this machine runs, each with and without non-temporal stores.
std::vector<CpuBackendOptions> allBackendOptions() {
  std::vector<CpuBackendOptions> all;
  for (CpuKernels k : {CpuKernels::Portable, CpuKernels::Avx2}) {
    if (!CpuBackend::kernelsSupported(k)) {
      continue;
    }
    for (size_t threshold : {size_t{0}, std::numeric_limits<size_t>::max()}) {
      CpuBackendOptions o;
      o.kernels = k;
      o.streamThresholdBytes = threshold;
      all.push_back(o);
    }
  }
  return all;
}

std::string describe(const CpuBackendOptions& o) {
  return std::string(o.kernels == CpuKernels::Avx2 ? "avx2" : "portable") +
         (o.streamThresholdBytes == 0 ? "+stream" : "");
}

// Index of the first element where got and want differ (sameValue), or -1.
int64_t firstMismatch(DataType t, const unsigned char* got, const unsigned char* want,
                      size_t count) {
  const size_t es = dtypeSize(t);
  if (count == 0 || std::memcmp(got, want, count * es) == 0) {
    return -1;
  }
  for (size_t i = 0; i < count; ++i) {
    if (!sameValue(t, got + i * es, want + i * es)) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

std::string hexOf(DataType t, const unsigned char* p) {
  std::string s = "0x";
  static const char* kDigits = "0123456789abcdef";
  for (size_t i = dtypeSize(t); i-- > 0;) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

// Runs dst = local op payload on the backend, out of place or in place, with dst and local
// one element past the backend's 64-byte alignment and the payload one byte past a host
// allocation, and returns dst.
Bytes runReduce(CpuBackend& be, DataType t, RedOp op, const Bytes& local, const Bytes& payload,
                bool inPlace) {
  const size_t es = dtypeSize(t);
  const size_t bytes = local.size();
  const size_t count = bytes / es;
  auto* l = static_cast<unsigned char*>(be.allocate(bytes + 64));
  auto* d = static_cast<unsigned char*>(be.allocate(bytes + 64));
  unsigned char* lp = l + es;
  unsigned char* dp = inPlace ? lp : d + es;
  if (bytes > 0) {
    be.upload(lp, local.data(), bytes);
  }
  Bytes host(bytes + 1);
  if (bytes > 0) {
    std::memcpy(host.data() + 1, payload.data(), bytes);
  }
  be.wait(be.reduceFromHost(dp, lp, host.data() + 1, count, t, op));
  Bytes out(bytes);
  if (bytes > 0) {
    be.download(out.data(), dp, bytes);
  }
  be.deallocate(l);
  be.deallocate(d);
  return out;
}

Bytes referenceReduce(DataType t, RedOp op, const Bytes& a, const Bytes& b) {
  const size_t es = dtypeSize(t);
  Bytes out(a.size());
  for (size_t i = 0; i < a.size(); i += es) {
    reduceScalar(t, op, &a[i], &b[i], &out[i]);
  }
  return out;
}

// ---- Kernels against the scalar reference: every type x operator ----

struct TypeOp {
  DataType type;
  RedOp op;
};

class CpuBackendReduce : public ::testing::TestWithParam<TypeOp> {};

TEST_P(CpuBackendReduce, MatchesScalarReferenceForEveryKernelAndLength) {
  const auto [t, op] = GetParam();
  const size_t es = dtypeSize(t);
  const auto seed = static_cast<uint64_t>(t) * 16 + static_cast<uint64_t>(op);
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000003}}) {
    // Random bit patterns: every class of value (NaN, infinity, subnormal, negative).
    const Bytes a = randomBytes(count * es, seed * 2 + 1);
    const Bytes b = randomBytes(count * es, seed * 2 + 2);
    const Bytes want = referenceReduce(t, op, a, b);
    for (const CpuBackendOptions& o : allBackendOptions()) {
      CpuBackend be(o);
      for (bool inPlace : {false, true}) {
        const Bytes got = runReduce(be, t, op, a, b, inPlace);
        const int64_t bad = firstMismatch(t, got.data(), want.data(), count);
        ASSERT_EQ(bad, -1) << describe(o) << (inPlace ? " in place" : " out of place") << " count "
                           << count << " element " << bad << ": " << hexOf(t, &a[bad * es]) << " "
                           << toString(op) << " " << hexOf(t, &b[bad * es]) << " gave "
                           << hexOf(t, &got[bad * es]) << ", want " << hexOf(t, &want[bad * es]);
      }
    }
  }
}

std::vector<TypeOp> allTypeOps() {
  std::vector<TypeOp> all;
  for (DataType t : kAllDataTypes) {
    for (RedOp op : kAllRedOps) {
      all.push_back({t, op});
    }
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, CpuBackendReduce, ::testing::ValuesIn(allTypeOps()),
                         [](const ::testing::TestParamInfo<TypeOp>& info) {
                           return std::string(toString(info.param.type)) + "_" +
                                  std::string(toString(info.param.op));
                         });

// Every 16-bit pattern through each kernel build's conversions: x + (-0) is x for every
// value (NaN stays NaN), so the sum shows what unpack/round/pack does to each pattern.
TEST(CpuBackendConversions, EveryHalfAndBFloat16PatternSurvivesTheKernels) {
  Bytes all(65536 * 2);
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    std::memcpy(&all[i * 2], &h, 2);
  }
  for (DataType t : {DataType::Half, DataType::BFloat16}) {
    const uint16_t negZero = 0x8000;
    Bytes zeros(all.size());
    for (size_t i = 0; i < zeros.size(); i += 2) {
      std::memcpy(&zeros[i], &negZero, 2);
    }
    for (const CpuBackendOptions& o : allBackendOptions()) {
      CpuBackend be(o);
      const Bytes got = runReduce(be, t, RedOp::Sum, all, zeros, false);
      for (uint32_t i = 0; i < 65536; ++i) {
        const auto h = static_cast<uint16_t>(i);
        const uint16_t g = elem<uint16_t>(got, i);
        const bool nan = t == DataType::Half ? halfIsNan(h) : bf16IsNan(h);
        if (nan) {
          ASSERT_TRUE(t == DataType::Half ? halfIsNan(g) : bf16IsNan(g))
              << describe(o) << " " << toString(t) << " NaN pattern " << i << " gave " << g;
        } else {
          ASSERT_EQ(g, h) << describe(o) << " " << toString(t) << " pattern " << i;
        }
      }
    }
  }
}

// ---- Hand-computed cases: the reference and every kernel build agree with them ----

// Checks reduceScalar and every backend on the element pairs (a[i], b[i]) -> want[i].
void expectReduce(DataType t, RedOp op, const Bytes& a, const Bytes& b, const Bytes& want) {
  const size_t es = dtypeSize(t);
  const size_t count = a.size() / es;
  const Bytes ref = referenceReduce(t, op, a, b);
  for (size_t i = 0; i < count; ++i) {
    EXPECT_TRUE(sameValue(t, &ref[i * es], &want[i * es]))
        << "reference " << toString(t) << " " << hexOf(t, &a[i * es]) << " " << toString(op) << " "
        << hexOf(t, &b[i * es]) << " gave " << hexOf(t, &ref[i * es]) << ", want "
        << hexOf(t, &want[i * es]);
  }
  for (const CpuBackendOptions& o : allBackendOptions()) {
    CpuBackend be(o);
    for (bool inPlace : {false, true}) {
      const Bytes got = runReduce(be, t, op, a, b, inPlace);
      const int64_t bad = firstMismatch(t, got.data(), want.data(), count);
      EXPECT_EQ(bad, -1) << describe(o) << " " << toString(t) << " " << toString(op) << " element "
                         << bad;
    }
  }
}

TEST(CpuBackendRounding, HalfSumRoundsToNearestEven) {
  expectReduce(DataType::Half, RedOp::Sum,
               bytesOf<uint16_t>({
                   0x6800,  // 2048 + 1 = 2049: tie between 2048 and 2050 -> 2048 (even)
                   0x6801,  // 2050 + 1 = 2051: tie between 2050 and 2052 -> 2052 (even)
                   0x7bff,  // 65504 + 8 = 65512: below the tie -> 65504
                   0x7bff,  // 65504 + 16 = 65520: the tie with 2^16 -> +inf
                   0xfbff,  // -65504 - 16 -> -inf
                   0x0001,  // 2^-24 + 2^-24 = 2^-23 (subnormals)
                   0x03ff,  // largest subnormal + 2^-24 = smallest normal
                   0x3c00,  // 1 + 2^-11 (a subnormal-free tie) -> 1
               }),
               bytesOf<uint16_t>({0x3c00, 0x3c00, 0x4800, 0x4c00, 0xcc00, 0x0001, 0x0001, 0x1000}),
               bytesOf<uint16_t>({0x6800, 0x6802, 0x7bff, 0x7c00, 0xfc00, 0x0002, 0x0400, 0x3c00}));
}

TEST(CpuBackendRounding, HalfNaNAndInfinityPropagate) {
  expectReduce(DataType::Half, RedOp::Sum,
               bytesOf<uint16_t>({0x7e00, 0x3c00, 0x7c00, 0x7c01, 0x7c00}),
               bytesOf<uint16_t>({0x3c00, 0xfe00, 0xfc00, 0x0000, 0x3c00}),
               bytesOf<uint16_t>({0x7e00, 0x7e00, 0x7e00, 0x7e00, 0x7c00}));
  expectReduce(DataType::Half, RedOp::Prod, bytesOf<uint16_t>({0x7e00, 0x7c00, 0x5c00}),
               bytesOf<uint16_t>({0x0000, 0x0000, 0x5c00}),
               // NaN * 0 = NaN, inf * 0 = NaN, 256 * 256 overflows to inf
               bytesOf<uint16_t>({0x7e00, 0x7e00, 0x7c00}));
}

TEST(CpuBackendRounding, BFloat16SumRoundsToNearestEven) {
  expectReduce(DataType::BFloat16, RedOp::Sum,
               bytesOf<uint16_t>({
                   0x4380,  // 256 + 1 = 257: tie between 256 and 258 -> 256
                   0x4381,  // 258 + 1 = 259: tie between 258 and 260 -> 260
                   0x7f7f,  // max + half an ulp: tie with infinity -> +inf
                   0x7f7f,  // max + max overflows float -> +inf
                   0x7fc0,  // NaN + 1 -> NaN
                   0x0001,  // subnormal + subnormal
               }),
               bytesOf<uint16_t>({0x3f80, 0x3f80, 0x7b00, 0x7f7f, 0x3f80, 0x0001}),
               bytesOf<uint16_t>({0x4380, 0x4382, 0x7f80, 0x7f80, 0x7fc0, 0x0002}));
}

TEST(CpuBackendRounding, FloatMinMaxIgnoreNaNAndOrderSignedZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Bytes a = bytesOf<float>({nan, 1.0f, -0.0f, 0.0f, -inf, nan, -3.0f});
  const Bytes b = bytesOf<float>({1.0f, nan, 0.0f, -0.0f, 5.0f, nan, 2.0f});
  expectReduce(DataType::Float, RedOp::Min, a, b,
               bytesOf<float>({1.0f, 1.0f, -0.0f, -0.0f, -inf, nan, -3.0f}));
  expectReduce(DataType::Float, RedOp::Max, a, b,
               bytesOf<float>({1.0f, 1.0f, 0.0f, 0.0f, 5.0f, nan, 2.0f}));
  const double dnan = std::numeric_limits<double>::quiet_NaN();
  expectReduce(DataType::Double, RedOp::Min, bytesOf<double>({dnan, 0.0, -1e300}),
               bytesOf<double>({-2.0, -0.0, 1e300}), bytesOf<double>({-2.0, -0.0, -1e300}));
  // Half min/max select one of the operands exactly.
  expectReduce(DataType::Half, RedOp::Max, bytesOf<uint16_t>({0x7e00, 0x8000, 0xbc00}),
               bytesOf<uint16_t>({0xbc00, 0x0000, 0xc000}),
               bytesOf<uint16_t>({0xbc00, 0x0000, 0xbc00}));
}

TEST(CpuBackendRounding, IntegersWrapAndCompareWithTheirSign) {
  constexpr int32_t i32max = std::numeric_limits<int32_t>::max();
  constexpr int32_t i32min = std::numeric_limits<int32_t>::min();
  constexpr int64_t i64max = std::numeric_limits<int64_t>::max();
  constexpr int64_t i64min = std::numeric_limits<int64_t>::min();
  expectReduce(DataType::Int32, RedOp::Sum, bytesOf<int32_t>({i32max, i32min, -5}),
               bytesOf<int32_t>({1, -1, 3}), bytesOf<int32_t>({i32min, i32max, -2}));
  expectReduce(DataType::Int32, RedOp::Prod, bytesOf<int32_t>({65536, -65536, i32min, -3}),
               bytesOf<int32_t>({65536, 65537, -1, 7}), bytesOf<int32_t>({0, -65536, i32min, -21}));
  expectReduce(DataType::Int32, RedOp::Min, bytesOf<int32_t>({-5, -5, i32min}),
               bytesOf<int32_t>({3, -7, i32max}), bytesOf<int32_t>({-5, -7, i32min}));
  expectReduce(DataType::Int32, RedOp::Max, bytesOf<int32_t>({-5, -5, i32min}),
               bytesOf<int32_t>({3, -7, i32max}), bytesOf<int32_t>({3, -5, i32max}));
  expectReduce(DataType::Int64, RedOp::Sum, bytesOf<int64_t>({i64max, i64min}),
               bytesOf<int64_t>({1, -1}), bytesOf<int64_t>({i64min, i64max}));
  expectReduce(
      DataType::Int64, RedOp::Prod, bytesOf<int64_t>({int64_t{1} << 32, -(int64_t{1} << 40)}),
      bytesOf<int64_t>({int64_t{1} << 32, 3}), bytesOf<int64_t>({0, -3 * (int64_t{1} << 40)}));
  expectReduce(DataType::Int64, RedOp::Min, bytesOf<int64_t>({-1, i64max}),
               bytesOf<int64_t>({1, i64min}), bytesOf<int64_t>({-1, i64min}));
  expectReduce(DataType::Int64, RedOp::Max, bytesOf<int64_t>({-1, i64max}),
               bytesOf<int64_t>({1, i64min}), bytesOf<int64_t>({1, i64max}));
  expectReduce(DataType::Uint8, RedOp::Sum, bytesOf<uint8_t>({200, 255}),
               bytesOf<uint8_t>({100, 1}), bytesOf<uint8_t>({44, 0}));
  expectReduce(DataType::Uint8, RedOp::Prod, bytesOf<uint8_t>({16, 15}), bytesOf<uint8_t>({16, 17}),
               bytesOf<uint8_t>({0, 255}));
  // uint8 compares unsigned: 200 is larger than 3.
  expectReduce(DataType::Uint8, RedOp::Min, bytesOf<uint8_t>({200}), bytesOf<uint8_t>({3}),
               bytesOf<uint8_t>({3}));
  expectReduce(DataType::Uint8, RedOp::Max, bytesOf<uint8_t>({200}), bytesOf<uint8_t>({3}),
               bytesOf<uint8_t>({200}));
}

// ---- Avg: finalize divides once by nranks ----

Bytes runFinalize(CpuBackend& be, DataType t, RedOp op, const Bytes& in, int nranks) {
  const size_t es = dtypeSize(t);
  auto* p = static_cast<unsigned char*>(be.allocate(in.size() + 64));
  if (!in.empty()) {
    be.upload(p + es, in.data(), in.size());
  }
  be.wait(be.finalize(p + es, in.size() / es, t, op, nranks));
  Bytes out(in.size());
  if (!in.empty()) {
    be.download(out.data(), p + es, in.size());
  }
  be.deallocate(p);
  return out;
}

void expectFinalize(DataType t, const Bytes& in, int nranks, const Bytes& want) {
  const size_t es = dtypeSize(t);
  for (size_t i = 0; i < in.size(); i += es) {
    unsigned char ref[8];
    std::memcpy(ref, &in[i], es);
    finalizeScalar(t, RedOp::Avg, ref, nranks);
    EXPECT_TRUE(sameValue(t, ref, &want[i]))
        << "reference " << toString(t) << " " << hexOf(t, &in[i]) << " / " << nranks << " gave "
        << hexOf(t, ref) << ", want " << hexOf(t, &want[i]);
  }
  for (const CpuBackendOptions& o : allBackendOptions()) {
    CpuBackend be(o);
    const Bytes got = runFinalize(be, t, RedOp::Avg, in, nranks);
    EXPECT_EQ(firstMismatch(t, got.data(), want.data(), in.size() / es), -1)
        << describe(o) << " " << toString(t) << " / " << nranks;
  }
}

TEST(CpuBackendAvg, FinalizeDividesInEachTypesPrecision) {
  expectFinalize(DataType::Float, bytesOf<float>({7.0f, -1.0f, 1.0f}), 2,
                 bytesOf<float>({3.5f, -0.5f, 0.5f}));
  expectFinalize(DataType::Float, bytesOf<float>({1.0f}), 3, bytesOf<float>({1.0f / 3.0f}));
  expectFinalize(DataType::Double, bytesOf<double>({1.0, -10.0}), 3,
                 bytesOf<double>({1.0 / 3.0, -10.0 / 3.0}));
  // 1/3 in float rounds to half 0x3555; 65504/3 = 21834.7 rounds to 21840.
  expectFinalize(DataType::Half, bytesOf<uint16_t>({0x3c00, 0x7bff, 0x7c00}), 3,
                 bytesOf<uint16_t>({0x3555, 0x7555, 0x7c00}));
  expectFinalize(DataType::BFloat16, bytesOf<uint16_t>({0x3f80, 0xc040}), 3,
                 bytesOf<uint16_t>({0x3eab, 0xbf80}));
  // Integers truncate toward zero: signed for int32/int64, unsigned for uint8.
  expectFinalize(DataType::Int32, bytesOf<int32_t>({-7, 7, std::numeric_limits<int32_t>::min()}), 2,
                 bytesOf<int32_t>({-3, 3, -1073741824}));
  expectFinalize(DataType::Int64, bytesOf<int64_t>({-7, std::numeric_limits<int64_t>::max()}), 4,
                 bytesOf<int64_t>({-1, std::numeric_limits<int64_t>::max() / 4}));
  expectFinalize(DataType::Uint8, bytesOf<uint8_t>({255, 7, 0}), 4, bytesOf<uint8_t>({63, 1, 0}));
}

TEST(CpuBackendAvg, FinalizeMatchesReferenceOnRandomDataForEveryType) {
  for (DataType t : kAllDataTypes) {
    const size_t count = 10007;
    const Bytes in = randomBytes(count * dtypeSize(t), 77 + static_cast<uint64_t>(t));
    for (int nranks : {1, 3, 4, 7}) {
      Bytes want = in;
      for (size_t i = 0; i < count; ++i) {
        finalizeScalar(t, RedOp::Avg, &want[i * dtypeSize(t)], nranks);
      }
      for (const CpuBackendOptions& o : allBackendOptions()) {
        CpuBackend be(o);
        const Bytes got = runFinalize(be, t, RedOp::Avg, in, nranks);
        const int64_t bad = firstMismatch(t, got.data(), want.data(), count);
        ASSERT_EQ(bad, -1) << describe(o) << " " << toString(t) << " / " << nranks << " element "
                           << bad;
      }
    }
  }
}

TEST(CpuBackendAvg, FinalizeLeavesOtherOperatorsAlone) {
  const Bytes in = randomBytes(4 * 100, 5);
  CpuBackend be;
  for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max}) {
    EXPECT_EQ(runFinalize(be, DataType::Float, op, in, 4), in) << toString(op);
  }
  EXPECT_THROW(be.finalize(nullptr, 0, DataType::Float, RedOp::Avg, 0), EnforceError);
}

// ---- The conversions and the scalar reference ----

TEST(NumericReference, HalfRoundTripsEveryPattern) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = halfToFloat(h);
    if (halfIsNan(h)) {
      ASSERT_TRUE(std::isnan(f)) << i;
      ASSERT_TRUE(halfIsNan(floatToHalf(f))) << i;
      // Quiet NaNs keep their payload exactly.
      if (h & 0x200) {
        ASSERT_EQ(floatToHalf(f), h) << i;
      }
      continue;
    }
    // The value, computed independently of the bit manipulation.
    const int exp = (h >> 10) & 0x1f;
    const int man = h & 0x3ff;
    const double mag = exp == 0x1f ? INFINITY
                       : exp == 0  ? std::ldexp(man, -24)
                                   : std::ldexp(1024 + man, exp - 25);
    ASSERT_EQ(static_cast<double>(f), (h & 0x8000) ? -mag : mag) << i;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << i;
    ASSERT_EQ(floatToHalf(f), h) << i;
  }
}

TEST(NumericReference, BFloat16RoundTripsEveryPattern) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto b = static_cast<uint16_t>(i);
    const float f = bf16ToFloat(b);
    if (bf16IsNan(b)) {
      ASSERT_TRUE(std::isnan(f)) << i;
      ASSERT_TRUE(bf16IsNan(floatToBf16(f))) << i;
      if (b & 0x40) {
        ASSERT_EQ(floatToBf16(f), b) << i;
      }
      continue;
    }
    ASSERT_EQ(floatToBf16(f), b) << i;
  }
}

TEST(NumericReference, FloatToHalfRoundsToNearestEven) {
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3c00);      // tie -> even
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);  // half the smallest subnormal
  EXPECT_EQ(floatToHalf(0x1p-25f + 0x1p-40f), 0x0001);
  EXPECT_EQ(floatToHalf(3 * 0x1p-25f), 0x0002);  // 1.5 subnormal ulps -> 2
  EXPECT_EQ(floatToHalf(-0x1p-30f), 0x8000);     // underflow keeps the sign
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(floatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(floatToHalf(0x1p-149f), 0x0000);  // float subnormal
  EXPECT_EQ(floatToBf16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(floatToBf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_TRUE(bf16IsNan(floatToBf16(std::bit_cast<float>(0x7f800001u))));  // signalling NaN
  EXPECT_TRUE(halfIsNan(floatToHalf(std::bit_cast<float>(0x7f800001u))));
}

TEST(NumericReference, FromDoubleRoundsOnceAndWrapsIntegers) {
  uint16_t h = 0;
  // 1 + 2^-11 + 2^-40 is just above the half tie: once rounded it is 0x3c01; rounding to
  // float first would land on the tie and give 0x3c00.
  fromDouble(DataType::Half, 1.0 + 0x1p-11 + 0x1p-40, &h);
  EXPECT_EQ(h, 0x3c01);
  fromDouble(DataType::Half, 1.0 + 0x1p-11, &h);
  EXPECT_EQ(h, 0x3c00);
  fromDouble(DataType::BFloat16, 1.0 + 0x1p-8 + 0x1p-30, &h);
  EXPECT_EQ(h, 0x3f81);
  fromDouble(DataType::Half, 1e6, &h);
  EXPECT_EQ(h, 0x7c00);
  fromDouble(DataType::BFloat16, 1e300, &h);
  EXPECT_EQ(h, 0x7f80);
  fromDouble(DataType::Half, std::nan(""), &h);
  EXPECT_TRUE(halfIsNan(h));
  int32_t i32 = 0;
  fromDouble(DataType::Int32, 0x1p32 + 5, &i32);
  EXPECT_EQ(i32, 5);
  fromDouble(DataType::Int32, -3.7, &i32);
  EXPECT_EQ(i32, -3);
  uint8_t u8 = 0;
  fromDouble(DataType::Uint8, -1.0, &u8);
  EXPECT_EQ(u8, 255);
  int64_t i64 = 0;
  EXPECT_THROW(fromDouble(DataType::Int64, 0x1p63, &i64), EnforceError);
  for (DataType t : kAllDataTypes) {
    unsigned char e[8];
    fromDouble(t, 42.0, e);
    EXPECT_EQ(toDouble(t, e), 42.0) << toString(t);
    fromDouble(t, -2.0, e);
    EXPECT_EQ(toDouble(t, e), t == DataType::Uint8 ? 254.0 : -2.0) << toString(t);
  }
}

TEST(NumericReference, SameValueTreatsAllNaNsAlike) {
  const uint16_t n1 = 0x7e00, n2 = 0xfd01, one = 0x3c00;
  EXPECT_TRUE(sameValue(DataType::Half, &n1, &n2));
  EXPECT_FALSE(sameValue(DataType::Half, &n1, &one));
  const int32_t a = 1, b = 1, c = 2;
  EXPECT_TRUE(sameValue(DataType::Int32, &a, &b));
  EXPECT_FALSE(sameValue(DataType::Int32, &a, &c));
  const float z = 0.0f, nz = -0.0f;
  EXPECT_FALSE(sameValue(DataType::Float, &z, &nz));  // bits matter outside NaN
  EXPECT_TRUE(isFloating(DataType::BFloat16));
  EXPECT_FALSE(isFloating(DataType::Uint8));
}

// ---- The backend's memory and tickets ----

TEST(CpuBackend, AllocatesAlignedZeroedMemory) {
  CpuBackend be;
  EXPECT_EQ(be.name(), "cpu");
  EXPECT_EQ(be.memoryKind(), MemoryKind::Host);
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, size_t{3} << 20}) {
    auto* p = static_cast<unsigned char*>(be.allocate(bytes));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    for (size_t i = 0; i < bytes; ++i) {
      ASSERT_EQ(p[i], 0) << i;
    }
    be.deallocate(p);
  }
  be.deallocate(nullptr);
  int notOurs = 0;
  EXPECT_THROW(be.deallocate(&notOurs), EnforceError);
}

TEST(CpuBackend, CopiesAndStagesWithoutCopying) {
  CpuBackend be;
  const Bytes src = randomBytes(1000, 9);
  auto* a = static_cast<unsigned char*>(be.allocate(1000));
  auto* b = static_cast<unsigned char*>(be.allocate(1000));
  be.upload(a, src.data(), 1000);
  const Backend::Ticket t1 = be.copy(b, a, 1000);
  EXPECT_TRUE(be.done(t1));
  Bytes back(1000);
  be.download(back.data(), b, 1000);
  EXPECT_EQ(back, src);
  const Bytes other = randomBytes(1000, 10);
  be.wait(be.copyFromHost(a, other.data(), 1000));
  EXPECT_EQ(std::memcmp(a, other.data(), 1000), 0);
  const void* view = nullptr;
  const Backend::Ticket t2 = be.stageOut(b + 8, 100, &view);
  EXPECT_GT(t2, t1);
  EXPECT_TRUE(be.done(t2));
  EXPECT_EQ(view, b + 8);
  be.releaseStaged(view);
  be.synchronize();
  EXPECT_THROW(be.done(t2 + 100), EnforceError);
  be.deallocate(a);
  be.deallocate(b);
}

TEST(CpuBackend, RefusesPartiallyOverlappingReductions) {
  CpuBackend be;
  auto* p = static_cast<float*>(be.allocate(4096));
  EXPECT_THROW(be.reduceFromHost(p + 1, p, p + 512, 100, DataType::Float, RedOp::Sum),
               EnforceError);
  EXPECT_THROW(be.reduceFromHost(p, p + 512, p + 1, 100, DataType::Float, RedOp::Sum),
               EnforceError);
  // In place (dst == local) and disjoint buffers are fine; count 0 touches nothing.
  be.reduceFromHost(p, p, p + 512, 100, DataType::Float, RedOp::Sum);
  be.reduceFromHost(nullptr, nullptr, nullptr, 0, DataType::Float, RedOp::Sum);
  be.deallocate(p);
}

TEST(CpuBackend, ReportsWhichKernelsItUses) {
  EXPECT_TRUE(CpuBackend::kernelsSupported(CpuKernels::Portable));
  EXPECT_TRUE(CpuBackend::kernelsSupported(CpuKernels::Auto));
  CpuBackend automatic;
  EXPECT_NE(automatic.kernels(), CpuKernels::Auto);
  if (CpuBackend::kernelsSupported(CpuKernels::Avx2)) {
    EXPECT_EQ(automatic.kernels(), CpuKernels::Avx2);
  } else {
    CpuBackendOptions o;
    o.kernels = CpuKernels::Avx2;
    EXPECT_THROW(CpuBackend{o}, ConfigError);
  }
}

}  // namespace
}  // namespace arl
