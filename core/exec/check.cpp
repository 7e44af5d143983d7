#include "exec/check.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/errors.h"
#include "exec/numeric.h"
#include "schedule/schedule.h"

namespace arl {

namespace {

// A small integer hash (murmur3's finaliser) so that values do not repeat with a short period.
uint32_t mix(uint32_t a, uint64_t b) {
  uint32_t h = (a + 1u) * 0x9E3779B1u ^ static_cast<uint32_t>(b) * 0x85EBCA77u ^
               static_cast<uint32_t>(b >> 32) * 0xC2B2AE3Du;
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

bool isSigned(DataType t) { return t != DataType::Uint8; }

// Element i of rank r's Input, as an exact integer value (see check.h for the choices).
double inputValue(Collective c, DataType t, RedOp op, int r, int n, uint64_t i) {
  const uint32_t ur = static_cast<uint32_t>(r);
  const double shift = isSigned(t) ? -128.0 : 0.0;
  if (!collectiveReduces(c)) return static_cast<double>(mix(ur, i) % 256) + shift;
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg:
      return isSigned(t) ? static_cast<double>(mix(ur, i) % 4) - 1.0
                         : static_cast<double>(1 + mix(ur, i) % 3);
    case RedOp::Prod: return mix(ur, i) % 4 == 0 ? 2.0 : 1.0;
    case RedOp::Min:
    case RedOp::Max: {
      // (r + i) mod n is a permutation of the ranks, so values are distinct per element; the
      // low bits from the hash make the extreme differ between elements.
      const uint64_t place = (static_cast<uint64_t>(r) + i) % static_cast<uint64_t>(n);
      return static_cast<double>(place * 4 + mix(0, i) % 4) + shift;
    }
  }
  return 0;
}

constexpr size_t kMaxElem = 8;

// out = reduction over all ranks of input element `i` (in rank order; the inputs make the
// order irrelevant), finalised for Avg.
void reduceElement(void* out, Collective c, DataType t, RedOp op, int n, uint64_t i) {
  unsigned char acc[kMaxElem];
  unsigned char v[kMaxElem];
  fromDouble(t, inputValue(c, t, op, 0, n, i), acc);
  for (int r = 1; r < n; ++r) {
    fromDouble(t, inputValue(c, t, op, r, n, i), v);
    reduceScalar(t, op, acc, v, acc);
  }
  finalizeScalar(t, op, acc, n);
  std::memcpy(out, acc, dtypeSize(t));
}

}  // namespace

void fillInput(void* host, Collective c, DataType t, RedOp op, int rank, int nranks,
               uint64_t count) {
  fillInputRange(host, c, t, op, rank, nranks, count, 0, inputElemsFor(c, nranks, count));
}

bool fillExpected(void* host, Collective c, DataType t, RedOp op, int rank, int nranks,
                  uint64_t count, int root) {
  return fillExpectedRange(host, c, t, op, rank, nranks, count, root, 0,
                           outputElemsFor(c, nranks, count));
}

void fillRandomInputRange(void* host, DataType t, int rank, uint64_t first, uint64_t n) {
  const size_t es = dtypeSize(t);
  auto* p = static_cast<unsigned char*>(host);
  const bool integer = t == DataType::Int32 || t == DataType::Int64 || t == DataType::Uint8;
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t a = mix(static_cast<uint32_t>(rank) ^ 0x5bd1e995u, first + i);
    const uint32_t b = mix(a, (first + i) ^ 0x27d4eb2full);
    double v = 0;
    if (integer) {
      v = static_cast<double>(a % 7);
    } else {
      const double mantissa = 1.0 + static_cast<double>(b & 0xFFFFFF) / 16777216.0;
      const int exponent = static_cast<int>(a % 21) - 10;
      v = std::ldexp(mantissa, exponent) * ((a >> 8) & 1 ? -1.0 : 1.0);
    }
    fromDouble(t, v, p + i * es);
  }
}

