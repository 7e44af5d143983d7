// RankRun: one rank's buffers, in-place aliasing, warm-up and timed loop, and result check,
// as the in-process run and the worker both use them.
#include "exec/rank_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "base/clock.h"
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
std::vector<Seen> runAll(const Schedule& s, const RankRunOptions& o, Ranks& ranks,
                         TelemetrySink* sink = nullptr) {
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
      EXPECT_TRUE(runs[static_cast<size_t>(r)]->run(fabric.transport(r), sink, h));
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

// A one-rank run of `o` whose "collective" copies its input (a sum over one rank) and spoils
// call `bad` (warm-up 0, timed 1..3, the check's further ones 4, 5 with one warm-up and three
// timed iterations): ten elements wrong, or none written (`skip`); call `fails` throws.
struct SpoiledRun {
  int bad = -1;
  bool skip = false;
  int fails = -1;
  int calls = 0;
  // What the hooks saw, in order: "before 4", "timed 2", "checks 10", ...
  std::vector<std::string> log;
  std::vector<TimedIteration> timed;
  std::optional<uint64_t> further;  // afterChecks' #wrong, when it was called
  // With RankRunOptions::exec.progress: what it said during each call (describe()).
  std::vector<std::string> progress;

  bool run(const RankRunOptions& o) {
    const Schedule s = ring(Collective::AllReduce, 1, 1000);
    CpuBackend backend;
    RankRun rankRun(s, 0, backend, o);
    const auto collective = [&](const RankBuffers& b) {
      const int now = calls++;
      if (o.exec.progress != nullptr) progress.push_back(describe(o.exec.progress->snapshot()));
      if (now == fails) throw std::runtime_error("call " + std::to_string(now) + " failed");
      if (now == bad && skip) return;
      std::memcpy(b.output, b.input, 1000 * sizeof(float));
      if (now == bad) std::fill_n(static_cast<float*>(b.output), 10, -7.5F);
    };
    RankRunHooks h;
    h.beforeIteration = [this](uint32_t it) {
      log.push_back("before " + std::to_string(it));
      return true;
    };
    h.afterTimed = [this](const TimedIteration& t) {
      log.push_back("timed " + std::to_string(t.index));
      timed.push_back(t);
    };
    h.afterChecks = [this](uint64_t wrong) {
      log.push_back("checks " + std::to_string(wrong));
      further = wrong;
    };
    return rankRun.run(collective, h);
  }
};

// -c N: the last timed iteration and N - 1 more after it, each checked; the last timed one's
// #wrong comes with it, the further ones' summed after them.
TEST(RankRun, CheckingNIterationsCatchesWhatALaterIterationWouldHide) {
  struct Case {
    uint32_t check;
    int bad;  // the call spoiled
    bool skip;
    std::optional<uint64_t> lastTimed;  // #wrong reported with the last timed iteration
    std::optional<uint64_t> further;    // #wrong of the check's further iterations
  };
  const Case cases[] = {
      {1, 2, false, 0, std::nullopt},  // an earlier timed call, overwritten by the last: unseen
      {3, -1, false, 0, 0},            // nothing spoiled
      {3, 3, false, 10, 0},            // the last timed call
      {3, 4, false, 0, 10},            // the first checked call after the timed ones
      {3, 5, true, 0, 1000},           // the last call wrote nothing: the poisoned output shows it
      {0, 3, false, std::nullopt, std::nullopt},  // no check at all
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("check " + std::to_string(c.check) + ", call " + std::to_string(c.bad));
    RankRunOptions o = options(false, 1, 3);
    o.check = c.check;
    SpoiledRun run{.bad = c.bad, .skip = c.skip};
    ASSERT_TRUE(run.run(o));
    const uint32_t calls = 4 + (c.check > 1 ? c.check - 1 : 0);
    EXPECT_EQ(run.calls, static_cast<int>(calls));
    ASSERT_EQ(run.timed.size(), 3u) << "the checked iterations are not timed";
    EXPECT_EQ(run.timed.back().wrong, c.lastTimed);
    EXPECT_EQ(run.further, c.further);
  }
}

// The last timed result is handed over before the check's further iterations run, so that it
// waits for none of them; their #wrong comes after them.
TEST(RankRun, TheLastTimedResultComesBeforeTheFurtherCheckedIterations) {
  RankRunOptions o = options(false, 1, 3);
  o.check = 3;
  SpoiledRun run;
  ASSERT_TRUE(run.run(o));
  EXPECT_EQ(run.log,
            (std::vector<std::string>{"before 0", "before 1", "timed 0", "before 2", "timed 1",
                                      "before 3", "timed 2", "before 4", "before 5", "checks 0"}));
}

// A failure in one of the check's further iterations leaves every timed result reported.
TEST(RankRun, AFailureInAFurtherCheckedIterationLeavesEveryTimedResultReported) {
  for (const int fails : {4, 5}) {
    SCOPED_TRACE("call " + std::to_string(fails) + " fails");
    RankRunOptions o = options(false, 1, 3);
    o.check = 3;
    SpoiledRun run{.fails = fails};
    EXPECT_THROW(run.run(o), std::runtime_error);
    ASSERT_EQ(run.timed.size(), 3u);
    EXPECT_EQ(run.timed.back().wrong, 0u);
    EXPECT_FALSE(run.further) << "afterChecks is not called for a run that failed";
  }
}

// Progress (the stall's and the heartbeats' source) numbers the timed iterations from 0 and
// says which of the check's further iterations a rank is in, never an iteration past the
// timed ones.
TEST(RankRun, ProgressSaysWhichIterationOfTheCheckRuns) {
  RankProgress progress;
  RankRunOptions o = options(false, 1, 3);
  o.check = 3;
  o.exec.progress = &progress;
  SpoiledRun run;
  ASSERT_TRUE(run.run(o));
  EXPECT_EQ(run.progress,
            (std::vector<std::string>{"is working (iteration 0)", "is working (iteration 0)",
                                      "is working (iteration 1)", "is working (iteration 2)",
                                      "is working (checking iteration 2 of 3)",
                                      "is working (checking iteration 3 of 3)"}));
}

TEST(RankRun, IterationsArePlacedAmongWarmUpTimedAndCheckedOnes) {
  using Kind = IterationPlace::Kind;
  const auto place = [](uint32_t it) { return iterationPlace(it, 2, 3); };
  EXPECT_EQ(place(0).kind, Kind::Warmup);
  EXPECT_EQ(place(1).index, 1u);
  EXPECT_EQ(place(2).kind, Kind::Timed);
  EXPECT_EQ(place(2).index, 0u);
  EXPECT_EQ(place(4).kind, Kind::Timed);
  EXPECT_EQ(place(4).index, 2u);
  // The first checked iteration is the last timed one: the further ones are 2, 3, ...
  EXPECT_EQ(place(5).kind, Kind::Checked);
  EXPECT_EQ(place(5).index, 2u);
  EXPECT_EQ(place(6).index, 3u);
  EXPECT_EQ(iterationPlace(0, 0, 1).kind, Kind::Timed);
}

// The timed iterations whose IterationEnd each rank recorded.
std::vector<std::vector<uint32_t>> recordedIterations(BoundedSink& sink, int n) {
  std::vector<std::vector<uint32_t>> out(static_cast<size_t>(n));
  for (const TelemetryEvent& e : sink.take()) {
    if (e.kind == EventKind::IterationEnd) out[static_cast<size_t>(e.rank)].push_back(e.iteration);
  }
  for (auto& v : out) std::sort(v.begin(), v.end());
  return out;
}

TEST(RankRun, RecordsEveryOtherTimedIterationWhenAsked) {
  const Schedule s = ring(Collective::AllReduce, 3, 1000);
  for (const bool everyOther : {false, true}) {
    SCOPED_TRACE(everyOther ? "every other" : "every one");
    RankRunOptions o = options(false, 2, 5);
    o.exec.telemetry = TelemetryLevel::Steps;
    o.recordEveryOther = everyOther;
    BoundedSink sink(100'000);
    Ranks ranks(s.nranks);
    const auto seen = runAll(s, o, ranks, &sink);
    const std::vector<uint32_t> want =
        everyOther ? std::vector<uint32_t>{1, 3} : std::vector<uint32_t>{0, 1, 2, 3, 4};
    for (const auto& got : recordedIterations(sink, s.nranks)) EXPECT_EQ(got, want);
    // Every iteration is timed and the result is right either way.
    for (const Seen& me : seen) {
      ASSERT_EQ(me.timed.size(), 5u);
      EXPECT_EQ(me.timed.back().wrong.value_or(1), 0u);
    }
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

// Random data has no expected result: a check of it would count every element wrong.
TEST(RankRun, RefusesToCheckRandomData) {
  const Schedule s = ring(Collective::AllReduce, 2, 10);
  CpuBackend backend;
  RankRunOptions o = options(false, 0, 1);
  o.randomData = true;
  o.check = 1;
  try {
    RankRun run(s, 0, backend, o);
    ADD_FAILURE() << "a check of random data was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("random data has no expected result"), std::string::npos)
        << e.what();
  }
  o.check = 0;
  RankRun unchecked(s, 0, backend, o);
  EXPECT_FALSE(unchecked.checks());
}

// ---- Cancellation ----------------------------------------------------------------------------

// The CPU backend, counting uploads and downloads and calling a hook after each.
class CountingBackend final : public Backend {
 public:
  std::function<void(int)> afterUpload, afterDownload;  // called with the count so far
  int uploads = 0, downloads = 0, allocations = 0;

  std::string_view name() const override { return "counting"; }
  MemoryKind memoryKind() const override { return MemoryKind::Host; }
  void* allocate(size_t bytes) override { return allocateUnlessCancelled(bytes, nullptr); }
  void* allocateUnlessCancelled(size_t bytes, const std::atomic<bool>* cancel) override {
    void* p = cpu_.allocateUnlessCancelled(bytes, cancel);
    allocations += p != nullptr ? 1 : 0;
    return p;
  }
  void deallocate(void* p) override {
    cpu_.deallocate(p);
    allocations -= p != nullptr ? 1 : 0;
  }
  void upload(void* dst, const void* host, size_t bytes) override {
    cpu_.upload(dst, host, bytes);
    ++uploads;
    if (afterUpload) afterUpload(uploads);
  }
  void download(void* host, const void* src, size_t bytes) override {
    cpu_.download(host, src, bytes);
    ++downloads;
    if (afterDownload) afterDownload(downloads);
  }
  Ticket reduceFromHost(void* dst, const void* local, const void* payload, size_t count, DataType t,
                        RedOp op) override {
    return cpu_.reduceFromHost(dst, local, payload, count, t, op);
  }
  Ticket copyFromHost(void* dst, const void* payload, size_t bytes) override {
    return cpu_.copyFromHost(dst, payload, bytes);
  }
  Ticket copy(void* dst, const void* src, size_t bytes) override {
    return cpu_.copy(dst, src, bytes);
  }
  Ticket stageOut(const void* src, size_t bytes, const void** hostView) override {
    return cpu_.stageOut(src, bytes, hostView);
  }
  void releaseStaged(const void* hostView) override { cpu_.releaseStaged(hostView); }
  Ticket finalize(void* dst, size_t count, DataType t, RedOp op, int nranks) override {
    return cpu_.finalize(dst, count, t, op, nranks);
  }
  bool done(Ticket t) override { return cpu_.done(t); }
  void wait(Ticket t) override { cpu_.wait(t); }
  void synchronize() override { cpu_.synchronize(); }

 private:
  CpuBackend cpu_;
};

// 4 MiB of floats per rank: the input goes up in four pieces, the check reads four.
constexpr uint64_t kFourPieces = uint64_t{1} << 20;

// A ring schedule with slices of 1 MiB of floats, few ops for a large count.
Schedule bigRing(Collective c, int n, uint64_t count) {
  GenParams p;
  p.collective = c;
  p.nranks = n;
  p.count = count;
  p.sliceElems = uint64_t{1} << 18;
  return generate("ring", p);
}

RankRunOptions cancellable(const std::atomic<bool>& cancel, uint32_t iterations = 1) {
  RankRunOptions o = options(false, 0, iterations);
  o.cancel = &cancel;
  return o;
}

// The message of the PeerError that `f` throws ("" when it throws none).
std::string peerErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const PeerError& e) {
    return e.what();
  }
  return "";
}

TEST(RankRun, CancelledBeforeTheSetUpAllocatesNothing) {
  const Schedule s = bigRing(Collective::AllReduce, 2, kFourPieces);
  CountingBackend backend;
  const std::atomic<bool> cancel{true};
  const std::string err = peerErrorOf([&] { RankRun run(s, 1, backend, cancellable(cancel)); });
  EXPECT_NE(err.find("rank 1: run aborted while allocating its buffers"), std::string::npos) << err;
  EXPECT_EQ(backend.allocations, 0);
  EXPECT_EQ(backend.uploads, 0);
}

TEST(RankRun, CancelWhileFillingTheInputStopsAtTheNextPiece) {
  const Schedule s = bigRing(Collective::AllReduce, 2, kFourPieces);
  CountingBackend backend;
  std::atomic<bool> cancel{false};
  backend.afterUpload = [&](int n) {
    if (n == 2) cancel.store(true);
  };
  const std::string err = peerErrorOf([&] { RankRun run(s, 0, backend, cancellable(cancel)); });
  EXPECT_NE(err.find("rank 0: run aborted while filling its input"), std::string::npos) << err;
  EXPECT_EQ(backend.uploads, 2);
  EXPECT_EQ(backend.allocations, 0) << "the buffers were not given back";
}

// Computing the expected output is the longest part of a set-up (each element combines one
// value per rank): a cancel in the middle of it ends the set-up within a piece.
TEST(RankRun, CancelWhileComputingTheExpectedOutputStopsPromptly) {
  // 64 MiB on 16 ranks: about a second of work here, a piece about a millisecond.
  const Schedule s = bigRing(Collective::AllReduce, 16, uint64_t{16} << 20);
  CountingBackend backend;
  std::atomic<bool> cancel{false};
  std::atomic<int64_t> cancelledAtNs{0};
  std::thread canceller;
  backend.afterUpload = [&](int n) {
    if (n != 64) return;  // the last piece of the input
    canceller = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      cancelledAtNs.store(steadyNowNs());
      cancel.store(true);
    });
  };
  const std::string err = peerErrorOf([&] { RankRun run(s, 3, backend, cancellable(cancel)); });
  const int64_t stoppedAtNs = steadyNowNs();
  ASSERT_TRUE(canceller.joinable()) << "the input did not go up in 64 pieces";
  canceller.join();
  EXPECT_NE(err.find("rank 3: run aborted while computing its expected output"), std::string::npos)
      << err;
  const double ms = static_cast<double>(stoppedAtNs - cancelledAtNs.load()) / 1e6;
  std::printf("[ measured ] set-up stopped %.1f ms after the cancel\n", ms);
  // A piece takes about a millisecond; the bound leaves room for a loaded 2-core machine.
  EXPECT_LT(ms, 200.0);
}

