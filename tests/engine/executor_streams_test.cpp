// The executor over a backend that runs its operations on several streams, as the CUDA backend
// does with three: copies in, reductions, copies out, ordered only by the waits StreamPlan
// decides (backend/stream_plan.h), completing in a random order that honours them. Checks that
// the results stay exact, that sends still leave in program order, and that the copy-out of one
// slice overlaps the copy-in and reduction of the next when the next message is already there.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../replay_transport.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/stream_plan.h"
#include "base/clock.h"
#include "base/errors.h"
#include "exec/check.h"
#include "exec/executor.h"
#include "exec/numeric.h"
#include "exec/telemetry.h"
#include "schedule/generators.h"
#include "transport/loopback.h"

namespace arl {
namespace {

using testutil::Capturing;
using testutil::Replay;
using testutil::Sent;

// Host memory standing in for device memory; every operation is enqueued on the stream of its
// lane with the waits StreamPlan gives it, and runs when done() or wait() pick it.
class StreamedBackend final : public Backend {
 public:
  explicit StreamedBackend(uint32_t seed, int streams = 3)
      : plan_(streams),
        rng_(seed),
        queues_(static_cast<size_t>(streams)),
        doneUpTo_(static_cast<size_t>(streams), 0) {}

  std::string_view name() const override { return "streamed"; }
  MemoryKind memoryKind() const override { return MemoryKind::Device; }
  void* allocate(size_t bytes) override { return buffer(bytes); }
  void deallocate(void* p) override { (void)p; }  // freed with the backend
  void upload(void* dst, const void* host, size_t bytes) override {
    synchronize();
    std::memcpy(dst, host, bytes);
  }
  void download(void* host, const void* src, size_t bytes) override {
    synchronize();
    std::memcpy(host, src, bytes);
  }
  // As the CUDA backend: the payload is copied in to a staging buffer, which the reduction reads.
  Ticket reduceFromHost(void* dst, const void* local, const void* payload, size_t count, DataType t,
                        RedOp op) override {
    const size_t bytes = count * dtypeSize(t);
    unsigned char* stage = buffer(bytes);
    enqueue(Lane::CopyIn, {}, {MemRange::of(stage, bytes)},
            [=] { std::memcpy(stage, payload, bytes); });
    return enqueue(Lane::Compute, {MemRange::of(local, bytes), MemRange::of(stage, bytes)},
                   {MemRange::of(dst, bytes)}, [=] {
                     const size_t es = dtypeSize(t);
                     for (size_t i = 0; i < count; ++i) {
                       reduceScalar(t, op, static_cast<const unsigned char*>(local) + i * es,
                                    stage + i * es, static_cast<unsigned char*>(dst) + i * es);
                     }
                   });
  }
  Ticket copyFromHost(void* dst, const void* payload, size_t bytes) override {
    return enqueue(Lane::CopyIn, {}, {MemRange::of(dst, bytes)},
                   [=] { std::memcpy(dst, payload, bytes); });
  }
  Ticket copy(void* dst, const void* src, size_t bytes) override {
    return enqueue(Lane::Compute, {MemRange::of(src, bytes)}, {MemRange::of(dst, bytes)},
                   [=] { std::memmove(dst, src, bytes); });
  }
  Ticket stageOut(const void* src, size_t bytes, const void** hostView) override {
    unsigned char* p = buffer(bytes);
    std::memset(p, 0xEE, bytes);
    *hostView = p;
    const Ticket t = enqueue(Lane::CopyOut, {MemRange::of(src, bytes)}, {MemRange::of(p, bytes)},
                             [=] { std::memcpy(p, src, bytes); });
    stagings_.insert(t);
    return t;
  }
  void releaseStaged(const void* hostView) override { (void)hostView; }
  Ticket finalize(void* dst, size_t count, DataType t, RedOp op, int nranks) override {
    const size_t bytes = count * dtypeSize(t);
    return enqueue(Lane::Compute, {MemRange::of(dst, bytes)}, {MemRange::of(dst, bytes)}, [=] {
      const size_t es = dtypeSize(t);
      for (size_t i = 0; i < count; ++i) {
        finalizeScalar(t, op, static_cast<unsigned char*>(dst) + i * es, nranks);
      }
    });
  }
  bool done(Ticket t) override {
    if (!complete(t)) runOne();
    return complete(t);
  }
  void wait(Ticket t) override {
    while (!complete(t)) runOne();
  }
  void synchronize() override {
    while (pending_ > 0) runOne();
  }
  // With timesOnDevice: when the operation ran, on the steady clock, as a device's clock
  // mapped to the host's would say.
  std::optional<int64_t> deviceEndNs(Ticket t) override {
    const auto it = endNs_.find(t);
    if (!timesOnDevice || it == endNs_.end()) return std::nullopt;
    return it->second;
  }

