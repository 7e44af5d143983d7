// Element arithmetic of the lab: half and bfloat16 conversions, and a scalar reference of every
// reduction with exactly the rounding of the CPU backend's kernels. Checks and tests compute
// expected results with these functions; the kernels are a separate, vectorised
// implementation of the same rules (see cpu_backend.h for the rules in prose).
#pragma once

#include <bit>
#include <cstdint>

#include "base/types.h"

namespace arl {

// ---- IEEE 754 binary16 ("half") and bfloat16, stored as their 16-bit patterns ----

// binary16 -> float. Exact for every finite value and infinity. A NaN stays NaN with its
// payload and the quiet bit set, as x86's VCVTPH2PS does.
constexpr float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) {
    return std::bit_cast<float>(sign | 0x7f800000u | (man != 0 ? 0x400000u : 0u) | (man << 13));
  }
  if (exp == 0) {
    // Subnormal: man * 2^-24, exact in float (a normal float for every man != 0).
    const float mag = static_cast<float>(man) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(mag));
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

// float -> binary16, round to nearest, ties to even. Magnitudes from 65520 up give infinity
// (65520 is the tie between 65504, the largest half, and 2^16). A NaN gives a quiet NaN
// keeping the top 10 payload bits, as x86's VCVTPS2PH does.
constexpr uint16_t floatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) {
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  if (abs >= 0x477ff000u) {
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  if (abs >= 0x38800000u) {  // normal half: drop 13 mantissa bits, rounding to even
    const uint32_t r = abs - 0x38000000u + 0xfffu + ((abs >> 13) & 1u);
    return static_cast<uint16_t>(sign | (r >> 13));
  }
  // Subnormal half (or zero): value / 2^-24 rounded to an integer, ties to even. The float's
  // 24-bit significand m scaled by 2^(e+1) for unbiased exponent e; shifts beyond 25 leave 0.
  const uint32_t e = abs >> 23;
  if (e < 102) {
    return static_cast<uint16_t>(sign);  // below 2^-25: rounds to zero
  }
  const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  const uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  const uint32_t up = (rem > halfway || (rem == halfway && (q & 1u))) ? 1u : 0u;
  return static_cast<uint16_t>(sign | (q + up));
}

// bfloat16 -> float: the top half of the float's bits; exact for every pattern.
constexpr float bf16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

// float -> bfloat16, round to nearest, ties to even; overflow gives infinity. A NaN gives a
// quiet NaN keeping the top 7 payload bits.
constexpr uint16_t floatToBf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  }
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

constexpr bool halfIsNan(uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }
constexpr bool bf16IsNan(uint16_t b) { return (b & 0x7fffu) > 0x7f80u; }

// ---- Min and max of floating-point values ----
//
// As NCCL's fminf/fmaxf: a NaN operand is ignored (both NaN: the result is NaN). -0 orders
// below +0 so that the result does not depend on the order ranks combine in.
float minNum(float a, float b);
float maxNum(float a, float b);
double minNum(double a, double b);
double maxNum(double a, double b);

// ---- Scalar reference of the reductions (one element; `elem` points at its storage) ----

// Is the type a floating-point type (float, double, half, bfloat16)?
bool isFloating(DataType t);

// The element's value as a double: exact for every type, int64 beyond 2^53 aside.
double toDouble(DataType t, const void* elem);

// Stores v: float, half and bfloat16 round once from the double to nearest, ties to even;
// integer types truncate toward zero and wrap modulo 2^bits (v must be finite and
// |v| < 2^63). Used to build inputs and expected values.
void fromDouble(DataType t, double v, void* elem);

// out = a (op) b with the CPU backend's arithmetic; Avg combines like Sum. out may alias a or
// b. Storage need not be aligned.
void reduceScalar(DataType t, RedOp op, const void* a, const void* b, void* out);

// The final pass of op on one element, in place: Avg divides by nranks (>= 1); other
// operators leave the element unchanged.
void finalizeScalar(DataType t, RedOp op, void* elem, int nranks);

// Do two elements hold the same value? Identical bits, or both NaN: NaN payloads are not
// specified by the reductions.
bool sameValue(DataType t, const void* a, const void* b);

}  // namespace arl
