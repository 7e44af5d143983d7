#include "exec/numeric.h"

#include <cmath>
#include <cstring>

#include "base/errors.h"

namespace arl {

namespace {

template <typename T>
T load(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void store(void* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

template <typename F, typename U>
F minNumImpl(F a, F b) {
  if (std::isnan(b)) {
    return a;
  }
  if (std::isnan(a)) {
    return b;
  }
  if (a < b) {
    return a;
  }
  if (b < a) {
    return b;
  }
  // Equal values: the bits differ at most in the sign of zero, and OR picks -0.
  return std::bit_cast<F>(static_cast<U>(std::bit_cast<U>(a) | std::bit_cast<U>(b)));
}

template <typename F, typename U>
F maxNumImpl(F a, F b) {
  if (std::isnan(b)) {
    return a;
  }
  if (std::isnan(a)) {
    return b;
  }
  if (a > b) {
    return a;
  }
  if (b > a) {
    return b;
  }
  return std::bit_cast<F>(static_cast<U>(std::bit_cast<U>(a) & std::bit_cast<U>(b)));
}

template <typename F>
F floatOp(RedOp op, F a, F b) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg: return a + b;
    case RedOp::Prod: return a * b;
    case RedOp::Min: return minNum(a, b);
    case RedOp::Max: return maxNum(a, b);
  }
  ARL_ENFORCE(false, "unknown RedOp " << static_cast<int>(op));
}

// Integers: S is the stored (possibly signed) type, U its unsigned twin in which sum and
// product wrap without undefined behaviour.
template <typename S, typename U>
S intOp(RedOp op, S a, S b) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg: return static_cast<S>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    case RedOp::Prod: return static_cast<S>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    case RedOp::Min: return a < b ? a : b;
    case RedOp::Max: return a > b ? a : b;
  }
  ARL_ENFORCE(false, "unknown RedOp " << static_cast<int>(op));
}

// Round-to-odd narrowing of a double to float: the truncation toward zero with the last
// bit forced to 1 when inexact. Rounding that float once more to a format with at least two
// fewer significand bits gives the correctly rounded result of the double (Boldo and
// Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding
// to odd", IEEE TC 2008), so half and bfloat16 get a single rounding from the double.
float doubleToFloatOdd(double v) {
  const float f = static_cast<float>(v);
  if (std::isnan(v) || std::isinf(f) || static_cast<double>(f) == v) {
    return f;
  }
  uint32_t bits = std::bit_cast<uint32_t>(f);
  // Step the magnitude back toward zero when rounding went away from zero: truncation.
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) {
    bits -= 1;
  }
  return std::bit_cast<float>(bits | 1u);
}

int64_t truncToInt64(double v) {
  ARL_ENFORCE(std::isfinite(v) && std::fabs(v) < 0x1p63, "value " << v << " out of integer range");
  return static_cast<int64_t>(v);
}

}  // namespace

float minNum(float a, float b) { return minNumImpl<float, uint32_t>(a, b); }
float maxNum(float a, float b) { return maxNumImpl<float, uint32_t>(a, b); }
double minNum(double a, double b) { return minNumImpl<double, uint64_t>(a, b); }
double maxNum(double a, double b) { return maxNumImpl<double, uint64_t>(a, b); }

bool isFloating(DataType t) {
  return t == DataType::Float || t == DataType::Double || t == DataType::Half ||
         t == DataType::BFloat16;
}

double toDouble(DataType t, const void* elem) {
  switch (t) {
    case DataType::Float: return load<float>(elem);
    case DataType::Double: return load<double>(elem);
    case DataType::Half: return halfToFloat(load<uint16_t>(elem));
    case DataType::BFloat16: return bf16ToFloat(load<uint16_t>(elem));
    case DataType::Int32: return load<int32_t>(elem);
    case DataType::Int64: return static_cast<double>(load<int64_t>(elem));
    case DataType::Uint8: return load<uint8_t>(elem);
  }
  ARL_ENFORCE(false, "unknown DataType " << static_cast<int>(t));
}

