// The backend registry: names, what each supports, and one message for a backend this build
// does not have.
#include "backend/registry.h"

#include <gtest/gtest.h>

#include <string>

#include "base/errors.h"

namespace arl {
namespace {

TEST(BackendRegistry, ListsCpuBuiltAndTheGpuBackendsKnown) {
  std::vector<std::string_view> names;
  for (const BackendInfo& b : backends()) names.push_back(b.name);
  EXPECT_EQ(names, (std::vector<std::string_view>{"cpu", "cuda", "nccl"}));
  ASSERT_NE(findBackend("cpu"), nullptr);
  EXPECT_TRUE(findBackend("cpu")->built());
  EXPECT_EQ(findBackend("cpu")->memory, MemoryKind::Host);
  EXPECT_EQ(findBackend("cuda")->memory, MemoryKind::Device);
  EXPECT_EQ(findBackend("nosuch"), nullptr);
  // This test program links no GPU library: nothing registered cuda or nccl here, whatever
  // this build's worker has.
  EXPECT_FALSE(findBackend("cuda")->built());
  EXPECT_FALSE(findBackend("nccl")->built());
  std::vector<std::string_view> available = {"cpu"};
  for (std::string_view gpu : {"cuda", "nccl"}) {
    if (findBackend(gpu)->inWorker) available.push_back(gpu);
  }
  EXPECT_EQ(builtBackendNames(), available);
}

TEST(BackendRegistry, ABackendOfTheWorkerAloneIsAcceptedButNotMadeHere) {
  const BackendInfo& nccl = *findBackend("nccl");
  if (!nccl.inWorker) GTEST_SKIP() << "this build's worker has no NCCL (no CUDA toolkit or NCCL)";
  EXPECT_EQ(backendUnavailable("nccl"), std::nullopt);
  try {
    (void)makeBackend("nccl");
    FAIL() << "made a backend this program does not have";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "backend 'nccl' is built into allreduce-worker, not into this program");
  }
}

TEST(BackendRegistry, CpuSupportsEveryTypeAndOperator) {
  const BackendInfo& cpu = *findBackend("cpu");
  for (DataType t : kAllDataTypes) EXPECT_TRUE(cpu.supports(t)) << toString(t);
  for (RedOp op : kAllRedOps) EXPECT_TRUE(cpu.supports(op)) << toString(op);
  EXPECT_EQ(backendRefuses("cpu", DataType::BFloat16, RedOp::Avg), std::nullopt);
}

TEST(BackendRegistry, MakesTheCpuBackend) {
  auto b = makeBackend("cpu");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->name(), "cpu");
  EXPECT_EQ(backendUnavailable("cpu"), std::nullopt);
}

TEST(BackendRegistry, OneMessageForABackendNotBuilt) {
  if (findBackend("cuda")->inWorker || findBackend("nccl")->inWorker) {
    GTEST_SKIP() << "this build has a GPU backend; the messages for a build without are not "
                    "reachable here";
  }
  EXPECT_EQ(backendUnavailable("cuda").value_or(""),
            "backend 'cuda' needs a build with CUDA (ARL_WITH_CUDA); this build has: cpu");
  EXPECT_EQ(backendUnavailable("nccl").value_or(""),
            "backend 'nccl' needs a build with CUDA and NCCL (ARL_WITH_CUDA); this build has: cpu");
  try {
    (void)makeBackend("cuda");
    FAIL() << "made a backend this build does not have";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), *backendUnavailable("cuda"));
  }
  EXPECT_THROW(requireBackend("nccl"), ConfigError);
  EXPECT_EQ(backendRefuses("cuda", DataType::Float, RedOp::Sum), backendUnavailable("cuda"));
}

TEST(BackendRegistry, NamesTheKnownBackendsForAnUnknownOne) {
  std::string has = "cpu";
  for (std::string_view gpu : {"cuda", "nccl"}) {
    if (findBackend(gpu)->inWorker) has += ", " + std::string(gpu);
  }
  EXPECT_EQ(backendUnavailable("opencl").value_or(""),
            "unknown backend 'opencl' (known: cpu, cuda, nccl; this build has: " + has + ")");
  EXPECT_THROW(registerBackend("opencl", [] { return makeBackend("cpu"); }), ConfigError);
}

}  // namespace
}  // namespace arl
