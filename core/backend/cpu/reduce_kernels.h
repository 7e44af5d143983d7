// Reduction kernels of the CPU backend (private to arl_core). The arithmetic is the one
// documented in cpu_backend.h and mirrored element by element by reduceScalar() in numeric.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/types.h"

namespace arl::kernels {

// Instruction sets with a kernel build. Portable is plain C++ with 16-byte GCC vectors (SSE2
// on x86-64, NEON elsewhere); Avx2 needs AVX2 and F16C and is chosen at run time.
enum class Isa : uint8_t { Portable, Avx2 };

bool isaSupported(Isa isa);
Isa bestIsa();
const char* isaName(Isa isa);

// dst = a (op) b for `count` elements; Avg combines like Sum. dst may be a or b itself, but
// must not overlap them otherwise. No alignment is required. With `stream`, full vectors are
// written with non-temporal stores (worth it when dst is larger than the caches and is not
// read again soon); the stores are fenced before returning.
void reduce(Isa isa, void* dst, const void* a, const void* b, size_t count, DataType t, RedOp op,
            bool stream);

// The final pass of `op` over dst (Avg: divide by nranks >= 1); other operators do nothing.
void finalize(Isa isa, void* dst, size_t count, DataType t, RedOp op, int nranks);

}  // namespace arl::kernels
