// RunJob (runtime/run_job.h) in process: the run threads of every rank of one run, each with
// its own real data plane (shared memory or ZeroMQ over ipc://), driven as the worker's
// control thread drives them, with this test playing the coordinator: launch, Start with
// every rank's endpoint once all are Ready, Abort on the first failure. No worker process, no
// control socket, no environment: the faults are injected as RunJob::faults.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "base/clock.h"
#include "exec/telemetry_record.h"
#include "exec/telemetry_ring.h"
#include "runtime/fault_injection.h"
#include "runtime/protocol.h"
#include "runtime/run_job.h"

namespace arl {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kRunId = 41;
constexpr uint64_t kEpoch = 7;
constexpr int64_t kOffsetNs = 1'000'000'000;  // coordinator clock - worker clock
constexpr milliseconds kPatience{20000};      // a loaded machine's worst, never the norm

// A ring all-reduce of `n` ranks, count/n = 256 floats a rank, in slices of 128 floats.
RunConfig ringConfig(int n, DataPlaneKind plane, uint32_t iterations) {
  RunConfig c;
  c.runId = kRunId;
  c.epoch = kEpoch;
  c.worldSize = n;
  c.algorithm = "ring";
  c.count = 256 * static_cast<uint64_t>(n);
  c.sliceBytes = 128 * sizeof(float);
  c.warmup = 1;
  c.iterations = iterations;
  c.telemetry = TelemetryLevel::Chunks;
  c.ringOrder.resize(static_cast<size_t>(n));
  std::iota(c.ringOrder.begin(), c.ringOrder.end(), 0);
  c.dataPlane = plane;
  return c;
}

// What one rank's outbox gave: each message with the ring position it follows.
using Posted = std::vector<std::pair<uint64_t, Message>>;

// The ranks of one run, each a RunJob with a telemetry ring of its own.
class OneRun {
 public:
  OneRun(const RunConfig& c, const RunFaults& faults = {}) : posted_(size_t(c.worldSize)) {
    for (int r = 0; r < c.worldSize; ++r) {
      rings_.push_back(std::make_unique<TelemetryRing>(size_t{1} << 16));
      auto j = std::make_unique<RunJob>();
      j->cfg = c;
      j->rank = r;
      j->myHost = "here";
      j->backend = "cpu";
      j->offsetNs = kOffsetNs;
      j->faults = faults;
      j->ring = rings_.back().get();
      j->out.setRing(j->ring);
      j->reserveResults(c.iterations);
      jobs_.push_back(std::move(j));
    }
  }

  // Every job lets go of its thread before its ring goes (the destructor joins).
  ~OneRun() {
    for (auto& j : jobs_) j->abort();
    jobs_.clear();
  }

  void launch() {
    for (auto& j : jobs_) j->launch();
  }

  // The coordinator's part until every job has finished: Start once every rank is Ready
  // (unless `start` is false), and Abort to everyone on the first RunFailed.
  void serve(bool start = true) {
    const auto deadline = SteadyClock::now() + kPatience;
    bool started = false;
    bool aborted = false;
    while (!allFinished() && SteadyClock::now() < deadline) {
      drain();
      if (start && !started && !aborted && readyEndpoints().size() == jobs_.size()) {
        const std::vector<std::string> endpoints = readyEndpoints();
        for (auto& j : jobs_) j->start(endpoints, {});
        started = true;
      }
      if (!aborted && firstFailure()) {
        for (auto& j : jobs_) j->abort();
        aborted = true;
      }
      std::this_thread::sleep_for(milliseconds(1));
    }
    drain();
  }

  void abortAll() {
    for (auto& j : jobs_) j->abort();
  }

  bool allFinished() const {
    return std::all_of(jobs_.begin(), jobs_.end(),
                       [](const auto& j) { return j->finished.load(); });
  }

  // Takes what every outbox holds, as the control thread does, and marks it sent.
  void drain() {
    for (size_t r = 0; r < jobs_.size(); ++r) {
      Outbox::Taken t = jobs_[r]->out.take();
      for (auto& m : t.msgs) posted_[r].push_back(std::move(m));
      if (!t.msgs.empty()) jobs_[r]->out.markSent(t.lastMsg);
    }
  }

