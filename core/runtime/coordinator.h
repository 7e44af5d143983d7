// Coordinator: runs a lab session. Owns the control ROUTER socket on its own thread, starts
// local allreduce-worker processes and accepts remote ones, assigns ranks and the ring
// order, pushes run configurations, gathers telemetry and results, computes metrics and
// aborts on any failure. No Qt: the bench command is its first client, the window the
// second; both take its events from one bounded queue, from the first join on.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "base/types.h"
#include "exec/run_request.h"
#include "exec/telemetry.h"
#include "transport/transport.h"

namespace arl {

struct CoordinatorOptions {
  int localWorkers = 4;         // allreduce-worker child processes to start
  std::string workerBinary;     // path of allreduce-worker; empty = next to the caller
  std::string listen;           // control endpoint to bind; empty = tcp://127.0.0.1:<free>
  int expectRemote = 0;         // remote workers expected (they connect themselves)
  std::string backend = "cpu";  // backend the local workers use
  // Device of each local worker (allreduce-worker --device), in start order: empty = none,
  // one entry = every local worker on it, else one entry per local worker. A replacement of
  // a lost local worker takes the device of the one it replaces.
  std::vector<int> localDevices;
  std::chrono::milliseconds heartbeat{250};
  int missedHeartbeats = 4;  // silence after which a worker is declared dead
  // How long a submitted run waits for local workers that are still starting (the first
  // ones, or replacements of lost ones) before it starts with those that are there.
  std::chrono::milliseconds joinTimeout{20000};
  std::vector<std::string> workerExtraArgs;  // appended to every local worker's command line
  // Room in the client's event queue, in telemetry events (a batch weighs its size) plus
  // iteration reports (one each). What does not fit is dropped and counted in the run's
  // result; control events (joins, leaves, states, run finished, logs) always fit.
  size_t eventQueueCapacity = size_t{1} << 20;
  // Called on the coordinator's thread each time the event queue turns non-empty, e.g. to
  // post a queued call to a GUI thread. Must return at once: the same thread runs heartbeats.
  std::function<void()> onEventsReady;
};

struct WorkerInfo {
  // Unique in the session, from 1 in join order; a worker keeps it when its rank changes
  // (the key holdWorld() takes a world by). 0: the worker never joined.
  uint64_t serial = 0;
  int rank = -1;
  // In the session but outside the world that runs use now (rank -1): it joined during a
  // run, or while the world is held (Coordinator::holdWorld). It gets a rank when the run
  // ends, or when the world is released.
  bool spare = false;
  std::string name;
  std::string host;
  int64_t pid = 0;
  bool local = false;  // started by this coordinator
  std::string backend;
  int device = -1;
  uint64_t pidNamespace = 0;  // its pid namespace's id (0: unknown); see RunConfig
  // Coordinator clock - worker clock, from the ping exchange (ClockSample::offsetNs in
  // runtime/protocol.h); telemetry timestamps already have it added.
  int64_t clockOffsetNs = 0;
  std::string dataEndpoint;  // the data-plane endpoint of the worker's latest run (from Ready)
};

// Queued: submitted, waiting for workers to join or for its plan. Refused: the request was
// invalid for this world (nothing reached a worker).
enum class RunState : uint8_t {
  Idle,
  Queued,
  Configuring,
  Running,
  Done,
  Failed,
  Aborted,
  Refused
};
std::string_view toString(RunState s);

struct RankIteration {
  int rank = -1;
  uint32_t iteration = 0;
  int64_t timeNs = 0;
  uint64_t wrong = 0;
};

// Where a run's telemetry went. produced = delivered + the three dropped counts.
struct TelemetryCounts {
  uint64_t produced = 0;           // events the ranks recorded
  uint64_t delivered = 0;          // handed to the client in TelemetryBatchEvents
  uint64_t droppedByRanks = 0;     // a rank's own buffer was full
  uint64_t droppedOverLimit = 0;   // past RunRequest::maxEvents
  uint64_t droppedSlowClient = 0;  // the client's event queue was full
};

struct RunResult {
  uint64_t runId = 0;
  RunRequest request;
  ResolvedRun effective;  // what the request resolved to: ranks per host, ring, steps, bytes
  int nranks = 0;
  std::vector<WorkerInfo> workers;
  std::vector<double> iterationUs;  // per timed iteration: the slowest rank's time
  double timeUs = 0;                // mean of iterationUs (the lab's time, docs/bench.md)
  uint64_t wrong = 0;               // summed over ranks (last iteration's check)
  std::vector<RankIteration> perRank;
  // The run's telemetry on the coordinator clock, sorted by time. The coordinator keeps no
  // copy: it moves each batch to the client, so this is empty in RunFinished and filled by
  // the client that collects the batches (Coordinator::run, Sweep).
  std::vector<TelemetryEvent> events;
  TelemetryCounts telemetry;
  uint64_t eventsDropped = 0;           // telemetry dropped, all causes together
  uint64_t iterationEventsDropped = 0;  // IterationEvents the client's queue had no room for
  RunState state = RunState::Idle;
  std::string error;  // empty on success; otherwise names the rank, the step and the reason
  int failedRank = -1;
};

// The device of local worker `k` (0-based, in start order) under opt.localDevices; -1: none.
int localDevice(const CoordinatorOptions& opt, int k);

// perIterationPerRankUs(res)[i][r]: rank r's time in timed iteration i in us, from the
// result's per-rank reports; -1 where a rank did not report (model/metrics.h skips those).
std::vector<std::vector<double>> perIterationPerRankUs(const RunResult& res);

// Why a worker left the session.
enum class LeaveKind : uint8_t {
  Exited,            // a local worker exited (code in LeaveReason::code)
  Killed,            // a local worker was killed by a signal (LeaveReason::code)
  MissedHeartbeats,  // silent for missedHeartbeats intervals; a local one is then killed
  Shutdown,          // the coordinator is closing
};
struct LeaveReason {
  LeaveKind kind = LeaveKind::Shutdown;
  int code = 0;      // exit code or signal number
  std::string text;  // "killed by signal 9 (SIGKILL)", "no heartbeat for 1.0 s", ...
};

// Events, in the order they happened; the client takes them from the coordinator's queue.
struct StateEvent {
  uint64_t runId;
  RunState state;  // Queued, Configuring, Running (the end is a RunFinished)
  std::string message;
};
// worker.spare: it joined during a run or while the world is held, and waits for a rank.
struct WorkerJoined {
  WorkerInfo worker;
};
// A worker left; also a local worker that ended before it joined (worker.rank is then -1).
struct WorkerLeft {
  WorkerInfo worker;
  LeaveReason reason;
  bool joined = true;  // false: it ended before joining
};
struct TelemetryBatchEvent {
  uint64_t runId;
  int rank;
  std::vector<TelemetryEvent> events;  // coordinator clock
};
struct IterationEvent {
  uint64_t runId;
  RankIteration result;
};
struct LogEvent {
  int level;  // 0 info, 1 warning, 2 error
  std::string text;
};
// The last event of every submitted run, refused ones included.
struct RunFinished {
  RunResult result;
};
using CoordinatorEvent = std::variant<StateEvent, WorkerJoined, WorkerLeft, TelemetryBatchEvent,
                                      IterationEvent, LogEvent, RunFinished>;

// Threads: one thread of the coordinator owns its socket, the workers and the runs; a
// planning thread checks requests and generates schedules. Client calls (submit, abort,
// workers, takeEvents without waiting) return within microseconds; only the destructor
// waits (for the workers to leave). One client thread drains the events.
class Coordinator {
 public:
  // Binds the control socket and starts the local workers (on the coordinator's thread).
  // Throws ConfigError on bad options (an endpoint that cannot be bound, a missing binary).
  explicit Coordinator(CoordinatorOptions opt);
  // Shuts every worker down; local workers that do not exit are killed. No orphans. A run
  // still queued or running ends Aborted.
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // The bound control endpoint, and the command line a remote worker runs to join.
  std::string endpoint() const;
  std::string joinCommand() const;

