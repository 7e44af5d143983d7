// Coordinator: runs a lab session. Owns the control ROUTER socket on its own thread, starts
// local allreduce-worker processes and accepts remote ones, assigns ranks and the ring
// order, pushes run configurations, gathers telemetry and results, computes metrics and
// aborts on any failure. No Qt: the bench command is its first client, the window the
// second; both observe it through events delivered as they arrive.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "exec/run_request.h"
#include "exec/telemetry.h"
#include "transport/transport.h"
#include "base/types.h"

namespace arl {

struct CoordinatorOptions {
  int localWorkers = 4;         // allreduce-worker child processes to start
  std::string workerBinary;     // path of allreduce-worker; empty = next to the caller
  std::string listen;           // control endpoint to bind; empty = tcp://127.0.0.1:<free>
  int expectRemote = 0;         // remote workers to wait for (they connect themselves)
  std::string backend = "cpu";  // backend the local workers use
  std::chrono::milliseconds heartbeat{250};
  int missedHeartbeats = 4;  // silence after which a worker is declared dead
  std::chrono::milliseconds joinTimeout{20000};
  std::vector<std::string> workerExtraArgs;  // appended to every local worker's command line
};

struct WorkerInfo {
  int rank = -1;
  std::string name;
  std::string host;
  int64_t pid = 0;
  bool local = false;  // started by this coordinator
  std::string backend;
  int device = -1;
  int64_t clockOffsetNs = 0;  // worker clock - coordinator clock, from the ping exchange
  std::string dataEndpoint;
};

enum class RunState : uint8_t { Idle, Configuring, Running, Done, Failed, Aborted };
std::string_view toString(RunState s);

struct RankIteration {
  int rank = -1;
  uint32_t iteration = 0;
  int64_t timeNs = 0;
  uint64_t wrong = 0;
};

struct RunResult {
  uint64_t runId = 0;
  RunRequest request;
  ResolvedRun effective;  // what the request resolved to: ranks per host, ring, steps, bytes
  int nranks = 0;
  std::vector<WorkerInfo> workers;
  std::vector<double> iterationUs;  // per timed iteration: the slowest rank's time
  double timeUs = 0;                // mean of iterationUs (nccl-tests' time)
  uint64_t wrong = 0;               // summed over ranks (last iteration's check)
  std::vector<RankIteration> perRank;
  std::vector<TelemetryEvent> events;  // coordinator clock, sorted by time
  uint64_t eventsDropped = 0;
  RunState state = RunState::Idle;
  std::string error;  // empty on success; otherwise names the rank, the step and the reason
  int failedRank = -1;
};

// Events offered to clients as they arrive (delivered on the coordinator's thread: a GUI
// client re-posts them to its own thread).
struct StateEvent {
  uint64_t runId;
  RunState state;
  std::string message;
};
struct WorkerEvent {
  WorkerInfo worker;
  bool joined;  // false = left or died
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
using CoordinatorEvent =
    std::variant<StateEvent, WorkerEvent, TelemetryBatchEvent, IterationEvent, LogEvent>;

class Coordinator {
 public:
  // Binds the control socket and starts the local workers. Throws ConfigError on bad
  // options (e.g. an endpoint that cannot be bound, a missing worker binary).
  explicit Coordinator(CoordinatorOptions opt);
  // Shuts every worker down; local workers that do not exit are killed. No orphans.
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // The bound control endpoint, and the command line a remote worker runs to join.
  std::string endpoint() const;
  std::string joinCommand() const;

  // Blocks until localWorkers + expectRemote workers have joined; throws PeerError/ConfigError
  // naming who is missing on timeout.
  void waitForWorkers();
  std::vector<WorkerInfo> workers() const;

  // Registers the event listener (called on the coordinator thread; must not block long: the
  // same thread watches heartbeats).
  void setListener(std::function<void(const CoordinatorEvent&)> listener);

  // Starts a run; the future completes when it is done, failed or aborted. One run at a time.
  // Bad requests (unknown algorithm, unsupported collective, zero or ragged chunk, root out of
  // range, ...) and a second run while one is active throw ConfigError here, before any worker
  // is touched; failures after that are a RunResult with state Failed and `error` set. Waits
  // first (up to joinTimeout) for local workers that are still starting, so that replacements
  // of lost workers take part and the world keeps its size. See docs/runtime.md.
  std::future<RunResult> submit(const RunRequest& req);
  RunResult run(const RunRequest& req) { return submit(req).get(); }

  // Aborts the current run (thread-safe). The run ends Aborted with `reason`.
  void abort(const std::string& reason);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace arl
