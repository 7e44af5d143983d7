// Telemetry end to end: real allreduce-worker processes record every event of a run into their
// rings and ship them in batches; below the limits, every event reaches the client, each
// rank's in the order the rank recorded them.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "base/clock.h"
#include "runtime/coordinator.h"
#include "runtime/protocol.h"
#include "schedule/generators.h"

namespace arl {
namespace {

// Chunk-level events of one rank in one iteration (docs/telemetry.md, "Levels"): SendStart
// and SendEnd per send, RecvEnd per receive, ReduceEnd per reduction, StepEnd per step the
// rank has ops in, one IterationEnd.
struct PerIteration {
  std::vector<const Op*> sends;
  std::vector<const Op*> recvs;
  size_t reductions = 0;
  std::vector<uint32_t> steps;  // in order
  size_t events() const { return 2 * sends.size() + recvs.size() + reductions + steps.size() + 1; }
};

PerIteration plan(const Schedule& s, int rank) {
  PerIteration p;
  const auto& ops = s.ranks[static_cast<size_t>(rank)];
  std::map<uint32_t, size_t> lastOp;  // step -> index of its last op in program order
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (opSends(op.kind)) p.sends.push_back(&op);
    if (opRecvs(op.kind)) p.recvs.push_back(&op);
    if (opReduces(op.kind)) ++p.reductions;
    lastOp[op.step] = i;
  }
  // A step ends when its last op retires, and ops retire in program order.
  std::map<size_t, uint32_t> byLastOp;
  for (const auto& [step, i] : lastOp) byLastOp[i] = step;
  for (const auto& [i, step] : byLastOp) p.steps.push_back(step);
  return p;
}

// Takes the coordinator's events until run `id` finishes: its telemetry per rank, in arrival
// order, and its result.
RunResult collect(Coordinator& coord, uint64_t id, std::map<int, std::vector<TelemetryEvent>>& got,
                  std::map<int, size_t>& batches) {
  std::vector<CoordinatorEvent> evs;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    evs.clear();
    coord.takeEvents(evs, std::chrono::milliseconds(100));
    for (auto& ev : evs) {
      if (auto* t = std::get_if<TelemetryBatchEvent>(&ev); t && t->runId == id) {
        auto& mine = got[t->rank];
        mine.insert(mine.end(), t->events.begin(), t->events.end());
        ++batches[t->rank];
      } else if (auto* f = std::get_if<RunFinished>(&ev); f && f->result.runId == id) {
        return std::move(f->result);
      }
    }
  }
  RunResult none;
  none.error = "no RunFinished within 120 s";
  return none;
}

// One rank's events of one iteration against its program: sends and receives in program
// order, the steps' ends in order, the iteration's end last, times never going back.
void expectIterationInOrder(const std::vector<TelemetryEvent>& evs, const PerIteration& p, int rank,
                            uint32_t it) {
  SCOPED_TRACE("rank " + std::to_string(rank) + " iteration " + std::to_string(it));
  ASSERT_EQ(evs.size(), p.events());
  size_t send = 0;
  size_t recv = 0;
  size_t step = 0;
  for (size_t i = 0; i < evs.size(); ++i) {
    const TelemetryEvent& e = evs[i];
    if (i > 0) {
      EXPECT_LE(evs[i - 1].tNs, e.tNs) << "event " << i;
    }
    switch (e.kind) {
      case EventKind::SendStart:
        ASSERT_LT(send, p.sends.size());
        EXPECT_EQ(e.chunk, p.sends[send]->chunk);
        EXPECT_EQ(e.peer, p.sends[send]->sendPeer);
        ++send;
        break;
      case EventKind::RecvEnd:
        ASSERT_LT(recv, p.recvs.size());
        EXPECT_EQ(e.peer, p.recvs[recv]->recvPeer);
        ++recv;
        break;
      case EventKind::StepEnd:
        ASSERT_LT(step, p.steps.size());
        EXPECT_EQ(e.step, p.steps[step]);
        ++step;
        break;
      case EventKind::IterationEnd:
        EXPECT_EQ(i, evs.size() - 1) << "the iteration's end is last";
        break;
      default: break;
    }
  }
  EXPECT_EQ(send, p.sends.size());
  EXPECT_EQ(recv, p.recvs.size());
  EXPECT_EQ(step, p.steps.size());
}

