// The held world (Coordinator::holdWorld, Sweep) with real processes: a worker started by hand
// in the middle of a sweep waits as a spare and gets its rank after it; a remote worker killed
// between runs fails the next run at once, by the closed control connection, long before its
// heartbeats would.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../runtime/event_client.h"
#include "base/clock.h"
#include "local_workers.h"
#include "runtime/coordinator.h"
#include "runtime/process.h"
#include "runtime/sweep.h"

namespace arl {
namespace {

using test::localOptions;

using Clock = SteadyClock;
using std::chrono::milliseconds;

// Polls workers() until `pred` holds for the list (at most `timeout`).
template <class Pred>
bool waitWorkers(const Coordinator& c, Pred pred, milliseconds timeout = milliseconds(30000)) {
  const auto deadline = Clock::now() + timeout;
  while (!pred(c.workers())) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

const WorkerInfo* byPid(const std::vector<WorkerInfo>& ws, int64_t pid) {
  for (const auto& w : ws)
    if (w.pid == pid) return &w;
  return nullptr;
}

TEST(HeldWorld, AWorkerJoiningMidSweepIsASpareUntilTheSweepEnds) {
  Coordinator coord(localOptions(3));
  ASSERT_TRUE(waitWorkers(coord, [](const auto& ws) { return ws.size() == 3; }));
  const std::vector<WorkerInfo> world = coord.workers();
  SweepSpec spec;
  spec.base.warmup = 0;
  spec.base.iterations = 2;
  spec.base.collective = Collective::ReduceScatter;
  spec.algorithms = {"ring"};
  spec.sizes = {12288, 24576, 49152, 98304, 196608, 393216};
  Sweep sweep(coord, spec, world);
  sweep.start();

  // After the first row, a worker is started by hand; the sweep is handed no event until it
  // has joined, so the runs after the second are all planned with it in the session.
  int64_t joiner = 0;
  std::vector<WorkerJoined> joinedDuringSweep;
  std::vector<WorkerInfo> duringSweep;
  std::vector<CoordinatorEvent> evs, held;
  const auto deadline = Clock::now() + std::chrono::seconds(90);
  while (!sweep.finished() && Clock::now() < deadline) {
    evs.clear();
    coord.takeEvents(evs, milliseconds(20));
    for (auto& ev : evs) {
      if (auto* j = std::get_if<WorkerJoined>(&ev); j && joiner != 0) {
        joinedDuringSweep.push_back(*j);
      }
      held.push_back(std::move(ev));
    }
    if (joiner == 0 || byPid(coord.workers(), joiner) != nullptr) {
      for (auto& ev : held) sweep.onEvent(ev);
      held.clear();
    }
    if (joiner == 0 && sweep.rows().size() == 1) {
      joiner = spawnChild({ARL_WORKER_BINARY, "--connect", coord.endpoint(), "--name", "late"});
    }
    // Seen while the sweep still has runs to go.
    if (duringSweep.empty() && joiner != 0 && byPid(coord.workers(), joiner) != nullptr &&
        sweep.rows().size() < spec.sizes.size()) {
      duringSweep = coord.workers();
    }
  }
  ASSERT_TRUE(sweep.finished());
  EXPECT_TRUE(sweep.error().empty()) << sweep.error();
  ASSERT_NE(joiner, 0);

  // The joiner waited as a spare: announced so, listed so, and no run had it.
  ASSERT_EQ(joinedDuringSweep.size(), 1u) << "the worker did not join during the sweep";
  EXPECT_TRUE(joinedDuringSweep[0].worker.spare);
  EXPECT_EQ(joinedDuringSweep[0].worker.rank, -1);
  ASSERT_EQ(duringSweep.size(), 4u) << "workers() was not seen with the spare during the sweep";
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(duringSweep[r].pid, world[r].pid) << "rank " << r;
    EXPECT_EQ(duringSweep[r].rank, static_cast<int>(r));
    EXPECT_FALSE(duringSweep[r].spare);
  }
  EXPECT_EQ(duringSweep[3].pid, joiner);
  EXPECT_EQ(duringSweep[3].rank, -1);
  EXPECT_TRUE(duringSweep[3].spare);
  ASSERT_EQ(sweep.rows().size(), spec.sizes.size());
  for (const SweepRow& row : sweep.rows()) {
    ASSERT_EQ(row.result.state, RunState::Done) << row.result.error;
    EXPECT_EQ(row.result.nranks, 3);
    EXPECT_EQ(row.result.workers.size(), 3u);
    EXPECT_EQ(row.count * 4 * 3, row.sizeBytes);  // reduce-scatter: count per rank
    // nccl-tests' factor for reduce-scatter on the sweep's 3 ranks.
    EXPECT_NEAR(row.metrics.busbwGBps, row.metrics.algbwGBps * 2.0 / 3.0, 1e-12);
    EXPECT_EQ(byPid(row.result.workers, joiner), nullptr);
  }

  // The sweep released the world: the spare takes rank 3.
  EXPECT_TRUE(waitWorkers(coord, [&](const auto& ws) {
    const WorkerInfo* w = byPid(ws, joiner);
    return w != nullptr && w->rank == 3 && !w->spare;
  })) << "the spare got no rank after the sweep";
  RunRequest after;
  after.count = 1037;
  after.warmup = 0;
  after.iterations = 1;
  const RunResult res = coord.run(after);
  EXPECT_EQ(res.state, RunState::Done) << res.error;
  EXPECT_EQ(res.nranks, 4);
  killAndReap(joiner);
}

// Two local workers; liveness would take 40 x 250 ms = 10 s, so a failure well before that
// comes from a send that could not be delivered.
CoordinatorOptions remoteWorldOptions() {
  CoordinatorOptions o = localOptions(2);
  o.missedHeartbeats = 40;
  return o;
}

RunRequest smallRun() {
  RunRequest req;
  req.count = 4096;
  req.warmup = 0;
  req.iterations = 2;
  return req;
}

// Joins a remote worker ("far", on host "elsewhere") to coord's two local ones, holds the
// world and runs `req` once on it: the remote worker's pid and rank.
void holdWorldWithARemoteWorker(Coordinator& coord, test::EventClient& client,
                                const RunRequest& req, int64_t& remote, int& remoteRank) {
  remote = spawnChild(
      {ARL_WORKER_BINARY, "--connect", coord.endpoint(), "--name", "far", "--host", "elsewhere"});
  ASSERT_TRUE(waitWorkers(coord, [](const auto& ws) { return ws.size() == 3; }));
  coord.holdWorld(coord.workers());
  const RunResult first = client.run(req);
  ASSERT_EQ(first.state, RunState::Done) << first.error;
  for (const auto& w : first.workers)
    if (w.pid == remote) remoteRank = w.rank;
  ASSERT_GE(remoteRank, 0);
}

// The next run's RunConfig finds its connection closed; the coordinator gives it the reconnect
// grace (coord::kReconnectGrace, 1 s: a reset connection is back by then) and fails the run.
TEST(HeldWorld, ARemoteWorkerKilledBetweenRunsFailsTheNextRunAtOnce) {
  Coordinator coord(remoteWorldOptions());
  test::EventClient client(coord);
  const RunRequest req = smallRun();
  int64_t remote = -1;
  int remoteRank = -1;
  ASSERT_NO_FATAL_FAILURE(holdWorldWithARemoteWorker(coord, client, req, remote, remoteRank));

  ASSERT_EQ(::kill(static_cast<pid_t>(remote), SIGKILL), 0);
  ASSERT_TRUE(waitFor(remote, milliseconds(5000)).has_value());
  const auto t0 = Clock::now();
  const RunResult second = client.run(req);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("remote worker killed between runs: the next run failed %.3f s after submit\n",
              seconds);
  EXPECT_EQ(second.state, RunState::Failed);
  EXPECT_EQ(second.failedRank, remoteRank);
  const std::string named = "rank " + std::to_string(remoteRank) + " (far, pid " +
                            std::to_string(remote) + ") cannot be reached";
  EXPECT_NE(second.error.find(named), std::string::npos) << second.error;
  EXPECT_NE(second.error.find("control connection is closed"), std::string::npos) << second.error;
  // Generous against a loaded machine, and far below the 10 s the heartbeats would take.
  EXPECT_LT(seconds, 3.0);
  // The dead worker is still listed (liveness removes it later): the session is not changed
  // by a closed connection alone.
  EXPECT_NE(byPid(coord.workers(), remote), nullptr);
}

// Killed as the run is submitted: the coordinator may hand its RunConfig to the connection
// before it has seen the connection end (the send succeeds, the message is lost with it). The
// next heartbeat to that rank cannot be delivered, and the run fails then, naming it, long
// before the 10 s of silence liveness would wait.
TEST(HeldWorld, ARemoteWorkerKilledAsTheRunIsSubmittedFailsItPromptly) {
  Coordinator coord(remoteWorldOptions());
  test::EventClient client(coord);
  const RunRequest req = smallRun();
  int64_t remote = -1;
  int remoteRank = -1;
  ASSERT_NO_FATAL_FAILURE(holdWorldWithARemoteWorker(coord, client, req, remote, remoteRank));

  const auto t0 = Clock::now();
  ASSERT_EQ(::kill(static_cast<pid_t>(remote), SIGKILL), 0);
  const RunResult second = client.run(req);  // at once: the connection's end is not seen yet
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("remote worker killed as the run was submitted: it failed %.3f s later\n", seconds);
  EXPECT_EQ(second.state, RunState::Failed);
  EXPECT_EQ(second.failedRank, remoteRank);
  EXPECT_NE(second.error.find("rank " + std::to_string(remoteRank) + " (far, pid " +
                              std::to_string(remote) + ") cannot be reached"),
            std::string::npos)
      << second.error;
  EXPECT_LT(seconds, 3.0);
  ASSERT_TRUE(waitFor(remote, milliseconds(5000)).has_value());
}

}  // namespace
}  // namespace arl
