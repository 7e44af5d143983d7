// Reduction kernels of the CUDA backend, launched on a caller's stream. Their arithmetic is
// the CPU backend's, element by element (backend/cpu/cpu_backend.h states it): the same
// operation in the same precision, so results agree bit for bit (NaN payloads aside, which
// neither backend specifies).
//
// Every launch is asynchronous and never synchronises the device: errors of the launch itself
// are thrown at once (CudaError), errors of the kernel surface at the next synchronisation.
// This header needs no CUDA header: a stream is passed as the runtime's opaque CUstream_st*
// (cudaStream_t); nullptr is the legacy default stream.
#pragma once

#include <cstddef>

#include "base/types.h"

struct CUstream_st;

namespace arl::gpu {

// dst = a (op) b over `count` elements of type t, all three device-accessible (device memory,
// or mapped pinned host memory). Avg combines like Sum. dst may be a or b itself but must
// not overlap them otherwise. No alignment is needed: where dst, a and b share their offset
// within 16 bytes the kernel moves 16-byte vectors (a scalar head and tail around them),
// elsewhere it works element by element.
void launchReduce(void* dst, const void* a, const void* b, size_t count, DataType t, RedOp op,
                  CUstream_st* stream);

// The final pass of `op` over dst (Avg: divide by nranks >= 1, as the CPU backend's
// finalize()); other operators launch nothing.
void launchFinalize(void* dst, size_t count, DataType t, RedOp op, int nranks, CUstream_st* stream);

}  // namespace arl::gpu
