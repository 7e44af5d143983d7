// The CUDA backend's operations as the executor uses them: device buffers, payloads from
// pageable and from pinned host memory, copies, staging out, tickets, and a steady state that
// pins no new memory.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "base/errors.h"
#include "exec/check.h"
#include "gpu/cuda_backend.h"
#include "gpu_test_util.h"

namespace arl {
namespace {

using gputest::randomElements;

class CudaBackendOps : public ::testing::Test {
 protected:
  void SetUp() override {
    ARL_SKIP_WITHOUT_CUDA_DEVICE();
    gpu_ = std::make_unique<gpu::CudaBackend>(0);
  }
  std::vector<unsigned char> fetch(const void* src, size_t bytes) {
    std::vector<unsigned char> v(bytes);
    gpu_->download(v.data(), src, bytes);
    return v;
  }
  std::unique_ptr<gpu::CudaBackend> gpu_;
};

TEST_F(CudaBackendOps, DescribesItselfAsDeviceMemory) {
  EXPECT_EQ(gpu_->name(), "cuda");
  EXPECT_EQ(gpu_->memoryKind(), MemoryKind::Device);
  EXPECT_EQ(gpu_->describe().rfind("device 0: ", 0), 0u) << gpu_->describe();
}

TEST_F(CudaBackendOps, AllocatesZeroFilledMemoryThatRoundTrips) {
  const size_t bytes = 3 * 1000 + 1;
  void* p = gpu_->allocate(bytes);
  EXPECT_EQ(fetch(p, bytes), std::vector<unsigned char>(bytes, 0));
  const auto data = randomElements(DataType::Uint8, bytes, 7);
  gpu_->upload(p, data.data(), bytes);
  EXPECT_EQ(fetch(p, bytes), data);
  gpu_->deallocate(p);
  EXPECT_THROW(gpu_->deallocate(p), EnforceError);  // not (any longer) this backend's
}

// A payload in ordinary (pageable) host memory is staged; one in pinned memory is read in
// place. Both give the CPU backend's result, and the payload may be overwritten at once.
TEST_F(CudaBackendOps, ReducesPageableAndPinnedPayloads) {
  const size_t n = 100003;
  const DataType t = DataType::BFloat16;
  const auto local = randomElements(t, n, 1);
  const auto payload = randomElements(t, n, 2);
  std::vector<unsigned char> want(local.size());
  CpuBackend().reduceFromHost(want.data(), local.data(), payload.data(), n, t, RedOp::Max);

  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, payload.size(), cudaHostAllocMapped), cudaSuccess);
  for (const bool usePinned : {false, true}) {
    std::vector<unsigned char> pageable = payload;
    const void* src = pageable.data();
    if (usePinned) src = std::memcpy(pinned, payload.data(), payload.size());
    void* d = gpu_->allocate(local.size());
    gpu_->upload(d, local.data(), local.size());
    const auto ticket = gpu_->reduceFromHost(d, d, src, n, t, RedOp::Max);
    if (!usePinned) std::fill(pageable.begin(), pageable.end(), 0);  // already staged
    gpu_->wait(ticket);
    EXPECT_TRUE(gpu_->done(ticket));
    EXPECT_EQ(countWrong(fetch(d, local.size()).data(), want.data(), t, n), 0u)
        << (usePinned ? "pinned" : "pageable");
    gpu_->deallocate(d);
  }
  cudaFreeHost(pinned);
}

TEST_F(CudaBackendOps, CopiesInAndAcrossAndStagesOut) {
  const size_t bytes = 1 << 20;
  const auto data = randomElements(DataType::Uint8, bytes, 3);
  void* a = gpu_->allocate(bytes);
  void* b = gpu_->allocate(bytes);
  gpu_->copyFromHost(a, data.data(), bytes);
  gpu_->copy(b, a, bytes);
  const void* view = nullptr;
  const auto t = gpu_->stageOut(b, bytes, &view);
  gpu_->wait(t);
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(std::memcmp(view, data.data(), bytes), 0);
  gpu_->releaseStaged(view);
  EXPECT_THROW(gpu_->releaseStaged(view), EnforceError);  // released twice
  // A copy onto itself does nothing; a partial overlap is refused.
  gpu_->wait(gpu_->copy(a, a, bytes));
  EXPECT_THROW(gpu_->copy(static_cast<unsigned char*>(a) + 16, a, 64), EnforceError);
  gpu_->deallocate(a);
  gpu_->deallocate(b);
}

// Reductions into one buffer run in issue order on the compute stream, each after its own
// copy-in: waiting for the last completes them all. A ticket never issued is a bug.
TEST_F(CudaBackendOps, TicketsCompleteInOrder) {
  const size_t n = 1 << 22;
  std::vector<float> ones(n, 1.0f);
  void* d = gpu_->allocate(n * sizeof(float));
  std::vector<Backend::Ticket> tickets;
  for (int i = 0; i < 200; ++i) {  // more than the initial pool of events
    tickets.push_back(gpu_->reduceFromHost(d, d, ones.data(), n / 64, DataType::Float, RedOp::Sum));
  }
  for (size_t i = 1; i < tickets.size(); ++i) EXPECT_GT(tickets[i], tickets[i - 1]);
  gpu_->wait(tickets.back());
  for (auto t : tickets) EXPECT_TRUE(gpu_->done(t));
  std::vector<float> got(n / 64);
  gpu_->download(got.data(), d, got.size() * sizeof(float));
  EXPECT_EQ(got, std::vector<float>(n / 64, 200.0f));
  EXPECT_THROW((void)gpu_->done(tickets.back() + 1000), EnforceError);
  gpu_->deallocate(d);
}

// After the first rounds, a pipeline of stage-ins and stage-outs reuses its pinned buffers.
TEST_F(CudaBackendOps, SteadyStatePinsNoNewMemory) {
  const size_t n = 256 << 10;
  const auto payload = randomElements(DataType::Float, n, 4);
  void* d = gpu_->allocate(n * sizeof(float));
  size_t afterWarmup = 0;
  for (int round = 0; round < 50; ++round) {
    const void* views[4];
    for (int k = 0; k < 4; ++k) {
      gpu_->reduceFromHost(d, d, payload.data(), n, DataType::Float, RedOp::Min);
      gpu_->wait(gpu_->stageOut(d, n * sizeof(float), &views[k]));
    }
    for (const void* v : views) gpu_->releaseStaged(v);
    if (round == 4) afterWarmup = gpu_->pinnedBuffers();
  }
  EXPECT_GT(afterWarmup, 0u);
  EXPECT_EQ(gpu_->pinnedBuffers(), afterWarmup);
  gpu_->deallocate(d);
}

TEST_F(CudaBackendOps, FinalizeDividesAvgOnly) {
  std::vector<int32_t> v = {7, -7, 9, 100};
  void* d = gpu_->allocate(v.size() * sizeof(int32_t));
  gpu_->upload(d, v.data(), v.size() * sizeof(int32_t));
  gpu_->wait(gpu_->finalize(d, v.size(), DataType::Int32, RedOp::Sum, 4));
  gpu_->wait(gpu_->finalize(d, v.size(), DataType::Int32, RedOp::Avg, 2));
  std::vector<int32_t> got(v.size());
  gpu_->download(got.data(), d, got.size() * sizeof(int32_t));
  EXPECT_EQ(got, (std::vector<int32_t>{3, -3, 4, 50}));  // truncating division
  gpu_->deallocate(d);
}

}  // namespace
}  // namespace arl
