// The vocabulary of a lab session: who the workers are, what state a run is in, what a run
// produced, and the events a client takes from the coordinator. Plain values, no sockets:
// what export, the sweep, the event queue and the window need without a coordinator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "exec/flight_recorder.h"
#include "exec/run_request.h"
#include "exec/sent_bytes.h"
#include "exec/telemetry.h"
#include "train/train_types.h"

namespace arl {

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
  // Known to be alive: a local worker at once (its process is watched), a remote one once it
  // has been heard from a full liveness window after joining. A remote worker that joins and
  // dies within that window is never proven: it is removed for silence instead of counting
  // toward the workers a sweep waits for (Bench's --expect).
  bool proven = false;
  // Fingerprint of the CURVE key it joined with (transport/zmq/curve_keys.h); "" when the
  // control socket runs in the clear.
  std::string keyFingerprint;
  // Public key (Z85) of its data planes this session (Hello::dataKey); "": in the clear.
  std::string dataKey;
  // Where a cluster launcher placed it (Hello::launchRank, launchLocalRank); -1: no launcher.
  int launchRank = -1;
  int launchLocalRank = -1;
};

// Keys of the control socket (docs/security.md, runtime/key_store.h).
struct ControlSecurity {
  std::string keysDir;     // the lab's key pair; "" = the config folder
  bool keysAsked = false;  // use keys even on a loopback listen
  std::string allowFile;   // public keys of the workers admitted; "" = allowed_workers in keysDir
  // Listen on a non-loopback address in the clear: anyone who reaches the port may join and
  // read or change what the workers exchange. Without it such a listen needs keys.
  bool insecure = false;
  bool operator==(const ControlSecurity&) const = default;
};

// The device of local worker `k` (0-based, in start order) under `localDevices`
// (CoordinatorOptions::localDevices: empty = none, one = all, else one per worker); -1: none.
int localDevice(const std::vector<int>& localDevices, int k);

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
  uint64_t wrong = 0;  // the last timed iteration's check (0 in the others)
  // A training run's step: what the rank measured and holds after it.
  std::optional<TrainRankStep> train;
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
  // Summed over ranks and over the iterations checked (RunRequest::checkedIterations): the
  // last timed one and the check's further ones.
  uint64_t wrong = 0;
  // With random data (RunRequest::randomData): outputDigests[r], rank r's output digest
  // (FNV-1a 64), and outputSamples[r], the bytes of elements spread evenly over it
  // (RankRun::outputDigest); empty otherwise.
  std::vector<uint64_t> outputDigests;
  std::vector<std::string> outputSamples;
  std::vector<RankIteration> perRank;
  // The run's telemetry on the coordinator clock, sorted by time. The coordinator keeps no
  // copy: it moves each batch to the client, so this is empty in RunFinished and filled by
  // the client that collects the batches (Coordinator::run, Sweep).
  std::vector<TelemetryEvent> events;
  // Per rank, what its telemetry says it sent (exec/sent_bytes.h), counted by the coordinator
  // as the batches passed, before any bound dropped one; a recording's, from its events.
  std::vector<RankSent> sent;
  TelemetryCounts telemetry;
  uint64_t eventsDropped = 0;           // telemetry dropped, all causes together
  uint64_t iterationEventsDropped = 0;  // IterationEvents the client's queue had no room for
  RunState state = RunState::Idle;
  std::string error;  // empty on success; otherwise names the rank, the step and the reason
  int failedRank = -1;
  // A failed or aborted run's flight record: one entry per rank, its recorder's last
  // collectives or why it has none (exec/flight_recorder.h); empty when the run completed.
  std::vector<RankFlight> flight;
};

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

  // For a local worker that ended before joining: "local worker (pid 12) exited with status
  // 2"; the reason alone when no worker process was ever known (pid 0: mpirun could not start
  // its workers).
  std::string beforeJoining() const {
    if (worker.pid <= 0) return reason.text;
    return "local worker (pid " + std::to_string(worker.pid) + ") " + reason.text;
  }
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

}  // namespace arl
