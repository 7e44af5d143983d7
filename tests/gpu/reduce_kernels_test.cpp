// The CUDA reduction kernels against the CPU backend, bit for bit (any NaN equals any NaN,
// as in #wrong): every op x dtype, lengths around every vector and unroll boundary, operands
// at different offsets (the vector path, its scalar head and tail, and the all-scalar path
// when the three operands are not equally aligned), in place, and Avg's final division.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "base/errors.h"
#include "exec/check.h"
#include "gpu/cuda_backend.h"
#include "gpu/reduce_kernels.h"
#include "gpu_test_util.h"

namespace arl {
namespace {

using gputest::randomElements;

constexpr size_t kLengths[] = {1,  2,  3,   7,   8,    9,    15,   16,    17,
                               31, 33, 255, 257, 1000, 1023, 4097, 65537, (size_t{1} << 20) + 3};

// Element offsets of dst, a and b in their buffers; dst == a or b marks in place.
struct Placement {
  size_t dst, a, b;
  bool inPlaceA, inPlaceB;
};
constexpr Placement kPlacements[] = {
    {0, 0, 0, false, false},  // all 16-byte aligned: vectors only, scalar tail
    {1, 1, 1, false, false},  // equally misaligned: scalar head, vectors, tail
    {0, 1, 2, false, false},  // unequal: element by element
    {3, 3, 0, true, false},   // dst is a
    {2, 0, 2, false, true},   // dst is b
};

class GpuKernels : public ::testing::TestWithParam<std::tuple<DataType, RedOp>> {
 protected:
  void SetUp() override {
    ARL_SKIP_WITHOUT_CUDA_DEVICE();
    gpu_ = std::make_unique<gpu::CudaBackend>(0);
  }

  // Device copy of host elements at element offset `off` of a fresh buffer with room around.
  unsigned char* onDevice(const std::vector<unsigned char>& host, size_t off, size_t es) {
    auto* p = static_cast<unsigned char*>(gpu_->allocate(host.size() + 32 * es));
    gpu_->upload(p + off * es, host.data(), host.size());
    owned_.push_back(p);
    return p + off * es;
  }

  void TearDown() override {
    for (void* p : owned_) gpu_->deallocate(p);
  }

  std::unique_ptr<gpu::CudaBackend> gpu_;
  CpuBackend cpu_;
  std::vector<void*> owned_;
};

TEST_P(GpuKernels, EqualTheCpuBackendBitForBit) {
  const auto [t, op] = GetParam();
  const size_t es = dtypeSize(t);
  uint64_t seed = 1;
  for (size_t n : kLengths) {
    for (const Placement& pl : kPlacements) {
      const auto a = randomElements(t, n, seed++);
      const auto b = randomElements(t, n, seed++);
      std::vector<unsigned char> want(a.size());
      cpu_.reduceFromHost(want.data(), a.data(), b.data(), n, t, op);

      unsigned char* da = onDevice(a, pl.a, es);
      unsigned char* db = onDevice(b, pl.b, es);
      // A separate dst starts with other values, so an element left unwritten shows.
      unsigned char* dd = pl.inPlaceA   ? da
                          : pl.inPlaceB ? db
                                        : onDevice(randomElements(t, n, seed++), pl.dst, es);
      gpu::launchReduce(dd, da, db, n, t, op, gpu_->stream());
      gpu_->synchronize();
      std::vector<unsigned char> got(a.size());
      gpu_->download(got.data(), dd, got.size());
      EXPECT_EQ(countWrong(got.data(), want.data(), t, n), 0u)
          << toString(t) << " " << toString(op) << " n=" << n << " offsets " << pl.dst << ","
          << pl.a << "," << pl.b;
      // Nothing outside dst[0, n) is written.
      std::vector<unsigned char> after(es);
      gpu_->download(after.data(), dd + n * es, es);
      EXPECT_EQ(after, std::vector<unsigned char>(es, 0)) << "wrote past the end, n=" << n;
      for (void* p : owned_) gpu_->deallocate(p);
      owned_.clear();
    }
  }
}

TEST_P(GpuKernels, FinalizeEqualsTheCpuBackend) {
  const auto [t, op] = GetParam();
  for (int nranks : {1, 2, 3, 5, 7, 64}) {
    for (size_t n : {size_t{1}, size_t{17}, size_t{4097}}) {
      const auto x = randomElements(t, n, 100 + static_cast<uint64_t>(nranks) + n);
      std::vector<unsigned char> want = x;
      cpu_.finalize(want.data(), n, t, op, nranks);
      unsigned char* d = onDevice(x, 1, dtypeSize(t));
      // Through the backend, whose stream plan orders the download (copy-out stream) after
      // the kernel (compute stream); a kernel launched beside it would be ordered by nothing.
      (void)gpu_->finalize(d, n, t, op, nranks);
      std::vector<unsigned char> got(x.size());
      gpu_->download(got.data(), d, got.size());
      EXPECT_EQ(countWrong(got.data(), want.data(), t, n), 0u)
          << toString(t) << " " << toString(op) << " nranks=" << nranks << " n=" << n;
    }
  }
}

std::string paramName(const ::testing::TestParamInfo<std::tuple<DataType, RedOp>>& info) {
  return std::string(toString(std::get<0>(info.param))) + "_" +
         std::string(toString(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(EveryOpAndType, GpuKernels,
                         ::testing::Combine(::testing::ValuesIn(kAllDataTypes),
                                            ::testing::ValuesIn(kAllRedOps)),
                         paramName);

TEST(GpuKernelsContract, RefuseOperandsNotAlignedToTheirElements) {
  ARL_SKIP_WITHOUT_CUDA_DEVICE();
  gpu::CudaBackend gpu(0);
  auto* p = static_cast<unsigned char*>(gpu.allocate(1024));
  EXPECT_THROW(
      gpu::launchReduce(p + 2, p + 256, p + 512, 4, DataType::Float, RedOp::Sum, gpu.stream()),
      EnforceError);
  gpu.deallocate(p);
}

}  // namespace
}  // namespace arl
