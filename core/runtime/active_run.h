// One run's state machine, on the coordinator's thread: RunConfig (no endpoints) -> every
// rank binds its data plane and answers Ready with its endpoint -> Start with every endpoint
// -> IterationResult / TelemetryBatch ... -> RunDone from every rank. Any failure (a death, a
// silence, a RunFailed, an abort, a stall) sends Abort to the other ranks and collects their
// acknowledgements (RunDone or RunFailed) for at most kAckWait before the run ends, so that
// the next run starts on idle workers.
//
// The run knows its ranks by index and routing identity only; membership (who joined, who
// died, which worker holds which rank) is the coordinator's. It reaches the rest of the
// session through a RunLink: sending to a rank, logging. Events for the client go straight
// to the EventQueue. Once ended() holds a value, the coordinator delivers the result.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "exec/progress.h"
#include "exec/run_request.h"
#include "runtime/event_queue.h"
#include "runtime/protocol.h"
#include "runtime/run_plan.h"
#include "runtime/run_types.h"

namespace arl {

// What became of a message handed to the control socket.
enum class Delivery : uint8_t {
  Sent,
  QueueFull,    // the worker's control queue is at its high-water mark
  Unreachable,  // no connection to the worker (ROUTER_MANDATORY's EHOSTUNREACH)
  // No connection, found only just now (coord::kReconnectGrace): the worker's DEALER may be
  // connecting again (a reset connection). The message is lost; what the rank missed is said
  // again once its heartbeats show it (ActiveRun::resendMissed; it says Ready again while it
  // waits for Start). Past the grace, sends to it are Unreachable.
  Reconnecting,
};

// The message is on its way, or will be said again when the worker is back.
inline bool handedOver(Delivery d) { return d == Delivery::Sent || d == Delivery::Reconnecting; }

// What a run needs of the session around it.
class RunLink {
 public:
  virtual ~RunLink() = default;
  virtual Delivery sendFrames(const std::string& id, const Frames& frames) = 0;
  virtual void log(int level, const std::string& text) = 0;
  // For lines a remote party can provoke at will (rate-limited).
  virtual void logLimited(int level, const std::string& text) = 0;
};

// Unreachable: a run-scoped message could not be handed to a rank's control connection.
// Stalled: no rank made progress for the run's stall timeout.
enum class FailKind { None, Died, Silent, Unreachable, Reported, Aborted, Protocol, Stalled };

// How long a failed or aborted run waits for the other ranks to acknowledge the Abort.
inline constexpr std::chrono::milliseconds kAckWait{500};
// How long a run message goes unanswered before it is said again (a reset connection loses
// what was in flight; heartbeats show what a rank missed).
inline constexpr std::chrono::milliseconds kResendAfter{1000};

class ActiveRun {
 public:
  // A run planned as `plan` on `workers` (in rank order, as `plan.ids`). `stallTimeout` is
  // the request's, raised to what the heartbeats can resolve.
  ActiveRun(uint64_t runId, RunRequest req, RunPlan plan, std::vector<WorkerInfo> workers,
            std::chrono::milliseconds stallTimeout, RunLink& link, EventQueue& events);

  uint64_t runId() const { return runId_; }
  uint64_t epoch() const { return epoch_; }
  int size() const { return n_; }
  const std::vector<std::string>& ids() const { return ids_; }
  RunState state() const { return state_; }
  // Rank r's worker as the run knows it (its data endpoint and clock offset from its Ready).
  const WorkerInfo& worker(int r) const { return workers_[static_cast<size_t>(r)]; }
  // A failure is being wound down (or the run ended): no new failure is taken.
  bool failing() const { return kind_ != FailKind::None; }
  const std::string& failText() const { return failText_; }
  // The rank of routing identity `id` in this run; -1: none.
  int rankOf(const std::string& id) const;

  // Sends every rank its RunConfig (and announces Configuring); a rank that cannot be handed
  // it fails the run at once.
  void configure();

  // The run's messages from rank r (already checked: its epoch, its rank).
  void onReady(const Ready& m, int r);
  void onIteration(const IterationResult& m, int r);
  void onTelemetry(TelemetryBatch& m, int r);
  void onDone(const RunDone& m, int r);
  void onFailed(const RunFailed& m, int r);
  // Rank r's flight recorder, sent ahead of its RunFailed; kept for the result.
  void onFlightRecord(FlightRecord& m, int r);
  // The run's rendezvous store (runtime/control_store.h): kept as long as the run, at most
  // kMaxStoreKeys keys; a set beyond them fails the run, naming the rank.
  void onStoreSet(const StoreSet& m, int r);
  StoreValue onStoreGet(const StoreGet& m) const;
  // A heartbeat from rank r: its progress restarts the stall clock, and what it shows it
  // missed (a RunConfig, an Abort) is said again.
  void onHeartbeat(const Heartbeat& hb, int r);
  // Any run-scoped message from a rank of the run counts as progress.
  void progressed() { stall_.progressed(SteadyClock::now()); }

