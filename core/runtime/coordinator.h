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
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/types.h"
#include "exec/run_request.h"
#include "runtime/launcher.h"
#include "runtime/run_types.h"

namespace arl {

// How the control socket turned out.
struct ControlSecurityState {
  bool curve = false;           // CURVE server, workers admitted by the allow-list
  bool clearOnNetwork = false;  // --insecure: a non-loopback listen in the clear
  std::string serverKey;        // Z85 public key a worker gives as --server-key
  std::string keysDir;          // where the lab's key pair was read
  std::string allowFile;        // the allow-list read
  size_t allowed = 0;           // keys in it
};

struct CoordinatorOptions {
  int localWorkers = 4;      // allreduce-worker child processes to start
  std::string workerBinary;  // path of allreduce-worker; empty = next to the caller
  std::string listen;        // control endpoint to bind; empty = tcp://127.0.0.1:<free>
  ControlSecurity security;
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
  // Backend mpi: the local workers run under one mpirun (runtime/mpi_launch.h), given these
  // arguments before the worker's (--mca btl LIST ...).
  std::vector<std::string> mpirunArgs;
  // When set, the coordinator starts the expectRemote remote workers itself with this cluster
  // launcher (mpirun, srun or ssh; runtime/launcher.h), joining the control endpoint as other
  // hosts reach it with this lab's keys, and supervises it: a launcher that ends before its
  // workers joined ends their wait at once (a WorkerLeft naming it), and whatever of it still
  // runs at the end is ended and reaped. workerBinary is then the path on the hosts too.
  std::optional<LaunchSpec> launch;
  // Room in the client's event queue, in telemetry events (a batch weighs its size) plus
  // iteration reports (one each). What does not fit is dropped and counted in the run's
  // result; control events (joins, leaves, states, run finished, logs) always fit.
  size_t eventQueueCapacity = size_t{1} << 20;
  // Called on the coordinator's thread each time the event queue turns non-empty, e.g. to
  // post a queued call to a GUI thread. Must return at once: the same thread runs heartbeats.
  std::function<void()> onEventsReady;
};

// Threads: one thread of the coordinator owns its socket, the workers and the runs; a
// planning thread checks requests and generates schedules. Client calls (submit, abort,
// workers, takeEvents without waiting) return within microseconds; only the destructor
// waits (for the workers to leave). One client thread drains the events.
class Coordinator {
 public:
  // Binds the control socket and starts the local workers (on the coordinator's thread).
  // Throws ConfigError on bad options (an endpoint that cannot be bound, a missing binary, a
  // non-loopback listen without keys and without ControlSecurity::insecure).
  explicit Coordinator(CoordinatorOptions opt);
  // Shuts every worker down; local workers that do not exit are killed. No orphans. A run
  // still queued or running ends Aborted.
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // The bound control endpoint, and the command line a remote worker runs to join.
  std::string endpoint() const;
  std::string joinCommand() const;
  // The command lines of CoordinatorOptions::launch's processes, one each (empty without).
  std::vector<std::string> launchCommands() const;
  // Whether the control socket uses keys, and which.
  ControlSecurityState security() const;

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

}  // namespace arl
