// One run on a worker, on a thread of its own (the run thread): it generates the schedule,
// owns the backend buffers and the data plane, drives the executor, and posts what the
// coordinator must hear (Ready, IterationResult, RunDone or RunFailed) into its Outbox, each
// behind the telemetry its rank recorded before it into the job's TelemetryRing.
//
// Whoever drives a job gives it everything before launch(): the RunConfig, the rank, the
// backend, the clock offset, the test's faults. It reads no environment and never touches the
// control socket. The worker's control thread (worker_session.h) drives it as the coordinator
// says: launch on RunConfig, start() on Start, abort() on Abort, and sends what the outbox
// holds; a test can do the same in process with several jobs of one run on their threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "exec/progress.h"
#include "runtime/fault_injection.h"
#include "runtime/protocol.h"

namespace arl {

class TelemetryRing;
class Wakeup;

// ---- Outbox: run thread -> control thread ----------------------------------------------------

// Result and set-up messages of the run thread, for the control thread to send in order, each
// behind the telemetry recorded before it: a message remembers how many records the rank's
// ring (RunJob::ring) held when it was posted, and the control thread sends at least those
// first (the coordinator counts a rank's telemetry complete at its RunDone).
// Events never pass through here: the rank records them into the ring without a lock.
class Outbox {
 public:
  // Before the run thread starts; null when the run records no telemetry.
  void setRing(const TelemetryRing* ring) { ring_ = ring; }
  // Before the run thread starts: raised by post() (none: the reader looks by itself).
  void setWakeup(Wakeup* w) { wake_ = w; }

  // Queues a message behind the events recorded so far and wakes the control thread, or
  // leaves it for the control thread's next regular look (at most 10 ms away) when `wake` is
  // false: a wake-up per iteration would take a core from the ranks while they run. Returns
  // the message's number (1, 2, ...) for waitSent().
  uint64_t post(Message m, bool wake = true);

  // Control thread: every message up to number `n` has been handed to the socket.
  void markSent(uint64_t n);

  // Waits until message `n` has been handed to the socket, or `timeout` has passed.
  bool waitSent(uint64_t n, std::chrono::milliseconds timeout);

  struct Taken {
    // (ring position the message follows, message), in the order they were posted
    std::vector<std::pair<uint64_t, Message>> msgs;
    uint64_t lastMsg = 0;  // number of the last message in msgs (see post())
  };

  // Takes the messages waiting (perhaps none).
  Taken take();

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<uint64_t, Message>> msgs_;
  uint64_t posted_ = 0;  // messages posted so far
  uint64_t sent_ = 0;    // of which handed to the socket
  std::condition_variable sentCv_;
  Wakeup* wake_ = nullptr;               // set before the run thread starts
  const TelemetryRing* ring_ = nullptr;  // set before the run thread starts
};

// ---- One run ---------------------------------------------------------------------------------

struct RunJob {
  // ---- Given before launch() ----
  RunConfig cfg;  // with the run's epoch
  int rank = 0;
  std::string myHost;
  std::string coordinatorHost;  // for the tcp advertise address
  std::string backend;          // a name in the backend registry
  int device = -1;              // the worker's device (--device; -1: none)
  int64_t offsetNs = 0;         // coordinator clock - worker clock (ClockSample::offsetNs)
  // The session's data-plane secret key (Z85) when cfg.dataKeys is set: a tcp:// data plane
  // is then CURVE between the run's members alone.
  std::string dataSecretKey;
  // Telemetry in every other timed iteration only (ARL_TELEMETRY_EVERY_OTHER,
  // worker_runtime.h; RankRunOptions::recordEveryOther).
  bool recordEveryOther = false;
  RunFaults faults;      // test-only; the stall is the run thread's once launched
  bool verbose = false;  // log the run's phases (--verbose)
  // How long the coordinator goes without a word from a worker before it counts it dead
  // (heartbeat interval x liveness): a library that waits for peers itself (Gloo) waits so long.
  std::chrono::milliseconds livenessBound{kDefaultHeartbeatIntervalMs * kDefaultHeartbeatLiveness};