TEST(Telemetry, EveryEventBelowTheLimitReachesTheClientInOrderPerRank) {
  constexpr int kRanks = 4;
  constexpr uint32_t kIterations = 60;
  CoordinatorOptions o;
  o.localWorkers = kRanks;
  o.workerBinary = ARL_WORKER_BINARY;
  Coordinator coord(o);

  // 64 KiB of floats in 1 KiB slices: a ring rank records 343 events per iteration, 20 580 in
  // the run: more than one batch holds, far fewer than a rank's ring (2^18) or the run's
  // limit (maxEvents) hold, so nothing may be lost however the control threads are
  // scheduled.
  RunRequest req;
  req.algorithm = "ring";
  req.count = 16384;
  req.sliceBytes = 1024;
  req.warmup = 2;
  req.iterations = static_cast<int>(kIterations);
  req.check = 1;
  req.telemetry = TelemetryLevel::Chunks;
  GenParams gp;
  gp.nranks = kRanks;
  gp.count = req.count;
  gp.sliceElems = req.sliceBytes / 4;
  const Schedule s = generate("ring", gp);

  std::map<int, std::vector<TelemetryEvent>> got;
  std::map<int, size_t> batches;
  const uint64_t id = coord.submit(req);
  const RunResult res = collect(coord, id, got, batches);
  ASSERT_EQ(res.state, RunState::Done) << res.error;
  EXPECT_EQ(res.wrong, 0u);

  size_t total = 0;
  for (int r = 0; r < kRanks; ++r) {
    const PerIteration p = plan(s, r);
    ASSERT_GT(p.events() * kIterations, kMaxEventsPerBatch) << "the run must span batches";
    const auto& evs = got[r];
    ASSERT_EQ(evs.size(), p.events() * kIterations) << "rank " << r;
    EXPECT_GE(batches[r], 2u) << "rank " << r;
    total += evs.size();
    std::vector<TelemetryEvent> one;
    uint32_t it = 0;
    for (const TelemetryEvent& e : evs) {
      ASSERT_EQ(e.rank, r);
      ASSERT_EQ(e.runId, res.runId);
      ASSERT_GE(e.iteration, it) << "iterations arrive in order";
      if (e.iteration != it) {
        expectIterationInOrder(one, p, r, it);
        one.clear();
        it = e.iteration;
      }
      one.push_back(e);
    }
    expectIterationInOrder(one, p, r, it);
    EXPECT_EQ(it, kIterations - 1);
  }
  EXPECT_EQ(res.telemetry.produced, total);
  EXPECT_EQ(res.telemetry.delivered, total);
  EXPECT_EQ(res.eventsDropped, 0u);
  EXPECT_EQ(res.telemetry.droppedByRanks, 0u);
  EXPECT_EQ(res.telemetry.droppedOverLimit, 0u);
}

// A run whose records fit in a quarter of a rank's ring ships none of them while it is timed:
// every rank's iteration results reach the client before the first of its telemetry
// batches, which all arrive before the run's result (docs/telemetry.md, "How an event
// travels"). 4 KiB in 1 KiB slices, 20 iterations: 28 events per rank and iteration.
TEST(Telemetry, AShortRunShipsItsTelemetryAfterItsTimedIterations) {
  constexpr int kRanks = 4;
  constexpr int kIterations = 20;
  CoordinatorOptions o;
  o.localWorkers = kRanks;
  o.workerBinary = ARL_WORKER_BINARY;
  Coordinator coord(o);
  RunRequest req;
  req.algorithm = "ring";
  req.count = 1024;
  req.sliceBytes = 1024;
  req.warmup = 2;
  req.iterations = kIterations;
  req.telemetry = TelemetryLevel::Chunks;
  const uint64_t id = coord.submit(req);

  std::map<int, size_t> lastIteration;   // rank -> arrival index of its last IterationEvent
  std::map<int, size_t> firstBatch;      // rank -> arrival index of its first batch
  std::map<int, size_t> iterationsSeen;  // rank -> IterationEvents
  std::map<int, size_t> eventsSeen;      // rank -> telemetry events
  std::optional<RunResult> res;
  size_t index = 0;
  std::vector<CoordinatorEvent> evs;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!res && std::chrono::steady_clock::now() < deadline) {
    evs.clear();
    coord.takeEvents(evs, std::chrono::milliseconds(100));
    for (auto& ev : evs) {
      ++index;
      if (auto* it = std::get_if<IterationEvent>(&ev); it && it->runId == id) {
        lastIteration[it->result.rank] = index;
        ++iterationsSeen[it->result.rank];
      } else if (auto* t = std::get_if<TelemetryBatchEvent>(&ev); t && t->runId == id) {
        firstBatch.emplace(t->rank, index);
        eventsSeen[t->rank] += t->events.size();
      } else if (auto* f = std::get_if<RunFinished>(&ev); f && f->result.runId == id) {
        res = std::move(f->result);
      }
    }
  }
  ASSERT_TRUE(res) << "no RunFinished within 120 s";
  ASSERT_EQ(res->state, RunState::Done) << res->error;
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(iterationsSeen[r], static_cast<size_t>(kIterations));
    EXPECT_EQ(eventsSeen[r], size_t{28} * kIterations);
    ASSERT_TRUE(firstBatch.count(r) == 1 && lastIteration.count(r) == 1);
    EXPECT_LT(lastIteration[r], firstBatch[r]) << "telemetry shipped while the run was timed";
  }
  EXPECT_EQ(res->eventsDropped, 0u);
}