TEST(RankRun, CancelBetweenIterationsStopsBeforeTheNext) {
  const Schedule s = ring(Collective::AllReduce, 1, 1000);
  CpuBackend backend;
  std::atomic<bool> cancel{false};
  RankRun run(s, 0, backend, cancellable(cancel, 5));
  LoopbackFabric fabric(1);
  RankRunHooks h;
  int timed = 0;
  h.beforeIteration = [&](uint32_t it) {
    if (it == 1) cancel.store(true);
    return true;
  };
  h.afterTimed = [&](const TimedIteration&) { ++timed; };
  const std::string err = peerErrorOf([&] { run.run(fabric.transport(0), nullptr, h); });
  EXPECT_NE(err.find("rank 0: run aborted between iterations"), std::string::npos) << err;
  EXPECT_EQ(timed, 2);
}

TEST(RankRun, CancelWhileCheckingStopsAtTheNextPiece) {
  const Schedule s = bigRing(Collective::AllReduce, 1, kFourPieces);
  CountingBackend backend;
  std::atomic<bool> cancel{false};
  RankRun run(s, 0, backend, cancellable(cancel));
  (void)run.countWrong();  // reads the output in four pieces
  EXPECT_EQ(backend.downloads, 4);
  backend.downloads = 0;
  backend.afterDownload = [&](int n) {
    if (n == 2) cancel.store(true);
  };
  LoopbackFabric fabric(1);
  const std::string err = peerErrorOf([&] { run.run(fabric.transport(0), nullptr, {}); });
  EXPECT_NE(err.find("rank 0: run aborted while checking its output"), std::string::npos) << err;
  EXPECT_EQ(backend.downloads, 2);
}

TEST(RankRun, FilledInPiecesTheResultIsExactInAndOutOfPlace) {
  // More than one piece of input, expected output and check, for every collective.
  const int n = 3;
  for (Collective c : kAllCollectives) {
    if (!algorithmSupports("ring", c)) continue;
    for (bool inPlace : {false, true}) {
      GenParams p;
      p.collective = c;
      p.nranks = n;
      p.count = (uint64_t{1} << 18) + 37;
      p.sliceElems = uint64_t{1} << 16;
      p.root = 2;
      const Schedule s = generate("ring", p);
      Ranks ranks(n);
      (void)runAll(s, options(inPlace, 0, 1), ranks);
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(ranks.runs[static_cast<size_t>(r)]->countWrong(), 0u)
            << toString(c) << (inPlace ? " in place" : "") << " rank " << r;
      }
    }
  }
}

}  // namespace
}  // namespace arl
