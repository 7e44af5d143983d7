// The coordinator's private parts (coordinator.h): the state its thread keeps and the
// functions that change it. coordinator.cpp has the socket loop, the messages, the queue of
// runs and the public API; membership.cpp the workers: ranks, the held world, local
// children, joins and liveness. One run's state machine is active_run.h's.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "base/clock.h"
#include "coord_wakeup.h"
#include "event_queue.h"
#include "runtime/active_run.h"
#include "runtime/coordinator.h"
#include "runtime/process.h"
#include "runtime/protocol.h"
#include "runtime/run_plan.h"
#include "transport/zmq/curve_keys.h"
#include "transport/zmq/zap_handler.h"

namespace arl {
namespace coord {

using Clock = SteadyClock;

inline constexpr std::chrono::milliseconds kTick{10};
// How long the destructor waits for workers to leave after Shutdown before killing them.
inline constexpr std::chrono::milliseconds kShutdownWait{1000};
// How long a worker whose control connection was found closed is taken for reconnecting (a
// reset connection is back within ZeroMQ's reconnect interval, 100 to 200 ms measured) before
// what cannot reach it fails its run as unreachable.
inline constexpr std::chrono::milliseconds kReconnectGrace{1000};

// Why a local worker left, from its exit status.
LeaveReason leaveReason(const ExitStatus& st);
// "1.0 s": a silence or a wait, for a log line or an error.
std::string secondsText(Clock::duration d);
// A routing identity fit for a log line: printable as is, else hex.
std::string printableId(const std::string& id);

// ---- Commands from API threads ---------------------------------------------------------------

struct Command {
  enum class Kind { Submit, Abort, Hold, Release } kind = Kind::Submit;
  uint64_t runId = 0;
  RunRequest req;
  std::string reason;
  std::vector<WorkerInfo> world;  // Hold
};

// A submitted run that has not started: waiting for local workers, then for its plan. Or a
// hold or release of the world, which waits its turn behind the runs submitted before it.
struct QueuedRun {
  enum class Kind : uint8_t { Run, Hold, Release } kind = Kind::Run;
  uint64_t runId = 0;
  RunRequest req;
  std::vector<WorkerInfo> world;  // Hold: the workers to hold; empty = those of the next run
  Clock::time_point since;
  bool waitAnnounced = false;
  std::shared_ptr<PlanJob> plan;  // set once its planning thread has started
};

// ---- State kept by the coordinator thread ----------------------------------------------------

struct Peer {
  std::string id;
  WorkerInfo info;  // info.serial orders the ranks within a host
  Clock::time_point lastSeen;
  Clock::time_point joinedAt;
  int welcomedRank = -1;
  int welcomedWorld = 0;
};

struct Child {
  int64_t pid = 0;
  bool joined = false;
};

// The local workers of backend mpi: one mpirun child, which starts them all in one MPI world.
// They are not the lab's children: the lab watches their pids (from their Hello) and ends and
// restarts the whole set when one of them goes, since MPI's world cannot lose a member.
struct MpiSet {
  int64_t pid = 0;            // mpirun's
  int size = 0;               // workers it starts
  std::set<int64_t> workers;  // pids of those that joined
};

// A cluster launcher the coordinator started (CoordinatorOptions::launch): mpirun or srun
// for all the remote workers, or one ssh per worker.
struct Launcher {
  int64_t pid = 0;   // 0: reaped
  std::string name;  // "mpirun", "srun", "ssh node1"
};

// The world held by holdWorld(): fixed by the hold's own list, or by the first run planned
// after it. Its members keep their ranks (their index in `ids`) while it is held.
struct HeldWorld {
  bool fixed = false;
  std::vector<std::string> ids;     // routing identities, in rank order
  std::vector<WorkerInfo> workers;  // as they were when the world was fixed
  std::string lost;                 // the first member that left, and why; empty while it is whole
};

}  // namespace coord

struct Coordinator::Impl final : RunLink {
  using Clock = coord::Clock;
  using Command = coord::Command;
  using QueuedRun = coord::QueuedRun;
  using Peer = coord::Peer;
  using Child = coord::Child;
  using HeldWorld = coord::HeldWorld;

  CoordinatorOptions opt;
  std::string workerBinary;
  zmq::context_t ctx{1};
  zmq::socket_t router;
  std::string boundEndpoint;  // as ZeroMQ reports it
  std::string localEndpoint;  // what local children connect to
  std::string joinCmd;
  ControlSecurityState security;
  std::optional<CurveKeyPair> keys;  // the lab's, when security.curve
  // Refusals the ZAP handler's thread and `handshakes` report (noteRefusal), logged
  // (rate-limited) by the loop.
  std::mutex refusedMu;
  std::vector<std::string> refused;
  std::unique_ptr<ZapHandler> zap;  // before the socket: it admits the socket's peers
  // The control socket's handshakes that fail before ZAP sees a key (control_security.cpp),
  // read on the loop's thread; reset before `router` closes.
  std::unique_ptr<zmq::monitor_t> handshakes;
  std::thread thread;
  std::atomic<bool> stopping{false};
  // Raised by API threads when they queue a command or stop the loop, and by planning
  // threads when a plan is ready (shared: a plan may finish after the coordinator is gone).
  std::shared_ptr<Wakeup> wake = std::make_shared<Wakeup>();

