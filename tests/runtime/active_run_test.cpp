// ActiveRun (runtime/active_run.h), the coordinator's state machine of one run, fed its ranks'
// messages by hand: what it makes of the iterations -c N checks after the timed ones.
#include "runtime/active_run.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "runtime/run_plan.h"

namespace arl {
namespace {

using std::chrono::milliseconds;

class QuietLink final : public RunLink {
 public:
  Delivery sendFrames(const std::string&, const Frames&) override { return Delivery::Sent; }
  void log(int, const std::string&) override {}
  void logLimited(int, const std::string&) override {}
};

constexpr uint64_t kRunId = 5;  // the run's epoch too

// A ring all-reduce on two ranks: two timed iterations, -c 3 (the last timed one and two more).
RunRequest twoIterationsThreeChecked() {
  RunRequest req;
  req.count = 1024;
  req.warmup = 0;
  req.iterations = 2;
  req.check = 3;
  return req;
}

RunPlan twoRankPlan() {
  RunPlan p =
      planRun(twoIterationsThreeChecked(), {PlannedRank{"a", "here"}, PlannedRank{"b", "here"}});
  EXPECT_TRUE(p.error.empty()) << p.error;
  return p;
}

// One run, started: both ranks said Ready.
struct StartedRun {
  explicit StartedRun(milliseconds stall = milliseconds(60'000))
      : run(kRunId, twoIterationsThreeChecked(), twoRankPlan(), {WorkerInfo{}, WorkerInfo{}}, stall,
            link, events) {
    run.configure();
    for (int r = 0; r < 2; ++r) run.onReady(Ready{kRunId, r, kRunId, "ipc:///x"}, r);
    EXPECT_EQ(run.state(), RunState::Running);
  }
  QuietLink link;
  EventQueue events{1 << 16, [] {}};
  ActiveRun run;
};

// Rank r waits for data from the other rank in step 3 of the check's iteration 2.
Heartbeat inSecondCheck(int r) {
  Heartbeat hb;
  hb.inRun = true;
  hb.epoch = kRunId;
  hb.phase = RunPhase::Iterating;
  hb.step = 3;
  hb.checkIteration = 2;
  hb.wait = WaitKind::Data;
  hb.waitPeer = 1 - r;
  hb.waitStep = 3;
  return hb;
}

// #wrong counts every iteration checked: each rank's RunDone, which alone reports the check's
// iterations after the timed ones.
TEST(ActiveRun, WrongIsEveryRanksTotalOverEveryIterationChecked) {
  StartedRun s;
  s.run.onIteration(IterationResult{kRunId, 0, 0, 1000, 1, {1100}}, 0);
  s.run.onIteration(IterationResult{kRunId, 1, 0, 1000, 0, {1100}}, 1);
  s.run.onDone(RunDone{kRunId, 0, 5, 0}, 0);  // 1 in the last timed iteration, 4 after it
  s.run.onDone(RunDone{kRunId, 1, 2, 0}, 1);  // all of them after it
  ASSERT_TRUE(s.run.ended());
  const RunResult res = s.run.result();
  EXPECT_EQ(res.state, RunState::Done);
  EXPECT_EQ(res.wrong, 7u);
  ASSERT_EQ(res.perRank.size(), 4u);
  EXPECT_EQ(res.perRank[1].wrong, 1u) << "the last timed iteration's own check";
}

// A stall while ranks run the check's iterations names them so, never as an iteration past
// the timed ones.
TEST(ActiveRun, AStallInTheChecksIterationsNamesThem) {
  StartedRun s(milliseconds(1));
  s.run.onHeartbeat(inSecondCheck(0), 0);
  s.run.onHeartbeat(inSecondCheck(1), 1);
  std::this_thread::sleep_for(milliseconds(5));
  s.run.poll();
  ASSERT_TRUE(s.run.failing());
  const std::string& text = s.run.failText();
  EXPECT_NE(text.find("rank 0 waits for data from rank 1 for step 3 (checking iteration 2 of 3)"),
            std::string::npos)
      << text;
}

// A rank that dies there is named with where it was, from its heartbeats (a late telemetry
// batch of a timed iteration does not move that back) or else from a peer's RunFailed.
TEST(ActiveRun, ADeathInTheChecksIterationsSaysWhichOne) {
  {
    StartedRun s;
    s.run.onHeartbeat(inSecondCheck(0), 0);
    TelemetryEvent e;
    e.runId = kRunId;
    e.rank = 0;
    e.kind = EventKind::StepEnd;
    e.iteration = 1;
    e.step = 5;
    TelemetryBatch late{kRunId, 0, kRunId, 0, 0, {e}};
    s.run.onTelemetry(late, 0);
    s.run.fail(FailKind::Died, 0, "rank 0 died");
    s.run.onFailed(RunFailed{kRunId, 1, 0, 3, -1, "run aborted"}, 1);
    s.run.poll();
    ASSERT_TRUE(s.run.ended());
    EXPECT_EQ(s.run.ended()->error, "rank 0 died at step 3 (checking iteration 2 of 3)");
  }
  StartedRun s;
  s.run.fail(FailKind::Died, 0, "rank 0 died");
  s.run.onFailed(RunFailed{kRunId, 1, 0, 3, -1, "no data from rank 0", 2, 3}, 1);
  s.run.poll();
  ASSERT_TRUE(s.run.ended());
  EXPECT_EQ(s.run.ended()->error,
            "rank 0 died at step 3 (rank 1 was waiting for its data in checking iteration 2 of "
            "3)");
}

}  // namespace
}  // namespace arl

namespace arl {
namespace {

// The run's store: a key set by one rank is the value another gets, a later set replaces it,
// a key no rank set is not found, and a set beyond kMaxStoreKeys fails the run naming the rank.
TEST(ActiveRun, TheStoreKeepsTheRunsKeysWithinItsBound) {
  StartedRun s;
  EXPECT_FALSE(s.run.onStoreGet(StoreGet{kRunId, 1, 1, "0"}).found);
  s.run.onStoreSet(StoreSet{kRunId, 0, "0", "first"}, 0);
  s.run.onStoreSet(StoreSet{kRunId, 0, "0", "address of rank 0"}, 0);
  const StoreValue v = s.run.onStoreGet(StoreGet{kRunId, 1, 2, "0"});
  EXPECT_EQ(v.epoch, kRunId);
  EXPECT_EQ(v.seq, 2u);
  EXPECT_TRUE(v.found);
  EXPECT_EQ(v.value, "address of rank 0");
  for (size_t k = 1; k < kMaxStoreKeys; ++k) {
    s.run.onStoreSet(StoreSet{kRunId, 1, "k" + std::to_string(k), "v"}, 1);
  }
  EXPECT_FALSE(s.run.failing());
  s.run.onStoreSet(StoreSet{kRunId, 0, "0", "replaced within the bound"}, 0);
  EXPECT_FALSE(s.run.failing());
  s.run.onStoreSet(StoreSet{kRunId, 1, "one-too-many", "v"}, 1);
  ASSERT_TRUE(s.run.failing());
  EXPECT_NE(s.run.failText().find("rank 1 set store key 'one-too-many' beyond the run's 256 keys"),
            std::string::npos)
      << s.run.failText();
}

}  // namespace
}  // namespace arl