  // Every rank's data-plane endpoint, once each has said Ready (else fewer).
  std::vector<std::string> readyEndpoints() const {
    std::vector<std::string> out;
    for (const Posted& p : posted_) {
      for (const auto& [pos, m] : p) {
        if (const auto* r = std::get_if<Ready>(&m)) out.push_back(r->dataEndpoint);
      }
    }
    return out;
  }

  std::optional<RunFailed> firstFailure() const {
    for (const Posted& p : posted_) {
      for (const auto& [pos, m] : p) {
        if (const auto* f = std::get_if<RunFailed>(&m)) return *f;
      }
    }
    return std::nullopt;
  }

  const Posted& posted(int rank) const { return posted_[size_t(rank)]; }
  const RunJob& job(int rank) const { return *jobs_[size_t(rank)]; }

  // Until every rank has reported `iterations` timed iterations, Start given once all are
  // Ready; false when that did not happen within kPatience.
  bool serveUntilTimedResults(uint32_t iterations) {
    const auto deadline = SteadyClock::now() + kPatience;
    bool started = false;
    while (SteadyClock::now() < deadline && !firstFailure()) {
      drain();
      if (!started && readyEndpoints().size() == jobs_.size()) {
        const std::vector<std::string> endpoints = readyEndpoints();
        for (auto& j : jobs_) j->start(endpoints, {});
        started = true;
      }
      bool all = true;
      for (size_t r = 0; r < jobs_.size(); ++r) all = all && timedReported(int(r)) >= iterations;
      if (all) return true;
      std::this_thread::sleep_for(milliseconds(1));
    }
    return false;
  }

  // The timed iterations rank `rank` reported so far.
  uint32_t timedReported(int rank) const {
    uint32_t n = 0;
    for (const auto& [pos, m] : posted_[size_t(rank)]) {
      if (const auto* it = std::get_if<IterationResult>(&m)) n += uint32_t(it->count());
    }
    return n;
  }
  const TelemetryRing& ring(int rank) const { return *rings_[size_t(rank)]; }

  // The rank's telemetry, as its ring holds it.
  std::vector<TelemetryEvent> events(int rank) const {
    const TelemetryRing& ring = *rings_[size_t(rank)];
    const TelemetryRing::View v = ring.peek(ring.written());
    std::vector<uint8_t> bytes(v.first.begin(), v.first.end());
    bytes.insert(bytes.end(), v.second.begin(), v.second.end());
    std::vector<TelemetryEvent> out;
    const auto error = unpackTelemetryRecords(bytes, kTelemetryRecordVersion, kTelemetryRecordBytes,
                                              kRunId, rank, out);
    EXPECT_FALSE(error) << *error;
    return out;
  }

