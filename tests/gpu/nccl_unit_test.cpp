// The NCCL backend's host-side parts: the id token, the check's tolerance (against a model of
// NCCL's pre-multiplied average, run on the host and labelled as a model), the registration,
// and what the backend and library say on a machine without a GPU. None of these needs a
// device; those that would behave differently with one skip there.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "base/errors.h"
#include "exec/check.h"
#include "exec/collective_library.h"
#include "exec/numeric.h"
#include "gpu/nccl_backend.h"
#include "gpu/nccl_library.h"
#include "gpu/nccl_register.h"
#include "gpu/nccl_token.h"
#include "gpu/nccl_tolerance.h"
#include "runtime/protocol.h"

namespace arl::gpu {
namespace {

bool deviceHere() { return !ncclDeviceProblem(0).has_value(); }

TEST(NcclToken, RoundTripsAnIdAsAValidEndpoint) {
  std::mt19937 rng(7);
  for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{128}}) {
    std::vector<uint8_t> id(n);
    for (auto& b : id) b = static_cast<uint8_t>(rng());
    const std::string token = encodeNcclToken(id.data(), id.size());
    EXPECT_EQ(token.rfind("nccl://id/", 0), 0u);
    EXPECT_TRUE(validEndpoint(token)) << token;
    const auto back = decodeNcclToken(token, n);
    ASSERT_TRUE(back.has_value()) << token;
    EXPECT_EQ(*back, id);
  }
  std::vector<uint8_t> id(128, 0xff);
  EXPECT_EQ(encodeNcclToken(id.data(), id.size()).size(), 10u + 171u);
}

TEST(NcclToken, RefusesWhatItDidNotMake) {
  const uint8_t id[3] = {1, 2, 3};
  const std::string ok = encodeNcclToken(id, 3);
  EXPECT_FALSE(decodeNcclToken(ok, 4).has_value());                 // not the size asked for
  EXPECT_FALSE(decodeNcclToken("tcp://h:1", 3).has_value());        // another scheme
  EXPECT_FALSE(decodeNcclToken("nccl://id/AQI+", 3).has_value());   // not base64url
  EXPECT_FALSE(decodeNcclToken("nccl://id/AQIDB", 3).has_value());  // 5 characters: no bytes
  EXPECT_FALSE(decodeNcclToken("nccl://id/AR", 1).has_value());     // low bits of a tail set
  EXPECT_FALSE(decodeNcclToken(std::string(kLibraryMemberEndpoint), 128).has_value());
}

TEST(NcclTolerance, OnlyAFloatingAverageOfSeveralRanksIsInexact) {
  EXPECT_EQ(ncclTolerance(Collective::AllReduce, DataType::Float, RedOp::Sum, 8), 0);
  EXPECT_EQ(ncclTolerance(Collective::AllReduce, DataType::Int32, RedOp::Avg, 8), 0);
  EXPECT_EQ(ncclTolerance(Collective::AllReduce, DataType::Float, RedOp::Avg, 1), 0);
  EXPECT_EQ(ncclTolerance(Collective::AllGather, DataType::Float, RedOp::Avg, 8), 0);
  EXPECT_EQ(ncclTolerance(Collective::AllReduce, DataType::Float, RedOp::Avg, 2),
            2 * std::ldexp(1.0, -22));
  EXPECT_EQ(ncclTolerance(Collective::ReduceScatter, DataType::Float, RedOp::Avg, 16),
            16 * std::ldexp(1.0, -22));
  EXPECT_EQ(ncclTolerance(Collective::Reduce, DataType::Half, RedOp::Avg, 4),
            4 * std::ldexp(1.0, -9));
  EXPECT_EQ(ncclTolerance(Collective::AllReduce, DataType::BFloat16, RedOp::Avg, 3),
            3 * std::ldexp(1.0, -6));
  EXPECT_EQ(ncclTolerance(Collective::AllReduce, DataType::Double, RedOp::Avg, 64),
            64 * std::ldexp(1.0, -51));
}

// A host model of NCCL's float avg, not NCCL itself: every rank's element times fl(1/n), the
// products summed in `order` with a rounding to the type after every step, as a device that
// computes in the element type would. It checks the tolerance against the lab's inputs and
// expected values; only a run on a GPU checks NCCL.
uint64_t wrongUnderModel(DataType t, int n, uint64_t count, bool reversed) {
  const size_t es = dtypeSize(t);
  std::vector<std::vector<unsigned char>> in(static_cast<size_t>(n),
                                             std::vector<unsigned char>(count * es));
  for (int r = 0; r < n; ++r) {
    fillInput(in[static_cast<size_t>(r)].data(), Collective::AllReduce, t, RedOp::Avg, r, n, count);
  }
  std::vector<unsigned char> expected(count * es), got(count * es);
  EXPECT_TRUE(fillExpected(expected.data(), Collective::AllReduce, t, RedOp::Avg, 0, n, count, 0));
  unsigned char inv[8], term[8], acc[8];
  fromDouble(t, 1.0 / n, inv);
  for (uint64_t i = 0; i < count; ++i) {
    fromDouble(t, 0.0, acc);
    for (int k = 0; k < n; ++k) {
      const int r = reversed ? n - 1 - k : k;
      fromDouble(t, toDouble(t, in[static_cast<size_t>(r)].data() + i * es) * toDouble(t, inv),
                 term);
      fromDouble(t, toDouble(t, acc) + toDouble(t, term), acc);
    }
    std::memcpy(got.data() + i * es, acc, es);
  }
  return countWrongWithin(got.data(), expected.data(), t, count,
                          ncclTolerance(Collective::AllReduce, t, RedOp::Avg, n));
}

