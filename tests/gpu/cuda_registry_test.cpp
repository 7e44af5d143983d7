// What holds with or without a GPU: this build has the cuda backend, and asking for a device
// that is not there is refused with a message that names the backend and the device, by the
// library, by the worker before it joins, and by bench before it starts any worker.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>

#include "backend/registry.h"
#include "base/errors.h"
#include "gpu/cuda_device.h"
#include "gpu/gpu_backends.h"
#include "gpu_test_util.h"

namespace arl {
namespace {

using gputest::Result;
using gputest::runBinary;

bool hasDevice() { return !gpu::cudaDeviceProblem(0).has_value(); }

// The reason device 1023 cannot be used: there is no device at all, or not that one.
std::string expectedStart() {
  return hasDevice() ? "backend 'cuda': device 1023 does not exist (this host has "
                     : "backend 'cuda': no CUDA device (cudaGetDeviceCount: ";
}

TEST(CudaRegistry, CudaIsBuiltOnceTheLibraryRegistersIt) {
  gpu::registerGpuBackends(-1);
  ASSERT_NE(findBackend("cuda"), nullptr);
  EXPECT_TRUE(findBackend("cuda")->built());
  const auto names = builtBackendNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "cuda"), names.end());
  EXPECT_EQ(backendUnavailable("cuda"), std::nullopt);
  for (DataType t : kAllDataTypes) {
    for (RedOp op : kAllRedOps) EXPECT_EQ(backendRefuses("cuda", t, op), std::nullopt);
  }
}

TEST(CudaRegistry, AMissingDeviceIsNamed) {
  const auto why = gpu::cudaDeviceProblem(1023);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(why->rfind(expectedStart(), 0), 0u) << *why;
  EXPECT_EQ(gpu::gpuBackendProblem("cuda", 1023), why);
  EXPECT_EQ(gpu::gpuBackendProblem("cpu", 1023), std::nullopt);
  // What the window and bench ask: core's registry, where registerGpuBackends put the check.
  gpu::registerGpuBackends(-1);
  EXPECT_EQ(localDevicesProblem("cuda", {0, 1023}), why);
  EXPECT_EQ(localDevicesProblem("nccl", {1023}), gpu::gpuBackendProblem("nccl", 1023));
  EXPECT_EQ(localDevicesProblem("cpu", {1023}), std::nullopt);
  if (!hasDevice()) {
    // This host: the driver is absent (error 35) or there is no GPU; either way, said so.
    EXPECT_NE(why->find("cudaGetDeviceCount"), std::string::npos) << *why;
    std::cout << "[ INFO     ] without a device the backend says: " << *why << "\n";
  }
}

TEST(CudaRegistry, MakingTheBackendWithoutTheDeviceThrowsTheSameMessage) {
  gpu::registerGpuBackends(1023);
  try {
    (void)makeBackend("cuda");
    FAIL() << "made a cuda backend on device 1023";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), *gpu::cudaDeviceProblem(1023));
  }
  gpu::registerGpuBackends(-1);
}

TEST(CudaRegistry, WorkerRefusesBeforeJoining) {
  const Result r = runBinary(gputest::workerBinary(),
                             "--connect tcp://127.0.0.1:1 --backend cuda --device 1023");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(gputest::lines(r.err), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("allreduce-worker: " + expectedStart(), 0), 0u) << r.err;
}

TEST(CudaRegistry, BenchRefusesBeforeStartingWorkers) {
  const Result r =
      runBinary(gputest::labBinary(), "bench --backend cuda --device 1023 --workers 2 -b 1M -e 1M");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(gputest::lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("--device 1023: " + expectedStart()), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace arl
