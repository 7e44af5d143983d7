// Inputs whose collective results are known exactly, and the comparison of outputs with them.
//
// The inputs are chosen so that every algorithm gives the same bits for every type and
// operator, whatever order it combines the ranks in (after nccl-tests' idea of checkable
// data, with values picked for exactness rather than randomness):
//  - sum / avg: integers in {1, 2, 3} (uint8) or {-1, 0, 1, 2} (signed types): every partial
//    sum of up to 64 ranks is an integer of magnitude <= 192, exact in every type, even
//    bfloat16 (8-bit significand) and uint8; avg divides that exact sum once;
//  - prod: factors in {1, 2}: partial products are powers of two, exact until they overflow,
//    and since no factor is below 1, a product that overflows (to infinity, or wraps to 0 in
//    integers) does so in every order alike;
//  - min / max: per element, the ranks hold distinct integers in [0, 255] (shifted by -128
//    for signed types), with the extreme varying from element to element;
//  - all-gather / broadcast: integers in [0, 255] (shifted likewise) that differ by rank and
//    element, so a misplaced chunk shows.
// Values vary by element through a small integer hash, so a shifted or misplaced chunk
// changes the result. Expected results are computed with the scalar reference of
// numeric.h (reduceScalar, finalizeScalar), i.e. the CPU backend's rounding.
#pragma once

#include <cstdint>

#include "base/types.h"

namespace arl {

// Fills the rank's Input: inputElemsFor(c, nranks, count) elements of type t at `host`.
// `count` is the NCCL count (Schedule::count).
void fillInput(void* host, Collective c, DataType t, RedOp op, int rank, int nranks,
               uint64_t count);

// Fills the rank's expected Output (outputElemsFor(c, nranks, count) elements at `host`) and
// returns true; returns false, leaving `host` untouched, when the rank's output is not
// defined by the collective (Reduce on a rank other than the root).
bool fillExpected(void* host, Collective c, DataType t, RedOp op, int rank, int nranks,
                  uint64_t count, int root);

// Elements [first, first + n) of what fillInput and fillExpected write, stored at `host`
// (element `first` at host[0]): for a caller that fills a large buffer piece by piece. The
// range must lie inside the buffer; fillExpectedRange returns false as fillExpected does.
void fillInputRange(void* host, Collective c, DataType t, RedOp op, int rank, int nranks,
                    uint64_t count, uint64_t first, uint64_t n);
bool fillExpectedRange(void* host, Collective c, DataType t, RedOp op, int rank, int nranks,
                       uint64_t count, int root, uint64_t first, uint64_t n);

// Elements [first, first + n) of rank `rank`'s seeded random input (RunRequest::randomData):
// values of both signs whose magnitudes span 2^-10 .. 2^10, so that the rounding of a float
// sum depends on the order of its additions. Integer types get small random integers (their
// sums are exact in any order). The same rank and element give the same value everywhere.
void fillRandomInputRange(void* host, DataType t, int rank, uint64_t first, uint64_t n);

// FNV-1a (64-bit) of `n` bytes, continuing from `h` (start with kFnv64Offset).
inline constexpr uint64_t kFnv64Offset = 14695981039346656037ull;
uint64_t fnv1a64(uint64_t h, const void* p, size_t n);

// Number of the n elements that differ (nccl-tests' "#wrong"): elements must have identical
// bits, except that any NaN equals any NaN.
uint64_t countWrong(const void* got, const void* expected, DataType t, uint64_t n);

// countWrong() that also accepts an element within `tolerance` of the expected one (both
// read as doubles), for a library whose arithmetic legitimately differs from the lab's
// (NCCL's float avg: gpu/nccl_tolerance.h). tolerance 0 is countWrong() itself.
uint64_t countWrongWithin(const void* got, const void* expected, DataType t, uint64_t n,
                          double tolerance);

}  // namespace arl
