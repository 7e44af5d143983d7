// The CUDA backend's staging pipeline over several streams, and the device times it puts in
// telemetry.
//
// The pipeline: rank 0 of a 2-rank ring all-reduce is replayed on the CUDA backend with rank
// 1's messages from a reference run on the CPU backend, held in pinned host memory (as a data
// plane receiving into pinned buffers would hold them) and arriving 20 us apart (an injected
// delay). Results and sends must be the reference's, byte for byte; the device's own event
// times say what ran when: each reduction after its copy-in, each copy-out after the
// reduction it reads, and, on three streams, copies in of later slices running while earlier
// slices are reduced; on one stream nothing overlaps. Facts of order, not speeds: the only
// tolerance is the events' resolution.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../replay_transport.h"
#include "backend/cpu/cpu_backend.h"
#include "base/clock.h"
#include "base/errors.h"
#include "exec/check.h"
#include "exec/executor.h"
#include "exec/local_run.h"
#include "gpu/cuda_backend.h"
#include "gpu_test_util.h"
#include "schedule/generators.h"
#include "transport/loopback.h"

namespace arl {
namespace {

using testutil::Capturing;
using testutil::Replay;
using testutil::Sent;

// CUDA events time to about 0.5 us (cudaEventElapsedTime's documented resolution).
constexpr int64_t kEventResolutionNs = 1000;

Schedule ring2(uint64_t count, uint64_t slice) {
  GenParams p;
  p.nranks = 2;
  p.count = count;
  p.sliceElems = slice;
  return generate("ring", p);
}

struct Rank {
  std::vector<unsigned char> output;
  std::vector<Sent> sent;
};

std::vector<unsigned char> runRank(const Schedule& s, int r, Transport& t, Backend& b) {
  const size_t es = sizeof(float);
  RankBuffers rb;
  rb.input = b.allocate(s.inputElems * es);
  rb.output = b.allocate(s.outputElems * es);
  std::vector<unsigned char> in(s.inputElems * es);
  fillInput(in.data(), s.collective, DataType::Float, RedOp::Sum, r, s.nranks, s.count);
  b.upload(rb.input, in.data(), in.size());
  ExecOptions eo;
  eo.inflight = 4;
  eo.telemetry = TelemetryLevel::Off;
  {
    Executor ex(s, r, t, b, nullptr, eo);
    ex.run(rb, 0, 0);
  }
  std::vector<unsigned char> out(s.outputElems * es);
  b.download(out.data(), rb.output, out.size());
  b.deallocate(rb.input);
  b.deallocate(rb.output);
  return out;
}

// Both ranks on the CPU backend over the loopback, keeping what each sent.
std::vector<Rank> reference(const Schedule& s) {
  LoopbackFabric fabric(2);
  std::vector<Rank> ranks(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Capturing t(fabric.transport(r));
      CpuBackend b;
      ranks[static_cast<size_t>(r)].output = runRank(s, r, t, b);
      ranks[static_cast<size_t>(r)].sent = std::move(t.sent);
    });
  }
  for (auto& th : threads) th.join();
  return ranks;
}

bool overlap(const gpu::OpTime& a, const gpu::OpTime& b) {
  return a.startNs + kEventResolutionNs < b.endNs && b.startNs + kEventResolutionNs < a.endNs;
}

class CudaStreams : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { ARL_SKIP_WITHOUT_CUDA_DEVICE(); }
};

