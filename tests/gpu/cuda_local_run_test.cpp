// Every algorithm's schedule run in this process on CUDA backends (one per rank thread, all on
// device 0) over the loopback transport, whose pacing delays every message (an added latency
// and a port rate): payloads are staged in while earlier slices are still being reduced and
// staged out, and results must be exact. No worker processes: a failure here is the
// backend's or the executor's, not the data plane's.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "exec/local_run.h"
#include "gpu/cuda_backend.h"
#include "gpu_test_util.h"
#include "schedule/generators.h"

namespace arl {
namespace {

class CudaLocalRun : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { ARL_SKIP_WITHOUT_CUDA_DEVICE(); }
};

TEST_P(CudaLocalRun, EveryAlgorithmIsExactWithDelayedMessages) {
  const int n = GetParam();
  struct Case {
    DataType t;
    RedOp op;
  };
  for (const Case c : {Case{DataType::Float, RedOp::Sum}, Case{DataType::Half, RedOp::Avg},
                       Case{DataType::Int64, RedOp::Max}}) {
    for (const std::string& algo : algorithmNames()) {
      if (!rankCountRefusal(algo, n).empty()) continue;
      GenParams p;
      p.nranks = n;
      p.count = 100003;  // odd: every slice and part boundary is uneven
      p.sliceElems = 4096;
      const Schedule s = generate(algo, p);
      LocalRunOptions o;
      o.dtype = c.t;
      o.op = c.op;
      o.warmup = 1;
      o.iterations = 2;
      o.inflight = 4;
      o.shaping.addedLatencySeconds = 200e-6;
      o.shaping.portBytesPerSecond = 2e9;
      o.makeBackend = [] { return std::make_unique<gpu::CudaBackend>(0); };
      const LocalRunResult r = runLocal(s, o);
      EXPECT_EQ(r.wrong, 0u) << algo << " " << toString(c.t) << " " << toString(c.op) << " on " << n
                             << " ranks";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(OneGpu, CudaLocalRun, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "Ranks"; });

}  // namespace
}  // namespace arl