  std::unique_ptr<EventQueue> events;  // to the client; thread-safe
  std::atomic<uint64_t> nextRunId{1};  // taken by submit()

  // Shared with API threads (guarded by mu).
  mutable std::mutex mu;
  std::deque<Command> commands;
  std::vector<WorkerInfo> snapshot;
  bool threadDone = false;

  // Coordinator thread only.
  std::vector<Peer> peers;  // in rank order
  std::map<int64_t, Child> children;
  std::optional<coord::MpiSet> mpiSet;
  std::string mpirun;  // path of mpirun, for local workers of backend mpi
  std::vector<coord::Launcher> launchers;
  std::vector<std::vector<std::string>> launchArgv;  // CoordinatorOptions::launch's processes
  std::string remoteEndpoint;                        // the control endpoint as other hosts reach it
  int pendingLocal = 0;  // local children spawned that have not joined (or ended) yet
  // Removed workers by identity; true when the process is known to be gone (a local one,
  // killed and reaped), whose late messages are dropped without a word.
  std::map<std::string, bool> removedIds;
  std::set<std::string> unknownLogged;
  uint64_t joinSeq = 0;          // the last serial given to a worker
  std::deque<QueuedRun> queued;  // submitted runs, in order; the front may be planning
  std::unique_ptr<ActiveRun> run;
  std::optional<HeldWorld> held;  // set from a hold until its release
  // Workers whose control connection was found closed, and since when: logged once, and taken
  // for reconnecting (Delivery::Reconnecting) for kReconnectGrace, until a send works again or
  // a message comes from them.
  std::map<std::string, Clock::time_point> unreachable;
  Clock::time_point nextHeartbeat;
  // Log rate limit for messages from unknown or misbehaving senders.
  Clock::time_point logWindow;
  int logsInWindow = 0;
  int logsSuppressed = 0;

  // ---- Events and logs -----------------------------------------------------------------------

  // Control events: never dropped.
  void emit(CoordinatorEvent e) { events->push(std::move(e)); }

  void log(int level, const std::string& text) override { emit(LogEvent{level, text}); }

  // For lines a remote party can provoke at will: at most 20 per second.
  void logLimited(int level, const std::string& text) override;

  // ---- Sending -------------------------------------------------------------------------------

  // With ROUTER_MANDATORY, a message to a worker whose connection is gone (its process
  // ended: the kernel closed the socket) fails at once with EHOSTUNREACH. The worker is not
  // removed for that: a reset connection comes back by itself (the DEALER reconnects with its
  // identity), and liveness removes a worker that stays silent.
  Delivery sendFrames(const std::string& id, const Frames& f) override;
  void refuseOtherVersion(const std::string& id, const zmq::message_t& header);

  template <class M>
  Delivery sendMsg(const std::string& id, const M& m) {
    return sendFrames(id, m.encode());
  }

  Peer* findPeer(const std::string& id);

  // The rank of `id` in the active run; -1: none, or no run.
  int rankOf(const std::string& id) const { return run ? run->rankOf(id) : -1; }

  // The active run, while it still takes a failure.
  ActiveRun* healthyRun() { return run && !run->failing() ? run.get() : nullptr; }

  // ---- Ranks ---------------------------------------------------------------------------------

  // Ranks in join order, grouped by host (this machine first, then the others in the order
  // they first joined), so that the ranks of one host are contiguous: what hierarchical
  // schedules and the ring expect. During a run the ranks of its participants stay as they
  // are, and workers that join meanwhile get rank -1 until it ends; while the world is held,
  // its members keep their ranks and every other worker is a spare until the release.
  void assignRanks();

  // The held world's members first, in their ranks (a member that left leaves its rank
  // empty), then the spares in join order.
  void rankHeldWorld();

  // The world size a worker is told in Welcome: the run's, the held world's, or every worker.
  int worldSize() const;

  // Publishes the worker list for API threads.
  void publish();

  void welcome(Peer& p);

  // ---- Local children ------------------------------------------------------------------------

  // Starts one local worker on `device` (-1: none); a run waits for it to join (pendingLocal).
  void spawnLocal(int device);

  // Removes a worker from the session: kills a local one (also when stopped) and reaps it.
  void removePeer(const std::string& id, LeaveReason why, bool respawn);

