// The worker's control thread (runWorker, worker_runtime.h): it owns the control DEALER,
// joins the coordinator, aligns the clocks (Ping/Pong), heartbeats, watches the coordinator's
// liveness and the parent process, and drives one RunJob at a time (runtime/run_job.h): it
// gives a job its configuration and launches it on RunConfig, passes on Start and Abort, and
// sends in order what the job's outbox holds, each message behind the telemetry recorded
// before it. It never waits for the run thread while that runs: a RunConfig that comes while
// the previous run's thread is still stopping (or giving its buffers back) is held and started
// once that thread has finished, and heartbeats go on meanwhile. Private to core/runtime.
#pragma once

#include <zmq.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/clock_sample.h"
#include "coord_wakeup.h"
#include "runtime/fault_injection.h"
#include "runtime/protocol.h"
#include "runtime/run_job.h"
#include "runtime/worker_runtime.h"

namespace arl {

class TelemetryRing;
class HandshakeWatch;

class WorkerSession {
 public:
  explicit WorkerSession(const WorkerOptions& opt);

  // Also on the error paths: no run thread may outlive the session.
  ~WorkerSession();

  // Joins the coordinator and serves it until the worker leaves; returns the exit code
  // (runWorker).
  int run();

 private:
  template <class M>
  void send(const M& m) {
    sendFrames(m.encode());
  }

  // Sends a message's frames; a failed send is logged, not thrown.
  void sendFrames(const Frames& f);

  // The same for frames this thread no longer needs: a large frame is handed to ZeroMQ as
  // it is (its I/O thread frees it once sent) instead of being copied into a message.
  void sendFrames(Frames&& f);

  // What this worker's run is doing, for the coordinator's liveness and stall watch.
  Heartbeat heartbeat();

  // A Ready, or the Start that answers it, may be lost (a reset connection): while this rank
  // waits for Start it says Ready again every second; the coordinator answers a second Ready
  // with the Start it already sent.
  void resendReady(SteadyClock::time_point now);

  // The coordinator misses this rank's results of run `epoch` (lost on the way): says them
  // again, once the outbox has sent everything queued before them.
  void resendResults(uint64_t epoch);

  void sendPing();

  // Sends what the run thread queued, in order, and ships telemetry only when it must: before
  // the message that ends a run (RunDone, RunFailed: the coordinator has every event of a run
  // when it learns the run ended), when the ring holds kShipWhenHeld records (room for the
  // rank to go on recording), when records have waited kLiveInterval (a live view's
  // refresh), or when `force`. Iteration results do not wait for the telemetry
  // recorded before them: shipping it while the ranks run is the work that disturbs them
  // (docs/telemetry.md, "Shipping at the end"), and a run short enough for its records to
  // fit in the ring ships them after its last timed iteration.
  void flushOutbox(bool force);

  // Sends the ring's records before position `upTo` as they lie, in batches of at most
  // kMaxEventsPerBatch, and gives their room back to the rank.
  void shipTelemetry(RunJob& j, uint64_t upTo);

  // Tells the run thread to stop and returns at once: every phase of a run looks at the
  // abort within milliseconds, and the loop reaps the thread (reapJob) while it heartbeats.
  void abortJob();

  // A run thread still running kStopLimit after its abort is stuck beyond repair (no phase
  // takes that long to stop): the process ends rather than run the next run beside it.
  void checkStuckJob(SteadyClock::time_point now) const;

  // Once the run thread has finished: sends what it queued and joins it.
  void retireJob();

  // Every loop pass: retires a finished run thread, then starts the run held for it.
  void reapJob();

  // For leaving: aborts the run and waits until its thread has finished (it stops within
  // milliseconds; one that does not within kLeaveWait ends the process). Joins nothing.
  void stopJobNow();

  // Handles one message; returns an exit code when the worker must leave.
  std::optional<int> handle(const std::vector<zmq::message_t>& frames);

  // Whether to say where this worker joined and why it leaves (a worker started by hand).
  bool announces() const { return opt_.verbose || opt_.parentPid == 0; }