  bool timesOnDevice = false;

  // Copy-ins and reductions issued while an earlier copy-out had not completed.
  uint64_t overlappedIssues = 0;
  // Operations that completed after one issued later had.
  uint64_t outOfOrder = 0;

 private:
  struct Pending {
    Ticket id = 0;
    std::vector<StreamPlan::Wait> waits;
    std::function<void()> work;
  };

  unsigned char* buffer(size_t bytes) {
    buffers_.push_back(std::make_unique<unsigned char[]>(std::max<size_t>(bytes, 1)));
    return buffers_.back().get();
  }

  Ticket enqueue(Lane lane, std::vector<MemRange> reads, std::vector<MemRange> writes,
                 std::function<void()> work) {
    if (lane != Lane::CopyOut) {
      for (Ticket s : stagings_) {
        if (!complete(s)) {
          ++overlappedIssues;
          break;
        }
      }
    }
    StreamPlan::Planned p = plan_.add(lane, reads, writes);
    streamOf_[p.id] = p.stream;
    queues_[static_cast<size_t>(p.stream)].push_back({p.id, std::move(p.waits), std::move(work)});
    ++pending_;
    return p.id;
  }

  bool complete(Ticket t) const {
    const auto it = streamOf_.find(t);
    ARL_ENFORCE(it != streamOf_.end(), "ticket " << t << " never issued");
    return doneUpTo_[static_cast<size_t>(it->second)] >= t;
  }

  // Runs the front operation of a random stream whose waits are all complete.
  void runOne() {
    std::vector<size_t> ready;
    for (size_t s = 0; s < queues_.size(); ++s) {
      if (queues_[s].empty()) continue;
      bool ok = true;
      for (const StreamPlan::Wait& w : queues_[s].front().waits) {
        ok = ok && doneUpTo_[static_cast<size_t>(w.stream)] >= w.id;
      }
      if (ok) ready.push_back(s);
    }
    ARL_ENFORCE(!ready.empty(), "no runnable operation among " << pending_ << " pending");
    const size_t s = ready[rng_() % ready.size()];
    Pending op = std::move(queues_[s].front());
    queues_[s].pop_front();
    op.work();
    endNs_[op.id] = steadyNowNs();
    if (op.id < newest_) ++outOfOrder;
    newest_ = std::max(newest_, op.id);
    doneUpTo_[s] = op.id;
    plan_.completed(static_cast<int>(s), op.id);
    stagings_.erase(op.id);
    --pending_;
  }