  // The heartbeat to rank r: it asks again for results the rank says it sent.
  Heartbeat heartbeatFor(int r) const;
  // Rank r is configured but has not answered Ready.
  bool awaitingReady(int r) const;
  // Rank r's worker has left the session: it acknowledges nothing any more.
  void rankGone(int r) { gone_[static_cast<size_t>(r)] = true; }

  // Starts winding the run down: Abort to every other rank, then acknowledgements.
  void fail(FailKind kind, int rank, const std::string& text);
  // A run-scoped message that rank r could not be handed fails the run, naming the worker.
  void failUndelivered(int r, Delivery d);
  // Ends a failing run once every live rank acknowledged the Abort or time is up, and a
  // healthy one that stalled; called every tick.
  void poll();

  // Set once the run is over: its state (Done, Failed or Aborted) and error.
  struct End {
    RunState state = RunState::Done;
    std::string error;
  };
  const std::optional<End>& ended() const { return ended_; }
  void end(RunState state, std::string error) { ended_ = End{state, std::move(error)}; }
  // The result as the run ended: times, checks and where the telemetry went.
  RunResult result() const;

 private:
  // What a rank's heartbeats and telemetry say about its part of the run. The one record of
  // a rank's progress: a failure names the step from it.
  struct RankSeen {
    bool inRun = false;  // its latest heartbeat was about this run
    ProgressSnapshot progress;
    bool stepKnown = false;  // the last step it reported (heartbeat or telemetry)
    uint32_t iteration = 0;
    uint32_t checkIteration = 0;  // the check's iteration after the timed ones (0: none)
    uint32_t step = 0;
    int reportedBeats = 0;        // heartbeats in a row that said its result was sent
    bool missingResults = false;  // its RunDone came, some of its iteration reports did not
    SteadyClock::time_point lastResend;
    SteadyClock::time_point configSentAt;
  };

  template <class M>
  Delivery send(int r, const M& m) {
    return link_.sendFrames(ids_[static_cast<size_t>(r)], m.encode());
  }
  Start startMessage() const;
  Abort abortMessage() const;
  bool recordIteration(int r, uint32_t iteration, uint64_t timeNs, uint64_t wrong);
  void noteStep(int r, uint32_t iteration, uint32_t checkIteration, uint32_t step,
                bool forwardOnly);
  void resendMissed(const Heartbeat& hb, int r, SteadyClock::time_point now);
  std::string stallText(SteadyClock::time_point now) const;
  std::string failureWithStep() const;
  // Every rank's flight record for a failed run's result, or why it has none.
  std::vector<RankFlight> flightOfRanks() const;

  RunLink& link_;
  EventQueue& events_;
  uint64_t runId_ = 0;
  uint64_t epoch_ = 0;
  RunRequest req_;
  ResolvedRun effective_;
  RunConfig cfg_;
  int n_ = 0;
  std::vector<std::string> ids_;
  std::vector<WorkerInfo> workers_;
  RunState state_ = RunState::Configuring;
  // The run's one deadline: no progress anywhere for the request's stall timeout.
  StallWatch stall_;
  std::vector<RankSeen> seen_;
  std::vector<bool> ready_, done_, acked_, gone_;
  std::vector<std::string> endpoints_;
  std::vector<PeerDeviceInfo> devices_;           // from the Readies, for CUDA IPC
  std::vector<std::vector<int64_t>> iterNs_;      // [iteration][rank], -1 = not reported
  std::vector<std::vector<uint64_t>> iterWrong_;  // [iteration][rank]
  std::vector<RankIteration> perRank_;
  TelemetryCounts telemetry_;  // received (produced less the ranks' drops) and where it went
  SentTally sent_;             // every batch received, before the bound and the client's queue
  uint64_t iterationEventsDropped_ = 0;
  std::vector<uint64_t> workerDropped_;
  std::vector<uint64_t> wrongTotal_;  // each rank's RunDone: #wrong over every iteration checked
  // With random data: each rank's output digest and first bytes (RunDone), once reported.
  std::vector<uint64_t> digests_;
  std::vector<std::string> samples_;
  std::vector<uint64_t> nextBatchSeq_;
  std::map<std::string, std::string, std::less<>> store_;  // StoreSet's keys and values
  std::vector<std::optional<FlightRecord>> flight_;        // per rank, once its FlightRecord came

  // A failure being wound down (kind_ != None): acknowledgements until ackDeadline_.
  FailKind kind_ = FailKind::None;
  int failedRank_ = -1;
  std::string failText_;  // without the step: "rank 2 (pid 12) died: killed by signal 9"
  // The first RunFailed after the failure from a rank that waited for the failed one.
  std::optional<RunFailed> waitingPeer_;
  SteadyClock::time_point ackDeadline_;
  std::optional<End> ended_;
};

}  // namespace arl
