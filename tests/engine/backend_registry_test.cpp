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
  // This build has no GPU library: nothing registered cuda or nccl.
  EXPECT_EQ(builtBackendNames(), (std::vector<std::string_view>{"cpu"}));
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
  EXPECT_EQ(backendUnavailable("opencl").value_or(""),
            "unknown backend 'opencl' (known: cpu, cuda, nccl; this build has: cpu)");
  EXPECT_THROW(registerBackend("opencl", [] { return makeBackend("cpu"); }), ConfigError);
}

}  // namespace
}  // namespace arl