  StreamPlan plan_;
  std::mt19937 rng_;
  std::vector<std::deque<Pending>> queues_;
  std::vector<Ticket> doneUpTo_;
  std::unordered_map<Ticket, int> streamOf_;
  std::unordered_map<Ticket, int64_t> endNs_;
  std::set<Ticket> stagings_;  // copy-outs not yet complete
  std::vector<std::unique_ptr<unsigned char[]>> buffers_;
  size_t pending_ = 0;
  Ticket newest_ = 0;
};

Schedule allReduce(const char* algo, int n, uint64_t count, uint64_t slice) {
  GenParams p;
  p.collective = Collective::AllReduce;
  p.nranks = n;
  p.count = count;
  p.sliceElems = slice;
  return generate(algo, p);
}

struct RankResult {
  std::vector<unsigned char> output;
  std::vector<Sent> sent;
  uint64_t overlapped = 0;
  uint64_t outOfOrder = 0;
};

// Runs rank r of `s` (float sum) on `b` over `t`, one iteration; returns its output.
std::vector<unsigned char> runRank(const Schedule& s, int r, Transport& t, Backend& b, int inflight,
                                   TelemetrySink* sink = nullptr,
                                   std::function<int64_t()> clock = {}) {
  const size_t es = sizeof(float);
  RankBuffers rb;
  rb.input = b.allocate(s.inputElems * es);
  rb.output = b.allocate(s.outputElems * es);
  if (s.scratchElems > 0) rb.scratch = b.allocate(s.scratchElems * es);
  std::vector<unsigned char> in(s.inputElems * es);
  fillInput(in.data(), s.collective, DataType::Float, RedOp::Sum, r, s.nranks, s.count);
  b.upload(rb.input, in.data(), in.size());
  ExecOptions eo;
  eo.inflight = inflight;
  eo.telemetry = sink != nullptr ? TelemetryLevel::Chunks : TelemetryLevel::Off;
  eo.clock = std::move(clock);
  Executor ex(s, r, t, b, sink, eo);
  ex.run(rb, 0, 0);
  std::vector<unsigned char> out(s.outputElems * es);
  b.download(out.data(), rb.output, out.size());
  return out;
}

// Every rank on its own thread over a loopback fabric; streamed backends when seed != 0.
std::vector<RankResult> runAll(const Schedule& s, uint32_t seed, const LinkShaping& shaping,
                               int inflight = 4) {
  const int n = s.nranks;
  LoopbackFabric fabric(n, shaping);
  std::vector<RankResult> results(static_cast<size_t>(n));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      RankResult& res = results[static_cast<size_t>(r)];
      try {
        Capturing t(fabric.transport(r));
        if (seed == 0) {
          CpuBackend b;
          res.output = runRank(s, r, t, b, inflight);
        } else {
          StreamedBackend b(seed + static_cast<uint32_t>(r));
          res.output = runRank(s, r, t, b, inflight);
          res.overlapped = b.overlappedIssues;
          res.outOfOrder = b.outOfOrder;
        }
        res.sent = std::move(t.sent);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
        fabric.abort();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return results;
}

uint64_t wrongOf(const Schedule& s, int r, const std::vector<unsigned char>& got) {
  std::vector<unsigned char> expected(got.size());
  fillExpected(expected.data(), s.collective, DataType::Float, RedOp::Sum, r, s.nranks, s.count,
               s.root);
  return countWrong(got.data(), expected.data(), DataType::Float, s.outputElems);
}

TEST(ExecutorStreams, ExactWhenOperationsCompleteOutOfOrderOnThreeStreams) {
  LinkShaping delayed;
  delayed.addedLatencySeconds = 50e-6;
  delayed.portBytesPerSecond = 2e9;
  uint64_t outOfOrder = 0;
  for (const char* algo : {"ring", "tree", "halving-doubling"}) {
    for (int n : {2, 3, 4}) {
      for (const LinkShaping& net : {LinkShaping{}, delayed}) {
        const Schedule s = allReduce(algo, n, 4099, 128);
        SCOPED_TRACE(std::string(algo) + " on " + std::to_string(n) +
                     (net.empty() ? "" : ", delayed"));
        const auto res = runAll(s, 17u * static_cast<uint32_t>(n), net);
        for (int r = 0; r < n; ++r) {
          EXPECT_EQ(wrongOf(s, r, res[static_cast<size_t>(r)].output), 0u) << "rank " << r;
          outOfOrder += res[static_cast<size_t>(r)].outOfOrder;
        }
      }
    }
  }
  // The adversary did reorder: otherwise this test would prove nothing beyond the CPU's.
  EXPECT_GT(outOfOrder, 0u);
}

// Rank 0 of a 2-rank ring replayed with every message of rank 1 already there: it never has
// to wait for data, so nothing forces its sends out early, and the copy-in and reduction of
// a slice are issued while the previous slice is still being copied out. What it sends is
// what the CPU backend sent, byte for byte and in the same order.
TEST(ExecutorStreams, CopyOutOverlapsTheNextSliceAndSendsKeepProgramOrder) {
  const Schedule s = allReduce("ring", 2, 64 * 256, 256);
  const auto reference = runAll(s, 0, {});
  for (int inflight : {2, 4, 8}) {
    SCOPED_TRACE("inflight " + std::to_string(inflight));
    Replay t(0, 2, reference[1].sent);
    StreamedBackend b(99);
    const auto out = runRank(s, 0, t, b, inflight);
    EXPECT_EQ(wrongOf(s, 0, out), 0u);
    EXPECT_EQ(out, reference[0].output);
    ASSERT_EQ(t.sent.size(), reference[0].sent.size());
    for (size_t k = 0; k < t.sent.size(); ++k) {
      const Sent& got = t.sent[k];
      const Sent& want = reference[0].sent[k];
      EXPECT_EQ(got.peer, want.peer) << "message " << k;
      EXPECT_EQ(std::memcmp(&got.header, &want.header, sizeof got.header), 0) << "message " << k;
      EXPECT_EQ(got.payload, want.payload) << "message " << k;
    }
    EXPECT_GT(b.overlappedIssues, 0u);
  }
}

// With one stream every operation runs in issue order: still exact, and the plan reorders
// nothing (the adversary's only freedom is gone).
TEST(ExecutorStreams, OneStreamRunsInIssueOrder) {
  const Schedule s = allReduce("ring", 2, 64 * 256, 256);
  const auto reference = runAll(s, 0, {});
  Replay t(0, 2, reference[1].sent);
  StreamedBackend b(5, 1);
  const auto out = runRank(s, 0, t, b, 4);
  EXPECT_EQ(out, reference[0].output);
  EXPECT_EQ(b.outOfOrder, 0u);
}

// A backend that times its operations on a device: reductions and step ends carry the
// device's time, shifted onto the executor's clock; sends and receives the host's.
TEST(ExecutorStreams, DeviceTimesReachTelemetryOnTheExecutorsClock) {
  const Schedule s = allReduce("ring", 2, 64 * 256, 256);
  const auto reference = runAll(s, 0, {});
  constexpr int64_t kShift = 7'000'000'000;  // the executor's clock: steady + 7 s
  for (const bool device : {true, false}) {
    SCOPED_TRACE(device ? "device times" : "host times");
    Replay t(0, 2, reference[1].sent);
    StreamedBackend b(3);
    b.timesOnDevice = device;
    BoundedSink sink(1 << 20);
    const int64_t before = steadyNowNs() + kShift;
    const auto out = runRank(s, 0, t, b, 4, &sink, [] { return steadyNowNs() + kShift; });
    const int64_t after = steadyNowNs() + kShift;
    EXPECT_EQ(out, reference[0].output);
    const std::vector<TelemetryEvent> events = sink.take();
    size_t reduces = 0, steps = 0;
    int64_t lastStep = INT64_MIN;
    for (const TelemetryEvent& e : events) {
      const bool onDevice = e.kind == EventKind::ReduceEnd || e.kind == EventKind::StepEnd;
      EXPECT_EQ(e.clock, device && onDevice ? ClockSource::Device : ClockSource::Host)
          << toString(e.kind);
      EXPECT_GE(e.tNs, before) << toString(e.kind);
      EXPECT_LE(e.tNs, after) << toString(e.kind);
      reduces += e.kind == EventKind::ReduceEnd ? 1 : 0;
      if (e.kind == EventKind::StepEnd) {
        ++steps;
        EXPECT_GE(e.tNs, lastStep) << "step " << e.step;
        lastStep = e.tNs;
      }
    }
    EXPECT_GT(reduces, 0u);
    EXPECT_EQ(steps, static_cast<size_t>(s.nsteps));
  }
}

}  // namespace
}  // namespace arl