  // A message in another protocol version (exit code 7, the reason logged).
  std::optional<int> onOtherVersion(const std::vector<zmq::message_t>& frames);
  // One handler per message type, given the header's epoch.
  std::optional<int> on(const Welcome& w, uint64_t);
  std::optional<int> on(const Pong& p, uint64_t);
  std::optional<int> on(const Heartbeat& h, uint64_t);
  std::optional<int> on(const RunConfig& c, uint64_t epoch);
  std::optional<int> on(const Start& s, uint64_t epoch);
  std::optional<int> on(const Abort& a, uint64_t epoch);
  std::optional<int> on(const Shutdown& s, uint64_t);
  std::optional<int> on(const Log& l, uint64_t);
  std::optional<int> on(const StoreValue& v, uint64_t epoch);
  // Types only a worker sends.
  template <class M>
  std::optional<int> on(const M& m, uint64_t);

  // Gives the job the session's telemetry ring, emptied; "" or why there is none. Mapped at
  // the first run that records, then kept: the previous run's thread has finished and its
  // records were sent (retireJob), so the ring is free to empty.
  std::string attachRing(RunJob& j);

  // Starts the run thread for a RunConfig; no other run thread may be running.
  void startJob(const RunConfig& c, uint64_t epoch);

  // Makes the control socket a CURVE client when the options give a server key, and watches
  // its handshakes until the Welcome (HandshakeWatch).
  void secureControl();
  // Whether the coordinator refused this worker's handshake (said in one log line).
  bool refused();

  // Stops the run and closes the socket; returns `code`.
  int leave(int code);

  static constexpr size_t kPings = 5;
  static constexpr std::chrono::milliseconds kResendAfter{1000};
  // Telemetry a rank may record ahead of this thread (2^18 records of 48 bytes, 12 MiB):
  // beyond it, records are dropped and counted (docs/telemetry.md, "The bound").
  static constexpr size_t kRingRecords = size_t{1} << 18;
  // Telemetry is shipped during a run once a quarter of the ring is held (at a million
  // records a second, every 65 ms, with 196 ms of room left for this thread to be late), or
  // once records have waited this long: about what a live view is behind at most.
  static constexpr size_t kShipWhenHeld = kRingRecords / 4;
  static constexpr std::chrono::milliseconds kLiveInterval{250};

  WorkerOptions opt_;
  std::string host_;
  int64_t pid_;
  std::string name_;
  zmq::context_t ctx_{1};
  zmq::socket_t sock_;
  std::unique_ptr<HandshakeWatch> handshake_;  // until the Welcome
  CurveKeyPair dataKeys_;                      // the data planes' this session; none in the clear
  Wakeup wake_;                                // raised by the run thread when it queues a message
  bool recordEveryOther_ = false;              // ARL_TELEMETRY_EVERY_OTHER (worker_runtime.h)
  // Test-only faults from the environment (runtime/fault_injection.h).
  std::optional<HeaderCorruption> corruption_;  // every run's
  ControlLosses losses_;                        // ARL_TEST_LOSE_CONTROL
  std::optional<StallAt> stall_;                // the first run's, ARL_TEST_STALL

  std::chrono::milliseconds hbInterval_;
  int liveness_;
  SteadyClock::time_point lastHeard_;
  SteadyClock::time_point lastTick_;  // the loop's last pass
  SteadyClock::time_point nextHeartbeat_;
  // When this thread first saw records waiting in the ring since it last shipped; unset
  // while the ring is empty.
  std::optional<SteadyClock::time_point> heldSince_;
  bool welcomed_ = false;
  int rank_ = -1;
  int world_ = 0;

  uint32_t pingSeq_ = 0;
  bool pingOutstanding_ = false;
  SteadyClock::time_point pingSentAt_;
  std::vector<ClockSample> samples_;
  int64_t offsetNs_ = 0;

  std::unique_ptr<TelemetryRing> ring_;  // the runs' telemetry, one run at a time
  // The last collectives of every run of the session, written by one run thread at a time
  // (a job starts once the previous one's thread has finished).
  FlightRecorder flight_;
  std::unique_ptr<RunJob> job_;
  // A RunConfig that waits for the previous run thread to finish.
  struct PendingRun {
    RunConfig cfg;
    uint64_t epoch = 0;
    bool aborted = false;  // an Abort for its epoch came meanwhile
  };
  std::optional<PendingRun> pending_;
};

}  // namespace arl
