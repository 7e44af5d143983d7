// Builds the kernels of reduce_kernels_impl.h twice: a portable build for the baseline target
// (x86-64 has SSE2 only; the project never compiles with -march=native) and, with GCC on
// x86-64, an AVX2 + F16C build chosen at run time when the CPU has both.
#include "reduce_kernels.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/errors.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ARL_HAVE_AVX2_BUILD 1
#else
#define ARL_HAVE_AVX2_BUILD 0
#endif

namespace arl::kernels {

namespace portable {
#define ARL_VEC_BYTES 16
#define ARL_USE_F16C 0
#if defined(__x86_64__)
#define ARL_STREAM_X86 1
#else
#define ARL_STREAM_X86 0
#endif
#include "reduce_kernels_impl.h"
#undef ARL_VEC_BYTES
#undef ARL_USE_F16C
#undef ARL_STREAM_X86
}  // namespace portable

#if ARL_HAVE_AVX2_BUILD
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
namespace avx2 {
#define ARL_VEC_BYTES 32
#define ARL_USE_F16C 1
#define ARL_STREAM_X86 1
#include "reduce_kernels_impl.h"
#undef ARL_VEC_BYTES
#undef ARL_USE_F16C
#undef ARL_STREAM_X86
}  // namespace avx2
#pragma GCC pop_options
#endif

bool isaSupported(Isa isa) {
  switch (isa) {
    case Isa::Portable: return true;
    case Isa::Avx2:
#if ARL_HAVE_AVX2_BUILD
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#else
      return false;
#endif
  }
  return false;
}

Isa bestIsa() {
  static const Isa best = isaSupported(Isa::Avx2) ? Isa::Avx2 : Isa::Portable;
  return best;
}

const char* isaName(Isa isa) { return isa == Isa::Avx2 ? "avx2" : "portable"; }

void reduce(Isa isa, void* dst, const void* a, const void* b, size_t count, DataType t, RedOp op,
            bool stream) {
  if (count == 0) {
    return;
  }
#if ARL_HAVE_AVX2_BUILD
  if (isa == Isa::Avx2) {
    avx2::reduceEntry(dst, a, b, count, t, op, stream);
    return;
  }
#endif
  ARL_ENFORCE(isa == Isa::Portable, "kernels for " << isaName(isa) << " are not built");
  portable::reduceEntry(dst, a, b, count, t, op, stream);
}

void finalize(Isa isa, void* dst, size_t count, DataType t, RedOp op, int nranks) {
#if ARL_HAVE_AVX2_BUILD
  if (isa == Isa::Avx2) {
    avx2::finalizeEntry(dst, count, t, op, nranks);
    return;
  }
#endif
  ARL_ENFORCE(isa == Isa::Portable, "kernels for " << isaName(isa) << " are not built");
  portable::finalizeEntry(dst, count, t, op, nranks);
}

}  // namespace arl::kernels
