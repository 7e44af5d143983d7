#include "gpu/nccl_tolerance.h"

#include <algorithm>
#include <cmath>

namespace arl::gpu {

namespace {

// Explicit significand bits of each floating type (IEEE 754 binary32, binary64, binary16;
// bfloat16 keeps binary32's exponent with 7).
int mantissaBits(DataType t) {
  switch (t) {
    case DataType::Float: return 23;
    case DataType::Double: return 52;
    case DataType::Half: return 10;
    case DataType::BFloat16: return 7;
    default: return -1;  // not a floating type
  }
}

}  // namespace

double ncclTolerance(Collective c, DataType t, RedOp op, int nranks) {
  const int m = mantissaBits(t);
  if (op != RedOp::Avg || m < 0 || !collectiveReduces(c) || nranks <= 1) return 0;
  const double ulpOfTwo = std::ldexp(1.0, 1 - m);  // a unit in the last place in [2, 4)
  return std::max(2, nranks) * ulpOfTwo;
}

}  // namespace arl::gpu