TEST_P(CudaStreams, StagingPipelineWithDelayedMessagesIsExactAndOrdered) {
  const int streams = GetParam();
  // 128 MiB of floats in 4 MiB slices: a slice's copy takes far longer than a kernel's launch.
  const Schedule s = ring2(uint64_t{32} << 20, uint64_t{1} << 20);
  const std::vector<Rank> ref = reference(s);
  Replay t(
      0, 2, ref[1].sent, std::chrono::microseconds(20),
      [](size_t bytes) {
        void* p = nullptr;
        EXPECT_EQ(cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault), cudaSuccess);
        return p;
      },
      [](void* p) { cudaFreeHost(p); });
  gpu::CudaBackend b(0, streams);
  ASSERT_EQ(b.streams(), streams);
  b.recordOpTimes(true);
  const std::vector<unsigned char> out = runRank(s, 0, t, b);
  const std::vector<gpu::OpTime> ops = b.takeOpTimes();

  EXPECT_EQ(out, ref[0].output);
  ASSERT_EQ(t.sent.size(), ref[0].sent.size());
  for (size_t k = 0; k < t.sent.size(); ++k) {
    EXPECT_EQ(std::memcmp(&t.sent[k].header, &ref[0].sent[k].header, sizeof(ChunkHeader)), 0)
        << "message " << k;
    EXPECT_EQ(t.sent[k].payload, ref[0].sent[k].payload) << "message " << k;
  }

  std::map<uint64_t, gpu::OpTime> byTicket;
  for (const gpu::OpTime& o : ops) byTicket[o.ticket] = o;
  ASSERT_GT(byTicket.size(), 32u);
  size_t reductions = 0, copyOuts = 0;
  for (const auto& [ticket, o] : byTicket) {
    EXPECT_LE(o.startNs, o.endNs + kEventResolutionNs) << "ticket " << ticket;
    const auto prev = byTicket.find(ticket - 1);
    if (prev == byTicket.end()) continue;
    // A reduction is issued right after its copy-in; a send's copy-out right after the
    // reduction whose result it reads.
    if (o.lane == Lane::Compute && prev->second.lane == Lane::CopyIn) {
      ++reductions;
      EXPECT_GE(o.startNs + kEventResolutionNs, prev->second.endNs) << "reduction " << ticket;
    }
    if (o.lane == Lane::CopyOut && prev->second.lane == Lane::Compute) {
      ++copyOuts;
      EXPECT_GE(o.startNs + kEventResolutionNs, prev->second.endNs) << "copy-out " << ticket;
    }
  }
  EXPECT_GT(reductions, 0u);
  EXPECT_GT(copyOuts, 0u);

  // A copy-in issued after a reduction, running while it runs: the next slice coming in.
  size_t overlapping = 0;
  for (const auto& [kt, k] : byTicket) {
    if (k.lane != Lane::Compute) continue;
    for (auto it = byTicket.upper_bound(kt); it != byTicket.end(); ++it) {
      if (it->second.lane == Lane::CopyIn && overlap(k, it->second)) ++overlapping;
    }
  }
  std::vector<gpu::OpTime> sorted(ops);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& x, const auto& y) { return x.startNs < y.startNs; });
  size_t concurrent = 0;
  for (size_t i = 1; i < sorted.size(); ++i) {
    concurrent += sorted[i].startNs + kEventResolutionNs < sorted[i - 1].endNs ? 1 : 0;
  }
  std::printf(
      "[ streams %d ] %zu operations, %zu copy-ins overlapping an earlier reduction, "
      "%zu starting before the previous one ended\n",
      streams, ops.size(), overlapping, concurrent);
  if (streams == 1) {
    EXPECT_EQ(concurrent, 0u);  // one stream: one operation at a time
  } else {
    EXPECT_GT(overlapping, 0u);
  }
}

