// The backend registry: names, what each supports, and one message for a backend this build
// does not have.
#include "backend/registry.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/errors.h"

namespace arl {
namespace {

TEST(BackendRegistry, ListsCpuBuiltAndTheGpuBackendsKnown) {
  std::vector<std::string_view> names;
  for (const BackendInfo& b : backends()) names.push_back(b.name);
  EXPECT_EQ(names, (std::vector<std::string_view>{"cpu", "cuda", "nccl", "mpi"}));
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
  for (std::string_view other : {"cuda", "nccl", "mpi"}) {
    if (findBackend(other)->inWorker) available.push_back(other);
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
  for (std::string_view other : {"cuda", "nccl", "mpi"}) {
    if (findBackend(other)->inWorker) has += ", " + std::string(other);
  }
  EXPECT_EQ(backendUnavailable("opencl").value_or(""),
            "unknown backend 'opencl' (known: cpu, cuda, nccl, mpi; this build has: " + has + ")");
  EXPECT_THROW(registerBackend("opencl", [] { return makeBackend("cpu"); }), ConfigError);
}

// What bench and the window ask before they start local workers: each device is checked
// once, told how many of the workers would share it (a device in compute mode Exclusive
// Process takes one process).
TEST(BackendRegistry, ADeviceCheckHearsHowManyLocalWorkersShareEachDevice) {
  static std::vector<std::pair<int, int>> asked;  // (device, sharers); the check outlives the test
  registerDeviceCheck("cuda", [](int device, int sharers) -> std::optional<std::string> {
    asked.emplace_back(device, sharers);
    if (sharers > 2)
      return "device " + std::to_string(device) + " shared by " + std::to_string(sharers);
    return std::nullopt;
  });
  using Asked = std::vector<std::pair<int, int>>;
  EXPECT_EQ(localDevicesProblem("cuda", {}, 2), std::nullopt);
  EXPECT_EQ(asked, (Asked{{-1, 2}})) << "no --device: all on the default device";
  asked.clear();
  EXPECT_EQ(localDevicesProblem("cuda", {1}, 4), "device 1 shared by 4") << "one for all";
  EXPECT_EQ(asked, (Asked{{1, 4}}));
  asked.clear();
  EXPECT_EQ(localDevicesProblem("cuda", {0, 1, 1, 2}, 4), std::nullopt) << "one per worker";
  EXPECT_EQ(asked, (Asked{{0, 1}, {1, 2}, {2, 1}})) << "each device once";
  asked.clear();
  EXPECT_EQ(localDevicesProblem("cuda", {3, 3, 3}, 3), "device 3 shared by 3");
  EXPECT_EQ(localDevicesProblem("cpu", {0}, 8), std::nullopt) << "cpu has no device check";
  registerDeviceCheck("cuda", [](int, int) { return std::optional<std::string>(); });
}

}  // namespace
}  // namespace arl