  // The workers now in the session, in rank order.
  std::vector<WorkerInfo> workers() const;

  // Queues a run and returns its id at once. Runs go one at a time in submission order; each
  // waits for local workers still starting (up to joinTimeout), is checked and planned off
  // the caller's thread and ends with a RunFinished: state Refused with `error` naming the
  // bad parameter when the request is invalid for the world (nothing reaches a worker),
  // Failed or Aborted with `error` naming the rank, the step and the reason, or Done.
  uint64_t submit(RunRequest req);

  // Aborts the running run and every queued one (thread-safe); they end Aborted with `reason`.
  // A holdWorld() or releaseWorld() still queued keeps its place.
  void abort(const std::string& reason);

  // Holds the world for the runs submitted after this call, until releaseWorld(): they run
  // on exactly the workers of `world` (as workers() returned them; matched by serial) in
  // that order, as ranks 0..n-1; an empty `world` means the ranked workers when the first
  // run after the hold is planned (after waiting for local workers still starting). A
  // worker that joins meanwhile, a replacement of a lost local one included, is a spare
  // (rank -1, WorkerInfo::spare) until the release. A member that leaves fails the run in
  // progress as any loss does, and every later run at once (Failed, its error naming the
  // worker and why it left). Like submit(), it takes effect in submission order: after the
  // runs submitted before it. Holding again while held starts over (a release, then a hold).
  void holdWorld(std::vector<WorkerInfo> world = {});
  // Ends the hold once the runs submitted before it are over: spares get their ranks, ranks
  // follow the join order by host again. Does nothing when the world is not held.
  void releaseWorld();