void fromDouble(DataType t, double v, void* elem) {
  switch (t) {
    case DataType::Float: store(elem, static_cast<float>(v)); return;
    case DataType::Double: store(elem, v); return;
    case DataType::Half: store(elem, floatToHalf(doubleToFloatOdd(v))); return;
    case DataType::BFloat16: store(elem, floatToBf16(doubleToFloatOdd(v))); return;
    case DataType::Int32:
      store(elem, static_cast<int32_t>(static_cast<uint32_t>(truncToInt64(v))));
      return;
    case DataType::Int64: store(elem, truncToInt64(v)); return;
    case DataType::Uint8: store(elem, static_cast<uint8_t>(truncToInt64(v))); return;
  }
  ARL_ENFORCE(false, "unknown DataType " << static_cast<int>(t));
}

void reduceScalar(DataType t, RedOp op, const void* a, const void* b, void* out) {
  switch (t) {
    case DataType::Float: store(out, floatOp(op, load<float>(a), load<float>(b))); return;
    case DataType::Double: store(out, floatOp(op, load<double>(a), load<double>(b))); return;
    case DataType::Half:
      store(out, floatToHalf(
                     floatOp(op, halfToFloat(load<uint16_t>(a)), halfToFloat(load<uint16_t>(b)))));
      return;
    case DataType::BFloat16:
      store(out, floatToBf16(
                     floatOp(op, bf16ToFloat(load<uint16_t>(a)), bf16ToFloat(load<uint16_t>(b)))));
      return;
    case DataType::Int32:
      store(out, intOp<int32_t, uint32_t>(op, load<int32_t>(a), load<int32_t>(b)));
      return;
    case DataType::Int64:
      store(out, intOp<int64_t, uint64_t>(op, load<int64_t>(a), load<int64_t>(b)));
      return;
    case DataType::Uint8:
      store(out, intOp<uint8_t, uint8_t>(op, load<uint8_t>(a), load<uint8_t>(b)));
      return;
  }
  ARL_ENFORCE(false, "unknown DataType " << static_cast<int>(t));
}

void finalizeScalar(DataType t, RedOp op, void* elem, int nranks) {
  ARL_ENFORCE(nranks >= 1, "nranks " << nranks);
  if (op != RedOp::Avg) {
    return;
  }
  switch (t) {
    case DataType::Float: store(elem, load<float>(elem) / static_cast<float>(nranks)); return;
    case DataType::Double: store(elem, load<double>(elem) / static_cast<double>(nranks)); return;
    case DataType::Half:
      store(elem, floatToHalf(halfToFloat(load<uint16_t>(elem)) / static_cast<float>(nranks)));
      return;
    case DataType::BFloat16:
      store(elem, floatToBf16(bf16ToFloat(load<uint16_t>(elem)) / static_cast<float>(nranks)));
      return;
    case DataType::Int32: store(elem, static_cast<int32_t>(load<int32_t>(elem) / nranks)); return;
    case DataType::Int64: store(elem, load<int64_t>(elem) / nranks); return;
    case DataType::Uint8:
      store(elem, static_cast<uint8_t>(static_cast<unsigned>(load<uint8_t>(elem)) /
                                       static_cast<unsigned>(nranks)));
      return;
  }
  ARL_ENFORCE(false, "unknown DataType " << static_cast<int>(t));
}

bool sameValue(DataType t, const void* a, const void* b) {
  const size_t n = dtypeSize(t);
  if (std::memcmp(a, b, n) == 0) {
    return true;
  }
  switch (t) {
    case DataType::Float: return std::isnan(load<float>(a)) && std::isnan(load<float>(b));
    case DataType::Double: return std::isnan(load<double>(a)) && std::isnan(load<double>(b));
    case DataType::Half: return halfIsNan(load<uint16_t>(a)) && halfIsNan(load<uint16_t>(b));
    case DataType::BFloat16: return bf16IsNan(load<uint16_t>(a)) && bf16IsNan(load<uint16_t>(b));
    default: return false;
  }
}

}  // namespace arl