// ARL_CUDA_STREAMS: 1 to 3, 3 when unset; anything else is refused naming the variable. Needs
// no device.
TEST(CudaStreamsEnv, ChoosesOneTwoOrThreeStreams) {
  const char* saved = std::getenv(gpu::kCudaStreamsEnv);
  const std::string keep = saved != nullptr ? saved : "";
  ::unsetenv(gpu::kCudaStreamsEnv);
  EXPECT_EQ(gpu::cudaStreamsFromEnv(), 3);
  for (const char* v : {"1", "2", "3"}) {
    ::setenv(gpu::kCudaStreamsEnv, v, 1);
    EXPECT_EQ(gpu::cudaStreamsFromEnv(), v[0] - '0');
  }
  for (const char* v : {"0", "4", "three", "2 "}) {
    ::setenv(gpu::kCudaStreamsEnv, v, 1);
    try {
      (void)gpu::cudaStreamsFromEnv();
      ADD_FAILURE() << "accepted '" << v << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("ARL_CUDA_STREAMS='") + v + "'"),
                std::string::npos)
          << e.what();
    }
  }
  if (saved != nullptr) {
    ::setenv(gpu::kCudaStreamsEnv, keep.c_str(), 1);
  } else {
    ::unsetenv(gpu::kCudaStreamsEnv);
  }
}

INSTANTIATE_TEST_SUITE_P(OneGpu, CudaStreams, ::testing::Values(1, 3),
                         [](const auto& info) { return std::to_string(info.param) + "Streams"; });

// A cuda run's reductions and step ends are timed by the GPU (ClockSource::Device), the rest
// by the host; a rank's step ends are in order, and every device time of an iteration lies
// after the rank's previous iteration ended and before this one did, as the host saw it
// (within the clock mapping's window).
TEST(CudaClock, StepEventsCarryTheGpuClockWithinTheIteration) {
  ARL_SKIP_WITHOUT_CUDA_DEVICE();
  constexpr int64_t kMappingToleranceNs = 50'000;
  GenParams p;
  p.nranks = 2;
  p.count = 1 << 20;
  p.sliceElems = 64 << 10;
  const Schedule s = generate("ring", p);
  BoundedSink sink(1 << 20);
  LocalRunOptions o;
  o.iterations = 3;
  o.telemetry = TelemetryLevel::Chunks;
  o.sink = &sink;
  o.shaping.addedLatencySeconds = 100e-6;
  o.makeBackend = [] { return std::make_unique<gpu::CudaBackend>(0); };
  const int64_t start = steadyNowNs();
  const LocalRunResult r = runLocal(s, o);
  EXPECT_EQ(r.wrong, 0u);
  const std::vector<TelemetryEvent> events = sink.take();
  ASSERT_FALSE(events.empty());

  // Per rank: the host's IterationEnd of each iteration.
  std::map<std::pair<int, uint32_t>, int64_t> iterationEnd;
  for (const TelemetryEvent& e : events) {
    if (e.kind == EventKind::IterationEnd) iterationEnd[{e.rank, e.iteration}] = e.tNs;
  }
  std::map<std::pair<int, uint32_t>, int64_t> lastStep;
  size_t device = 0;
  for (const TelemetryEvent& e : events) {
    const bool timedOnGpu = e.kind == EventKind::ReduceEnd || e.kind == EventKind::StepEnd;
    EXPECT_EQ(e.clock, timedOnGpu ? ClockSource::Device : ClockSource::Host) << toString(e.kind);
    if (!timedOnGpu) continue;
    ++device;
    const auto end = iterationEnd.find({e.rank, e.iteration});
    ASSERT_NE(end, iterationEnd.end());
    const auto before = iterationEnd.find({e.rank, e.iteration - 1});
    const int64_t lo = e.iteration == 0 || before == iterationEnd.end() ? start : before->second;
    EXPECT_GE(e.tNs, lo - kMappingToleranceNs) << toString(e.kind) << " step " << e.step;
    EXPECT_LE(e.tNs, end->second + kMappingToleranceNs) << toString(e.kind) << " step " << e.step;
    if (e.kind == EventKind::StepEnd) {
      auto [it, first] = lastStep.emplace(std::make_pair(e.rank, e.iteration), e.tNs);
      if (!first) {
        EXPECT_GE(e.tNs, it->second) << "rank " << e.rank << " step " << e.step;
        it->second = e.tNs;
      }
    }
  }
  EXPECT_GT(device, 0u);
}

}  // namespace
}  // namespace arl