  // Moves up to `max` queued events into `out` (appended), in order, waiting up to `wait` for
  // the first. Returns how many were moved. Events of the same run arrive in this order:
  // StateEvents, IterationEvents and TelemetryBatchEvents, then its RunFinished.
  size_t takeEvents(std::vector<CoordinatorEvent>& out,
                    std::chrono::milliseconds wait = std::chrono::milliseconds(0),
                    size_t max = SIZE_MAX);

  // For synchronous callers (tests, scripts): submits `req` and drains events until its
  // RunFinished; collects its telemetry into the result's `events` (sorted by time, with a
  // TelemetryCollector) and
  // hands every other event to `onEvent` when set. Needs to be the only thread draining.
  RunResult run(const RunRequest& req, const std::function<void(CoordinatorEvent&)>& onEvent = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Orders events by time, stably: for a vector whose order says nothing (a run's telemetry
// as a TelemetryCollector gathers it is better merged).
void sortByTime(std::vector<TelemetryEvent>& events);

// Gathers a run's telemetry from its TelemetryBatchEvents and hands it back sorted by time.
// A rank records its events as they happen, so each rank's batches arrive in time order:
// take() merges the ranks' streams (n log k for k ranks) instead of sorting every event.
// Events of one rank keep their order; equal times of different ranks come out in rank
// order. A rank whose events are out of time order is sorted (stably) on its own first.
class TelemetryCollector {
 public:
  // Keeps `events` of rank `rank` (0..kMaxRanks-1), after those it already has of that rank.
  void add(int rank, std::vector<TelemetryEvent>&& events);
  void add(TelemetryBatchEvent& batch) { add(batch.rank, std::move(batch.events)); }
  size_t size() const { return size_; }
  // Every event added since the last take(), sorted by time; the collector is empty after.
  std::vector<TelemetryEvent> take();

 private:
  std::vector<std::vector<std::vector<TelemetryEvent>>> batches_;  // [rank][batch]
  size_t size_ = 0;
};

}  // namespace arl