  Outbox out;
  // The rank's telemetry (the session's ring, emptied for this run); null at level Off.
  TelemetryRing* ring = nullptr;
  // The session's flight recorder (exec/flight_recorder.h), written by the run thread alone;
  // null: none. On a failure its records go out just before the RunFailed.
  FlightRecorder* flight = nullptr;
  uint64_t batchSeq = 0;  // control thread only

  std::mutex mu;
  std::condition_variable cv;
  bool started = false;  // Start received (guarded by mu)
  bool aborted = false;  // Abort received or the worker is leaving (guarded by mu)
  std::vector<std::string> endpoints;
  std::vector<PeerDeviceInfo> devices;  // from Start: every rank's device, for CUDA IPC
  Transport* dp = nullptr;  // the run thread's data plane while it exists (guarded by mu)

  // Set with `aborted`, read without the lock: the set-up, the iterations and the check
  // stop at it (RankRunOptions::cancel).
  std::atomic<bool> cancelled{false};
  // When the control thread first told the run to stop (control thread only).
  std::optional<SteadyClock::time_point> abortedAt;

  std::atomic<bool> finished{false};
  SteadyClock::time_point finishedAt;  // written before `finished` is set
  // Set just before RunDone or RunFailed is queued (so before the coordinator can answer it):
  // the run is over for the coordinator, though the thread may still be releasing its data
  // plane and buffers.
  std::atomic<bool> reported{false};
  SteadyClock::time_point reportedAt;  // written before `reported` is set
  std::atomic<bool> running{false};    // inside the warm-up, timed and the check's iterations
  std::atomic<uint32_t> iteration{0};  // the timed iteration; 0 in the others
  // The check's iteration after the timed ones (IterationPlace's k), 0 before them.
  std::atomic<uint32_t> checkIteration{0};
  std::atomic<uint32_t> step{0};
  // Where the run is and what it waits for, for the heartbeats (exec/progress.h).
  RankProgress progress;
  std::thread th;

  // What this rank told the coordinator about the run, kept to say it again when a message
  // was lost on the way (a connection reset): Ready until Start arrives, the results until
  // the next run (guarded by mu).
  std::optional<Ready> ready;
  SteadyClock::time_point readySentAt;
  std::vector<Message> results;  // IterationResults, then RunDone or RunFailed
  // The coordinator's latest answer to a StoreGet of this run (runtime/control_store.h).
  std::optional<StoreValue> storeAnswer;

  RunJob() = default;
  RunJob(const RunJob&) = delete;
  RunJob& operator=(const RunJob&) = delete;
  // Joins the run thread: whoever drives the job lets it finish (abort()) first.
  ~RunJob();

  // Gives `results` room for the run's IterationResults and touches that memory now, before
  // the run thread starts: growing it between iterations allocated fresh pages on the run
  // thread, and a page fault there (15 us on a virtual machine) lands in the time of a peer
  // waiting for this rank (docs/telemetry.md, "The tail"). An IterationResult carries the
  // iterations of up to 10 ms (ResultBatch), so 1024 of them last ten seconds at least; a
  // longer run grows the vector as it goes.
  void reserveResults(uint32_t iterations);

  // Starts the run thread (runJobMain); once.
  void launch();
  // Start arrived: every rank's data-plane endpoint (and device), for the run thread.
  void start(std::vector<std::string> rankEndpoints, std::vector<PeerDeviceInfo> rankDevices);
  // Stops the run wherever it is, within milliseconds; the run thread reports RunFailed.
  void abort();
  // A StoreValue arrived for this run: kept for the run thread, which waits for it.
  void answerStore(StoreValue v);

  // Posts a result message and keeps it for a re-send.
  uint64_t postResult(Message m, bool wake = true);
};

// The run thread's body: sets up, reports Ready, waits for Start, runs, and reports RunDone
// or RunFailed (never throws); `finished` is set as it returns.
void runJobMain(RunJob& j);

}  // namespace arl