uint64_t fnv1a64(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

void fillInputRange(void* host, Collective c, DataType t, RedOp op, int rank, int nranks,
                    uint64_t count, uint64_t first, uint64_t n) {
  ARL_ENFORCE(nranks >= 1 && rank >= 0 && rank < nranks, "rank " << rank << " of " << nranks);
  const uint64_t elems = inputElemsFor(c, nranks, count);
  ARL_ENFORCE(first <= elems && n <= elems - first,
              "elements " << first << "+" << n << " of an input of " << elems);
  const size_t es = dtypeSize(t);
  auto* p = static_cast<unsigned char*>(host);
  for (uint64_t i = 0; i < n; ++i) {
    fromDouble(t, inputValue(c, t, op, rank, nranks, first + i), p + i * es);
  }
}

bool fillExpectedRange(void* host, Collective c, DataType t, RedOp op, int rank, int nranks,
                       uint64_t count, int root, uint64_t first, uint64_t n) {
  ARL_ENFORCE(nranks >= 1 && rank >= 0 && rank < nranks, "rank " << rank << " of " << nranks);
  ARL_ENFORCE(root >= 0 && root < nranks, "root " << root << " of " << nranks);
  const uint64_t elems = outputElemsFor(c, nranks, count);
  ARL_ENFORCE(first <= elems && n <= elems - first,
              "elements " << first << "+" << n << " of an output of " << elems);
  const size_t es = dtypeSize(t);
  auto* p = static_cast<unsigned char*>(host);
  switch (c) {
    case Collective::AllReduce:
      for (uint64_t i = 0; i < n; ++i) reduceElement(p + i * es, c, t, op, nranks, first + i);
      return true;
    case Collective::Reduce:
      if (rank != root) return false;
      for (uint64_t i = 0; i < n; ++i) reduceElement(p + i * es, c, t, op, nranks, first + i);
      return true;
    case Collective::ReduceScatter: {
      const uint64_t base = static_cast<uint64_t>(rank) * count + first;
      for (uint64_t i = 0; i < n; ++i) reduceElement(p + i * es, c, t, op, nranks, base + i);
      return true;
    }
    case Collective::AllGather:
      // Output element k is element k % count of rank k / count's input.
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t k = first + i;
        const int q = static_cast<int>(k / count);
        fromDouble(t, inputValue(c, t, op, q, nranks, k % count), p + i * es);
      }
      return true;
    case Collective::Broadcast:
      for (uint64_t i = 0; i < n; ++i) {
        fromDouble(t, inputValue(c, t, op, root, nranks, first + i), p + i * es);
      }
      return true;
  }
  return false;
}

uint64_t countWrong(const void* got, const void* expected, DataType t, uint64_t n) {
  const size_t es = dtypeSize(t);
  const auto* g = static_cast<const unsigned char*>(got);
  const auto* e = static_cast<const unsigned char*>(expected);
  // Nearly every check passes: compare whole blocks bytewise and look at single elements
  // (NaN payloads may differ and still count as equal) only inside a block that differs.
  constexpr uint64_t kBlock = 4096;
  uint64_t wrong = 0;
  for (uint64_t b = 0; b < n; b += kBlock) {
    const uint64_t len = std::min(kBlock, n - b);
    if (std::memcmp(g + b * es, e + b * es, len * es) == 0) continue;
    for (uint64_t i = b; i < b + len; ++i) {
      if (!sameValue(t, g + i * es, e + i * es)) ++wrong;
    }
  }
  return wrong;
}

uint64_t countWrongWithin(const void* got, const void* expected, DataType t, uint64_t n,
                          double tolerance) {
  if (!(tolerance > 0)) return countWrong(got, expected, t, n);
  const size_t es = dtypeSize(t);
  const auto* g = static_cast<const unsigned char*>(got);
  const auto* e = static_cast<const unsigned char*>(expected);
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (sameValue(t, g + i * es, e + i * es)) continue;
    const double d = toDouble(t, g + i * es) - toDouble(t, e + i * es);
    // A NaN or an infinity on one side only is never within a tolerance.
    if (!(std::fabs(d) <= tolerance)) ++wrong;
  }
  return wrong;
}

}  // namespace arl
