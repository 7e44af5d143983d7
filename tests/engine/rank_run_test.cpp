// RankRun: one rank's buffers, in-place aliasing, warm-up and timed loop, and result check,
// as the in-process run and the worker both use them.
#include "exec/rank_run.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "base/errors.h"
#include "schedule/generators.h"
#include "schedule/schedule.h"
#include "transport/loopback.h"

namespace arl {
namespace {

Schedule ring(Collective c, int n, uint64_t count) {
  GenParams p;
  p.collective = c;
  p.nranks = n;
  p.count = count;
  p.sliceElems = 16;
  return generate("ring", p);
}

RankRunOptions options(bool inPlace, uint32_t warmup, uint32_t iterations) {
  RankRunOptions o;
  o.exec.telemetry = TelemetryLevel::Off;
  o.inPlace = inPlace;
  o.warmup = warmup;
  o.iterations = iterations;
  return o;
}

// What each rank's hooks saw.
struct Seen {
  std::vector<uint32_t> before;
  std::vector<TimedIteration> timed;
};

// Every rank's backend and run, and the fabric their executors keep using until destroyed.
struct Ranks {
  explicit Ranks(int n) : fabric(n) {}
  LoopbackFabric fabric;
  std::vector<std::unique_ptr<CpuBackend>> backends;
  std::vector<std::unique_ptr<RankRun>> runs;
};

// Runs every rank of `s` on its own thread; returns what each rank's hooks saw.
std::vector<Seen> runAll(const Schedule& s, const RankRunOptions& o, Ranks& ranks) {
  const int n = s.nranks;
  LoopbackFabric& fabric = ranks.fabric;
  auto& runs = ranks.runs;
  auto& backends = ranks.backends;
  std::vector<Seen> seen(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    backends.push_back(std::make_unique<CpuBackend>());
    runs.push_back(std::make_unique<RankRun>(s, r, *backends.back(), o));
  }
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) {
    th.emplace_back([&, r] {
      Seen& me = seen[static_cast<size_t>(r)];
      RankRunHooks h;
      h.beforeIteration = [&me](uint32_t it) {
        me.before.push_back(it);
        return true;
      };
      h.afterTimed = [&me](const TimedIteration& t) { me.timed.push_back(t); };
      EXPECT_TRUE(runs[static_cast<size_t>(r)]->run(fabric.transport(r), nullptr, h));
    });
  }
  for (auto& t : th) t.join();
  return seen;
}

TEST(RankRun, WarmupThenTimedIterationsCheckedOnceAtTheEnd) {
  const Schedule s = ring(Collective::AllReduce, 3, 1000);
  Ranks ranks(s.nranks);
  const auto seen = runAll(s, options(false, 2, 3), ranks);
  for (const Seen& me : seen) {
    EXPECT_EQ(me.before, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
    ASSERT_EQ(me.timed.size(), 3u);
    for (uint32_t i = 0; i < 3; ++i) {
      EXPECT_EQ(me.timed[i].index, i);
      EXPECT_GE(me.timed[i].ns, 0);
      // Only the last timed iteration carries the check.
      EXPECT_EQ(me.timed[i].wrong.has_value(), i == 2);
    }
    EXPECT_EQ(me.timed[2].wrong.value_or(1), 0u);
  }
  for (const auto& run : ranks.runs) {
    EXPECT_TRUE(run->checks());
    EXPECT_EQ(run->countWrong(), 0u);
  }
}

TEST(RankRun, CountsWrongElementsOfACorruptedOutput) {
  const Schedule s = ring(Collective::AllReduce, 2, 64);
  Ranks ranks(s.nranks);
  (void)runAll(s, options(false, 0, 1), ranks);
  float* out = static_cast<float*>(ranks.runs[1]->buffers().output);
  out[5] += 1.0f;
  out[63] = -out[63] - 7.0f;
  EXPECT_EQ(ranks.runs[0]->countWrong(), 0u);
  EXPECT_EQ(ranks.runs[1]->countWrong(), 2u);
}

TEST(RankRun, InPlaceAliasesInputIntoOutputAndRestoresItEachIteration) {
  // All-gather in place: Input is this rank's window of Output (NCCL's convention).
  const int n = 4;
  const uint64_t count = 40;
  const Schedule s = ring(Collective::AllGather, n, count);
  Ranks ranks(s.nranks);
  (void)runAll(s, options(true, 1, 2), ranks);
  for (int r = 0; r < n; ++r) {
    const RankBuffers& b = ranks.runs[static_cast<size_t>(r)]->buffers();
    EXPECT_EQ(static_cast<const unsigned char*>(b.input),
              static_cast<const unsigned char*>(b.output) + inPlaceOffset(s, r) * sizeof(float));
    EXPECT_EQ(ranks.runs[static_cast<size_t>(r)]->countWrong(), 0u) << "rank " << r;
  }
  // Reduce-scatter in place: Output is this rank's window of Input.
  const Schedule rs = ring(Collective::ReduceScatter, n, count);
  Ranks ranks2(n);
  (void)runAll(rs, options(true, 1, 2), ranks2);
  for (int r = 0; r < n; ++r) {
    const RankBuffers& b = ranks2.runs[static_cast<size_t>(r)]->buffers();
    EXPECT_EQ(static_cast<const unsigned char*>(b.output),
              static_cast<const unsigned char*>(b.input) + inPlaceOffset(rs, r) * sizeof(float));
    EXPECT_EQ(ranks2.runs[static_cast<size_t>(r)]->countWrong(), 0u) << "rank " << r;
  }
}

TEST(RankRun, ReduceChecksOnlyTheRoot) {
  GenParams p;
  p.collective = Collective::Reduce;
  p.nranks = 3;
  p.count = 100;
  p.sliceElems = 32;
  p.root = 1;
  const Schedule s = generate("ring", p);
  Ranks ranks(s.nranks);
  const auto seen = runAll(s, options(false, 0, 1), ranks);
  EXPECT_FALSE(ranks.runs[0]->checks());
  EXPECT_TRUE(ranks.runs[1]->checks());
  EXPECT_FALSE(seen[0].timed.back().wrong.has_value());
  EXPECT_EQ(seen[1].timed.back().wrong.value_or(1), 0u);
}

TEST(RankRun, StopsWhenTheHookSaysSo) {
  const Schedule s = ring(Collective::AllReduce, 1, 10);
  CpuBackend backend;
  RankRun run(s, 0, backend, options(false, 1, 5));
  LoopbackFabric fabric(1);
  RankRunHooks h;
  int timed = 0;
  h.beforeIteration = [](uint32_t it) { return it < 2; };
  h.afterTimed = [&](const TimedIteration&) { ++timed; };
  EXPECT_FALSE(run.run(fabric.transport(0), nullptr, h));
  EXPECT_EQ(timed, 1);  // warm-up 0, timed 0, then stopped before iteration 2
}

TEST(RankRun, RefusesARankOutsideTheSchedule) {
  const Schedule s = ring(Collective::AllReduce, 2, 10);
  CpuBackend backend;
  EXPECT_THROW(RankRun(s, 2, backend, options(false, 0, 1)), ConfigError);
  EXPECT_THROW(RankRun(s, 0, backend, options(false, 0, 0)), ConfigError);
}

}  // namespace
}  // namespace arl