 private:
  std::vector<std::unique_ptr<TelemetryRing>> rings_;
  std::vector<std::unique_ptr<RunJob>> jobs_;
  std::vector<Posted> posted_;
};

class RunJobPlane : public ::testing::TestWithParam<DataPlaneKind> {};

// Each rank says Ready, then reports every timed iteration once, in order, and RunDone with
// no element wrong; its telemetry is all in the ring before RunDone, on the coordinator's
// clock, and sends what a ring all-reduce sends: 2(n-1) blocks of count/n a rank.
TEST_P(RunJobPlane, RanksOfARingAllReduceReportReadyResultsAndDone) {
  constexpr int kRanks = 3;
  constexpr uint32_t kIterations = 4;
  const RunConfig c = ringConfig(kRanks, GetParam(), kIterations);
  const int64_t before = steadyNowNs() + kOffsetNs;
  OneRun run(c);
  run.launch();
  run.serve();
  ASSERT_TRUE(run.allFinished());
  EXPECT_FALSE(run.firstFailure()) << run.firstFailure()->message();

  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const Posted& p = run.posted(r);
    ASSERT_GE(p.size(), 3u);
    const auto* ready = std::get_if<Ready>(&p.front().second);
    ASSERT_NE(ready, nullptr) << describe(p.front().second);
    EXPECT_EQ(ready->epoch, kEpoch);
    EXPECT_EQ(ready->rank, r);
    EXPECT_EQ(ready->runId, kRunId);
    EXPECT_TRUE(validEndpoint(ready->dataEndpoint)) << ready->dataEndpoint;
    EXPECT_EQ(ready->dataEndpoint.rfind(GetParam() == DataPlaneKind::Shm ? "shm://" : "ipc://", 0),
              0u)
        << ready->dataEndpoint;
    EXPECT_EQ(ready->clockOffsetNs, kOffsetNs);
    EXPECT_EQ(p.front().first, 0u) << "no telemetry before Start";

    uint32_t next = 0;  // the next timed iteration expected
    uint64_t lastPosition = 0;
    for (size_t i = 1; i + 1 < p.size(); ++i) {
      const auto* it = std::get_if<IterationResult>(&p[i].second);
      ASSERT_NE(it, nullptr) << describe(p[i].second);
      EXPECT_EQ(it->epoch, kEpoch);
      EXPECT_EQ(it->rank, r);
      EXPECT_EQ(it->iteration, next);
      for (size_t k = 0; k < it->count(); ++k) EXPECT_GT(it->timeOf(k), 0u);
      EXPECT_EQ(it->wrong, 0u);
      EXPECT_GE(p[i].first, lastPosition);
      lastPosition = p[i].first;
      next += static_cast<uint32_t>(it->count());
    }
    EXPECT_EQ(next, kIterations);

    const auto* done = std::get_if<RunDone>(&p.back().second);
    ASSERT_NE(done, nullptr) << describe(p.back().second);
    EXPECT_EQ(done->epoch, kEpoch);
    EXPECT_EQ(done->rank, r);
    EXPECT_EQ(done->wrongTotal, 0u);
    EXPECT_EQ(done->eventsDropped, 0u);
    EXPECT_EQ(p.back().first, run.ring(r).written()) << "RunDone follows all of its telemetry";

    const std::vector<TelemetryEvent> events = run.events(r);
    ASSERT_FALSE(events.empty());
    std::vector<uint64_t> sentPerIteration(kIterations, 0);
    uint32_t iterationEnds = 0;
    for (const TelemetryEvent& e : events) {
      ASSERT_LT(e.iteration, kIterations);
      EXPECT_GE(e.tNs, before) << "on the coordinator's clock";
      if (e.kind == EventKind::SendEnd) sentPerIteration[e.iteration] += e.bytes;
      if (e.kind == EventKind::IterationEnd) ++iterationEnds;
    }
    EXPECT_EQ(iterationEnds, kIterations);
    const uint64_t blockBytes = c.count / kRanks * sizeof(float);
    for (uint64_t sent : sentPerIteration) EXPECT_EQ(sent, 2 * (kRanks - 1) * blockBytes);
  }
}

INSTANTIATE_TEST_SUITE_P(RunJob, RunJobPlane,
                         ::testing::Values(DataPlaneKind::Shm, DataPlaneKind::Zmq),
                         [](const auto& info) {
                           return info.param == DataPlaneKind::Shm ? std::string("Shm")
                                                                   : std::string("Zmq");
                         });

// Rank 1 corrupts the epoch of the first header it sends: rank 2, its successor on the ring,
// reports the mismatch naming rank 1 and the step instead of summing the payload; once the
// others are aborted, every rank has said RunFailed and none RunDone.
TEST(RunJob, ACorruptedHeaderFailsTheRunNamingTheRankAndTheStep) {
  const RunConfig c = ringConfig(3, DataPlaneKind::Shm, 2);
  RunFaults faults;
  faults.corruption = HeaderCorruption{1, "epoch"};
  OneRun run(c, faults);
  run.launch();
  run.serve();
  ASSERT_TRUE(run.allFinished());

  std::optional<RunFailed> cause;
  for (int r = 0; r < 3; ++r) {
    const Posted& p = run.posted(r);
    ASSERT_FALSE(p.empty());
    const auto* f = std::get_if<RunFailed>(&p.back().second);
    ASSERT_NE(f, nullptr) << "rank " << r << ": " << describe(p.back().second);
    EXPECT_EQ(f->epoch, kEpoch);
    EXPECT_EQ(f->rank, r);
    for (const auto& [pos, m] : p) EXPECT_FALSE(std::holds_alternative<RunDone>(m));
    if (f->reason.find("header mismatch") != std::string::npos) cause = *f;
  }
  ASSERT_TRUE(cause) << "no rank reported the mismatch";
  EXPECT_EQ(cause->rank, 2);
  EXPECT_EQ(cause->peer, 1);
  EXPECT_EQ(cause->step, 0);
  EXPECT_EQ(cause->iteration, -1) << "the first header is a warm-up's";
  const std::string text = cause->message();
  EXPECT_NE(text.find("epoch"), std::string::npos) << text;
  EXPECT_NE(text.find("from rank 1"), std::string::npos) << text;
  EXPECT_NE(text.find("step 0"), std::string::npos) << text;
}