  // A held world that lost a member cannot run again: the first loss is what later runs report.
  void noteHeldMemberLeft(const std::string& id, const WorkerInfo& info, const LeaveReason& why);

  // waitpid(WNOHANG) on every child: a killed local worker is noticed within a tick.
  void reapChildren();

  // Starts the local workers of backend mpi under one mpirun (runtime/mpi_launch.h).
  void spawnMpiSet();
  // Whether `info` is one of the mpirun's workers.
  bool inMpiSet(const WorkerInfo& info) const;
  // A worker of the set gone, or mpirun ended: fails the run naming the rank, ends the set.
  void watchMpiSet();
  // Ends mpirun and every worker of it (SIGTERM to mpirun, which passes it on; SIGKILL to
  // what is left after kShutdownWait), removes its workers, and starts a new set when
  // `respawn`.
  void endMpiSet(const LeaveReason& why, bool respawn);
  // At shutdown: waits up to kShutdownWait for mpirun to end once its workers have left (they
  // were told to), then ends what is left.
  void shutdownMpiSet();

  // CoordinatorOptions::launch's command lines (runtime/launcher.h), once the endpoint and
  // the keys are known; startLaunchers() runs them, on the coordinator's thread.
  void planLaunchers();
  void startLaunchers();
  // A launcher that ended before the remote workers had all joined fails their wait at once
  // (a WorkerLeft that never joined, naming it and its exit status); later, it is logged.
  void watchLaunchers();
  // At shutdown, once the workers were told to leave: waits up to kShutdownWait for each
  // launcher to end with them, then SIGTERMs and reaps what is left.
  void shutdownLaunchers();

  // ---- Liveness ------------------------------------------------------------------------------

  void checkLiveness();
  std::string hostNote(const std::string& host, int rank) const;

  // ---- Queued runs ---------------------------------------------------------------------------

  // Moves the first queued run on: it waits while local workers are still starting (at most
  // joinTimeout; not when the world is held: newcomers are spares), then is planned on another
  // thread, then starts. One run at a time. Holds and releases take effect between runs.
  void advanceQueue();

  // The RunFinished of a run that never reached a worker.
  void finishUnstarted(uint64_t runId, const RunRequest& req, RunState state,
                       const std::string& error);

  // Ends every queued run (Aborted); a plan still being made is left to end on its own. Holds
  // and releases keep their places.
  void abortQueued(const std::string& reason);

  // ---- The held world ------------------------------------------------------------------------

  // Holds `world` (matched by serial), or, when it is empty, the workers of the next run.
  void holdWorld(const std::vector<WorkerInfo>& world);

  // The world the first run after an open hold is planned on: every worker now.
  void fixHeldWorld();

  void releaseWorld();

  // Why no run starts on the held world any more.
  std::string heldWorldBroken() const;

  // ---- Runs ----------------------------------------------------------------------------------

  void startRun(const QueuedRun& q, RunPlan p);

  // Delivers the result of the run that ended (ActiveRun::ended()).
  void finishRun();

  // A run that ended with the last message or tick is delivered at once.
  void finishEndedRun();

  // ---- Incoming messages ---------------------------------------------------------------------

  // The envelope of a message from the ROUTER (identity, header, body), read where ZeroMQ
  // holds it: a telemetry batch is not copied before it is decoded.
  static DecodeResult<Envelope> decodeFrames(const std::vector<zmq::message_t>& frames);

  void onMessage(std::vector<zmq::message_t>& frames);

  // A Ready names the worker's data-plane endpoint and clock offset for workers() too.
  void onReady(const Ready& m, int r, Peer& peer);

  // `fingerprint`: of the key the worker joined with ("" in the clear).
  void onHello(const std::string& id, const Hello& h, const std::string& fingerprint);

  static std::string userId(zmq::message_t& frame);

  // Sets up CURVE on the control socket before it binds `listen`, or refuses a listen that
  // needs keys it does not have (ConfigError).
  void secure(const std::string& listen);

  // The arguments that give a local worker the lab's keys (none in the clear).
  std::vector<std::string> keyArgs() const;

  // Logs what the ZAP handler refused since the last look, and the handshakes that failed
  // before it could (a worker given another server key, a client without keys).
  void logRefusals();
  // Keeps a refusal's line for logRefusals (at most 1000 between looks). Thread-safe.
  void noteRefusal(std::string line);

  // A local child's routing identity ends with ":p<our pid>" (from its --parent-pid), which a
  // worker on another machine with the same pid as a child does not carry.
  static bool spawnedHere(const std::string& id);

  // ---- Commands ------------------------------------------------------------------------------

  void processCommands();

  // ---- The loop ------------------------------------------------------------------------------

  // Once the loop has ended: runs submitted since its last look end Failed, and later
  // submit() calls answer for themselves (threadDone).
  void finishLateCommands();

  void loop();

  void shutdownAll();
};

}  // namespace arl