TEST(NcclTolerance, CoversAModelOfThePreMultipliedAverage) {
  for (DataType t : {DataType::Float, DataType::Double, DataType::Half, DataType::BFloat16}) {
    for (int n : {2, 3, 5, 7, 12, 31, 64}) {
      EXPECT_EQ(wrongUnderModel(t, n, 4096, false), 0u) << toString(t) << " n=" << n;
      EXPECT_EQ(wrongUnderModel(t, n, 4096, true), 0u) << toString(t) << " n=" << n;
    }
  }
}

TEST(NcclTolerance, TheModelDiffersFromTheLabsBitsSoTheToleranceIsNeeded) {
  // Were the pre-multiplied average always bit-identical, a tolerance would hide nothing; it
  // is not, for n = 3 (1/3 is inexact) in float.
  const int n = 3;
  const uint64_t count = 4096;
  std::vector<float> in0(count), in1(count), in2(count), expected(count), got(count);
  fillInput(in0.data(), Collective::AllReduce, DataType::Float, RedOp::Avg, 0, n, count);
  fillInput(in1.data(), Collective::AllReduce, DataType::Float, RedOp::Avg, 1, n, count);
  fillInput(in2.data(), Collective::AllReduce, DataType::Float, RedOp::Avg, 2, n, count);
  ASSERT_TRUE(fillExpected(expected.data(), Collective::AllReduce, DataType::Float, RedOp::Avg, 0,
                           n, count, 0));
  const float inv = 1.0f / 3.0f;
  for (uint64_t i = 0; i < count; ++i) got[i] = (in0[i] * inv + in1[i] * inv) + in2[i] * inv;
  EXPECT_GT(countWrong(got.data(), expected.data(), DataType::Float, count), 0u);
  EXPECT_EQ(countWrongWithin(got.data(), expected.data(), DataType::Float, count,
                             ncclTolerance(Collective::AllReduce, DataType::Float, RedOp::Avg, n)),
            0u);
}

TEST(NcclRegistration, MakesTheBackendAndTheLibraryKnown) {
  registerNccl();
  ASSERT_TRUE(findBackend("nccl")->built());
  EXPECT_TRUE(findBackend("nccl")->inWorker);  // the build says the worker has it
  EXPECT_TRUE(collectiveLibraryRegistered("nccl"));
  auto b = makeBackend("nccl");
  EXPECT_EQ(b->name(), "nccl");
  EXPECT_EQ(b->memoryKind(), MemoryKind::Device);
}

TEST(NcclBackend, RefusesTheExecutorsOperations) {
  NcclBackend b;
  float x = 0;
  EXPECT_THROW(b.reduceFromHost(&x, &x, &x, 1, DataType::Float, RedOp::Sum), ConfigError);
  EXPECT_THROW(b.copy(&x, &x, 4), ConfigError);
  const void* view = nullptr;
  EXPECT_THROW(b.stageOut(&x, 4, &view), ConfigError);
  try {
    b.finalize(&x, 1, DataType::Float, RedOp::Avg, 2);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("runs NCCL's own collectives only"), std::string::npos);
  }
}

TEST(NcclWithoutDevice, SaysWhyBeforeAnyRun) {
  if (deviceHere()) GTEST_SKIP() << "a CUDA device is present: nothing to refuse";
  const auto why = ncclDeviceProblem(0);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("no CUDA device"), std::string::npos) << *why;
  LibraryRunSpec spec;
  spec.algorithm = findLibraryAlgorithm("nccl-ring");
  spec.device = 0;
  try {
    NcclLibrary lib(spec);
    FAIL() << "an NCCL library without a device";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL: no CUDA device"), std::string::npos) << e.what();
  }
}

TEST(NcclWithoutDevice, AllocationFailsCleanly) {
  if (deviceHere()) GTEST_SKIP() << "a CUDA device is present";
  NcclBackend b;
  try {
    (void)b.allocate(1024);
    FAIL() << "device memory without a device";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaMalloc of 1024 bytes"), std::string::npos);
  }
}

}  // namespace
}  // namespace arl::gpu
