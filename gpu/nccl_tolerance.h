// How far NCCL's result may legitimately lie from the lab's expected one. Plain C++: no CUDA
// or NCCL header, so it is tested on any machine.
//
// NCCL computes the float average by pre-multiplying: each rank's element is multiplied by
// 1/nranks before the sum (ncclAvg on a floating type; integer types sum, then divide, as the
// lab does). The lab's expected value divides the exact sum once (exec/check.h), so the two
// legitimately differ in the last bits. nccl-tests allows 2 units in the last place for a
// floating-point avg and nothing elsewhere (verifiable/verifiable.cu, ncclVerifiableVerify:
// "tolerance = 2", with inputs that have two non-zero contributions). The lab's inputs have a
// non-zero contribution from every rank, so the bound here scales with the ranks:
//   each product x * fl(1/n) is exact for x in {-1, 0, 1, 2} apart from fl(1/n)'s own
//   rounding, and every partial sum has magnitude at most 2, so each of the n - 1 additions
//   rounds by at most half a unit in the last place of 2; allowing max(2, n) such units
//   covers the additions and the rounding of 1/n (at most one more unit in total).
// Everything else is exact on the lab's inputs (small integers, powers of two, distinct
// values for min and max), so every other case has tolerance 0: identical bits.
#pragma once

#include "base/types.h"

namespace arl::gpu {

// The absolute tolerance for an element of collective `c` with `op` on `t` over `nranks`:
// 0 (identical bits) except for a floating-point avg over more than one rank.
double ncclTolerance(Collective c, DataType t, RedOp op, int nranks);

}  // namespace arl::gpu
