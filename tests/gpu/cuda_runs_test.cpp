// Real runs on one GPU: `allreduce-lab bench --backend cuda` with 2, 3 and 4 local workers
// sharing device 0, every algorithm, over CUDA IPC (the workers read each other's slices in
// place) and staged (--cuda-ipc off), results checked element by element by the workers
// (#wrong must be 0), in the last timed iteration and two more after it (-c 3). Sizes are chosen so
// that slices and per-rank parts are uneven: 262240 bytes are 32780 int64 elements, 8195 per rank
// of 4, in 64 KiB slices.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <tuple>

#include "gpu_test_util.h"
#include "schedule/generators.h"

namespace arl {
namespace {

using gputest::Result;
using gputest::runBinary;

// Runs bench with `args` and a JSON file; checks that every row ran and has #wrong 0.
void expectAllCorrect(const std::string& args, size_t rows) {
  const std::string json =
      ::testing::TempDir() + "gpu_runs_" + std::to_string(::getpid()) + ".json";
  const Result r =
      runBinary(gputest::labBinary(), "bench --backend cuda --device 0 -n 3 -w 1 -c 3 " + args +
                                          " --json '" + json + "'");
  ASSERT_EQ(r.rc, 0) << args << "\n" << r.err << r.out;
  const auto v = nlohmann::json::parse(gputest::slurp(json));
  std::remove(json.c_str());
  ASSERT_EQ(v.at("results").size(), rows) << args;
  for (const auto& row : v.at("results")) {
    EXPECT_EQ(row.at("state").get<std::string>(), "done") << args << ": " << row.dump();
    EXPECT_EQ(row.at("wrong").get<int64_t>(), 0)
        << args << ": " << row.at("algorithm") << " " << row.at("size_bytes");
  }
  for (const auto& w : v.at("workers")) EXPECT_EQ(w.at("backend").get<std::string>(), "cuda");
}

// (workers, CUDA IPC on)
using RunsParam = std::tuple<int, bool>;

class CudaRuns : public ::testing::TestWithParam<RunsParam> {
 protected:
  void SetUp() override { ARL_SKIP_WITHOUT_CUDA_DEVICE(); }
  static std::string workers() {
    const auto [n, ipc] = GetParam();
    return " --workers " + std::to_string(n) + " --cuda-ipc " + (ipc ? "on" : "off");
  }
};

// The algorithms "--algo all" runs on n ranks (those rankCountRefusal lets run there).
size_t runnableOn(int n) {
  size_t k = 0;
  for (const std::string& a : algorithmNames()) k += rankCountRefusal(a, n).empty() ? 1 : 0;
  return k;
}

TEST_P(CudaRuns, EveryAlgorithmAllReducesExactly) {
  const std::string w = workers();
  // Sizes 1 MiB + 12 bytes and four times that: slices of 256 KiB leave a short one.
  expectAllCorrect("--algo all -b 1048588 -e 4194352 -f 4 --slice 256K" + w,
                   2 * runnableOn(std::get<0>(GetParam())));
}

TEST_P(CudaRuns, RingAndTreeRunEveryCollectiveAndType) {
  const std::string w = workers();
  const char* cases[] = {
      "--collective reducescatter -d half -o sum",   "--collective allgather -d int64",
      "--collective reduce -d bfloat16 -o max -r 1", "--collective broadcast -d uint8 -r 1",
      "--collective allreduce -d double -o avg",     "--collective allreduce -d int32 -o prod",
      "--collective allreduce -d float -o min",
  };
  for (const char* c : cases) {
    expectAllCorrect(std::string(c) + " --algo ring,tree -b 262240 -e 262240 --slice 64K" + w, 2);
  }
}

TEST_P(CudaRuns, EveryAlgorithmShapedAndInPlace) {
  // The data plane paces a lent slice as the slice (2 GB/s ports, 100 us a message); in place,
  // a rank's input is the output its peers read from.
  expectAllCorrect(
      "--algo all -b 1048588 -e 1048588 --slice 256K --in-place --nic-bw 2G "
      "--link-latency 100us" +
          workers(),
      runnableOn(std::get<0>(GetParam())));
}

INSTANTIATE_TEST_SUITE_P(OneGpu, CudaRuns,
                         ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Bool()),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "Workers" +
                                  (std::get<1>(info.param) ? "Ipc" : "Staged");
                         });

// One slice in flight and more slices than a peer may have out (64): recursive doubling's
// pairs send to each other before either receives, which a loan that waited for its reader
// would deadlock.
TEST(CudaIpc, OneSliceInFlightAndManyLoansStayExact) {
  ARL_SKIP_WITHOUT_CUDA_DEVICE();
  expectAllCorrect(
      "--workers 4 --cuda-ipc on --algo recursive-doubling,ring,tree --inflight 1 "
      "-b 1048588 -e 1048588 --slice 4K",
      3);
}

}  // namespace
}  // namespace arl