// A run long enough to be watched ships its telemetry while it runs: a shaped run (8 MiB on
// 4 ranks with 50 MB/s ports: each rank sends 12 MiB an iteration, about 0.25 s) delivers
// batches to the client well before its end, each less than a second after the first event
// it carries was recorded (the worker ships records that have waited 250 ms; the events are
// on this process's clock, the coordinator's). What a live view can show is no older than that.
TEST(Telemetry, ALongRunDeliversItsTelemetryWhileItRuns) {
  constexpr int kRanks = 4;
  CoordinatorOptions o;
  o.localWorkers = kRanks;
  o.workerBinary = ARL_WORKER_BINARY;
  Coordinator coord(o);
  RunRequest req;
  req.algorithm = "ring";
  req.count = 2 << 20;  // floats: 8 MiB
  req.sliceBytes = 256 << 10;
  req.warmup = 1;
  req.iterations = 5;
  req.check = 0;
  req.telemetry = TelemetryLevel::Chunks;
  req.shaping.portBytesPerSecond = 50e6;
  const uint64_t id = coord.submit(req);

  struct Arrival {
    int64_t atNs;     // when the client took it
    int64_t firstNs;  // its first event's time
  };
  std::vector<Arrival> arrivals;
  int64_t firstEventNs = INT64_MAX;
  int64_t lastEventNs = INT64_MIN;
  std::optional<RunResult> res;
  int64_t finishedNs = 0;
  std::vector<CoordinatorEvent> evs;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!res && std::chrono::steady_clock::now() < deadline) {
    evs.clear();
    coord.takeEvents(evs, std::chrono::milliseconds(20));
    const int64_t now = steadyNowNs();
    for (auto& ev : evs) {
      if (auto* t = std::get_if<TelemetryBatchEvent>(&ev); t && t->runId == id) {
        if (t->events.empty()) continue;
        arrivals.push_back({now, t->events.front().tNs});
        for (const TelemetryEvent& e : t->events) {
          firstEventNs = std::min(firstEventNs, e.tNs);
          lastEventNs = std::max(lastEventNs, e.tNs);
        }
      } else if (auto* f = std::get_if<RunFinished>(&ev); f && f->result.runId == id) {
        res = std::move(f->result);
        finishedNs = now;
      }
    }
  }
  ASSERT_TRUE(res) << "no RunFinished within 120 s";
  ASSERT_EQ(res->state, RunState::Done) << res->error;
  ASSERT_FALSE(arrivals.empty());
  const double runSeconds = static_cast<double>(lastEventNs - firstEventNs) * 1e-9;
  ASSERT_GT(runSeconds, 1.0) << "the shaped run's timed iterations must last over a second";
  size_t early = 0;  // batches that arrived half a second or more before the run's end
  for (const Arrival& a : arrivals) {
    if (finishedNs - a.atNs < 500'000'000) continue;
    ++early;
    EXPECT_LT(a.atNs - a.firstNs, 1'000'000'000)
        << "a batch arrived " << static_cast<double>(a.atNs - a.firstNs) * 1e-9
        << " s after its first event";
  }
  EXPECT_GE(early, static_cast<size_t>(kRanks))
      << "of " << arrivals.size() << " batches of a run of " << runSeconds << " s, " << early
      << " arrived half a second or more before its end";
}

}  // namespace
}  // namespace arl
