// The worker runtime: everything allreduce-worker does between "connect" and "exit". It owns
// the worker's control DEALER (core is where ZeroMQ sockets live), joins a coordinator,
// aligns clocks, heartbeats, and runs what it is told on an executor thread:
//
//   Hello -> Welcome, Ping/Pong x N (clock offset: the exchange with the smallest round trip)
//   RunConfig        generate + annotate the schedule, allocate buffers once, fill inputs,
//                    bind the data plane (ipc:// when every rank is on this host, else tcp://)
//   -> Ready         carries the data-plane endpoint and the clock offset
//   Start            carries every rank's endpoint: connect, run warmup + timed iterations
//   -> IterationResult per 10 ms of timed iterations; TelemetryBatch (the rank's records as
//      they lie in its ring) before each message that follows them, when 16384 wait, else
//      every 50 ms;
//      RunDone (with #wrong of the last iteration) or RunFailed(rank, peer, step, reason)
//   Abort            stops the run wherever it is (set-up, iterations, check) within
//                    milliseconds; the run thread reports RunFailed
//   Shutdown         exit 0
//
// The control thread never waits for the run thread while it runs: a RunConfig that comes
// while the previous run's thread is still stopping (or giving its buffers back) is held and
// started once that thread has finished, and heartbeats go on meanwhile.
//
// The worker leaves by itself (non-zero exit, one log line) when the coordinator has been
// silent for `liveness` heartbeat intervals, and a local worker also when its parent is gone.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/launcher.h"
#include "transport/zmq/curve_keys.h"

namespace arl {

struct WorkerOptions {
  std::string connect;  // coordinator's control endpoint, "tcp://HOST:PORT"
  std::string backend = "cpu";
  std::string name;  // display name; "" = "<host>:<pid>"
  int device = -1;   // accelerator index (-1: none)
  // Host name reported to the coordinator; "" = gethostname(). Ranks whose host names differ
  // talk over tcp:// and are grouped apart by hierarchical schedules, so naming two workers
  // of one machine differently makes it behave like two hosts (a teaching aid, and a test).
  std::string hostName;
  // Where a cluster launcher placed the worker (runtime/launcher.h), told in its Hello.
  LaunchPlacement placement;
  // Liveness until the coordinator's Welcome sets its own values.
  std::chrono::milliseconds heartbeat{250};
  int liveness = 4;
  // How long to wait for the coordinator's first answer (it may start after the worker).
  std::chrono::milliseconds joinTimeout{10000};
  // Pid of the lab that spawned this worker (0: started by hand). The worker leaves when its
  // parent changes: a second guard besides PR_SET_PDEATHSIG, which the spawner sets.
  int64_t parentPid = 0;
  // The process whose end makes the worker leave, when it is not the lab (0: parentPid): the
  // mpirun that started a worker of backend mpi for the lab.
  int64_t watchPid = 0;
  bool verbose = false;  // log every control message
  // The lab's public key (Z85): join as a CURVE client with `keys` (docs/security.md). Empty:
  // in the clear.
  std::string serverKey;
  CurveKeyPair keys;
  // How long a CURVE handshake may take before the worker gives up on it (ZMQ_HANDSHAKE_IVL).
  std::chrono::milliseconds handshakeTimeout{5000};
};

// Runs one worker session. Returns the process exit code: 0 after a Shutdown, non-zero when
// the coordinator went silent (3), the parent died (4), the coordinator refused the worker's
// keys or the handshake failed (6), the coordinator speaks another protocol version (7), or
// the configuration was refused (the reason is logged as one line on stderr).
int runWorker(const WorkerOptions& opt);

// Benchmarks only: ARL_TELEMETRY_EVERY_OTHER=1 makes the worker's ranks record telemetry in
// every other timed iteration only (RankRunOptions::recordEveryOther), so that one run times
// iterations with and without recording side by side (scripts/bench-telemetry). A setting of
// the worker as released, not a fault: the session reads it and gives it to each run job.
// (The faults that tests inject are in runtime/fault_injection.h.)
inline constexpr const char* kEveryOtherEnv = "ARL_TELEMETRY_EVERY_OTHER";

}  // namespace arl