// -c N: each rank reports its last timed iteration before it runs the check's further
// iterations, and a failure in one of them (an Abort here) is reported as that checking
// iteration, never as an iteration past the timed ones; RunDone's #wrong is not reached.
TEST(RunJob, AFailureWhileCheckingFollowsEveryTimedResultAndNamesTheCheckingIteration) {
  constexpr uint32_t kIterations = 3;
  RunConfig c = ringConfig(2, DataPlaneKind::Shm, kIterations);
  c.check = kMaxIterations;  // far more than the test waits for
  OneRun run(c);
  run.launch();
  ASSERT_TRUE(run.serveUntilTimedResults(kIterations))
      << "the timed results did not arrive before the check's further iterations ended";
  // Until every rank is in one of those iterations (the heartbeats' view of it).
  const auto deadline = SteadyClock::now() + kPatience;
  while ((run.job(0).checkIteration.load() < 2 || run.job(1).checkIteration.load() < 2) &&
         SteadyClock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  run.abortAll();
  run.serve(/*start=*/false);
  ASSERT_TRUE(run.allFinished());
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(run.timedReported(r), kIterations);
    const Posted& p = run.posted(r);
    const auto* f = std::get_if<RunFailed>(&p.back().second);
    ASSERT_NE(f, nullptr) << describe(p.back().second);
    EXPECT_EQ(f->iteration, -1);
    EXPECT_GE(f->checkIteration, 2u);
    EXPECT_EQ(f->checkIterations, kMaxIterations);
    const std::string text = f->message();
    EXPECT_NE(text.find("(checking iteration " + std::to_string(f->checkIteration) + " of " +
                        std::to_string(kMaxIterations) + ")"),
              std::string::npos)
        << text;
    for (const auto& [pos, m] : p) EXPECT_FALSE(std::holds_alternative<RunDone>(m));
  }
}

// An Abort while the ranks wait for Start: each reports RunFailed at once, tied to no step,
// and its thread finishes.
TEST(RunJob, AnAbortBeforeStartEndsEveryRankWithRunFailed) {
  const RunConfig c = ringConfig(2, DataPlaneKind::Zmq, 1);
  OneRun run(c);
  run.launch();
  const auto deadline = SteadyClock::now() + kPatience;
  while (run.readyEndpoints().size() < 2 && SteadyClock::now() < deadline) {
    run.drain();
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_EQ(run.readyEndpoints().size(), 2u);
  const auto t0 = SteadyClock::now();
  run.abortAll();
  run.serve(/*start=*/false);
  ASSERT_TRUE(run.allFinished());
  EXPECT_LT(SteadyClock::now() - t0, kPatience / 4);
  for (int r = 0; r < 2; ++r) {
    const Posted& p = run.posted(r);
    ASSERT_EQ(p.size(), 2u) << "Ready, then RunFailed";
    const auto* f = std::get_if<RunFailed>(&p.back().second);
    ASSERT_NE(f, nullptr) << describe(p.back().second);
    EXPECT_EQ(f->rank, r);
    EXPECT_EQ(f->step, -1);
    EXPECT_NE(f->reason.find("aborted before it started"), std::string::npos) << f->reason;
  }
}

}  // namespace
}  // namespace arl
