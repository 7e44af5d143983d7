// The coordinator (coordinator.h). One thread owns the ROUTER socket, the worker table, the
// local children and the state of the current run; API calls reach it through a command
// queue that the loop drains every tick (10 ms), and read what it publishes (the worker
// list) under a mutex. Requests are checked and their schedules generated on a planning
// thread (std::async), so that a large schedule never delays a heartbeat; events go to the
// client through an EventQueue (event_queue.h).
//
// Liveness follows the zguide's Paranoid Pirate: any message counts as life, heartbeats go
// both ways every `heartbeat`, and a worker silent for `missedHeartbeats` intervals is dead.
// Local children are also watched with waitpid(WNOHANG) every tick, so a killed child is
// noticed within milliseconds, not heartbeats.
//
// A run: RunConfig (no endpoints) -> every rank binds its data plane and answers Ready with
// its endpoint -> Start with every endpoint -> IterationResult / TelemetryBatch ... ->
// RunDone from every rank. Any failure (a death, a silence, a RunFailed, abort()) sends
// Abort to the other ranks and collects their acknowledgements (RunDone or RunFailed) for at
// most kAckWait before the result is delivered, so that the next run starts on idle workers.
#include "runtime/coordinator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "backend/registry.h"
#include "base/clock.h"
#include "base/errors.h"
#include "base/limits.h"
#include "control_poll.h"
#include "coord_wakeup.h"
#include "event_queue.h"
#include "exec/collective_library.h"
#include "runtime/process.h"
#include "runtime/protocol.h"
#include "schedule/generators.h"

namespace arl {

std::string_view toString(RunState s) {
  switch (s) {
    case RunState::Idle: return "idle";
    case RunState::Queued: return "queued";
    case RunState::Refused: return "refused";
    case RunState::Configuring: return "configuring";
    case RunState::Running: return "running";
    case RunState::Done: return "done";
    case RunState::Failed: return "failed";
    case RunState::Aborted: return "aborted";
  }
  return "?";
}

int localDevice(const CoordinatorOptions& opt, int k) {
  const auto& d = opt.localDevices;
  if (d.empty() || k < 0) return -1;
  if (d.size() == 1) return d.front();
  return static_cast<size_t>(k) < d.size() ? d[static_cast<size_t>(k)] : -1;
}

std::vector<std::vector<double>> perIterationPerRankUs(const RunResult& res) {
  std::vector<std::vector<double>> m;
  for (const RankIteration& ri : res.perRank) {
    if (ri.rank < 0 || ri.rank >= res.nranks) continue;
    if (m.size() <= ri.iteration) m.resize(ri.iteration + size_t{1});
    auto& row = m[ri.iteration];
    row.resize(static_cast<size_t>(res.nranks), -1.0);
    row[static_cast<size_t>(ri.rank)] = static_cast<double>(ri.timeNs) / 1e3;
  }
  return m;
}

namespace {

using Clock = SteadyClock;
using std::chrono::milliseconds;

constexpr milliseconds kTick{10};
// How long a failed or aborted run waits for the other ranks to acknowledge the Abort.
constexpr milliseconds kAckWait{500};
// How long a run message goes unanswered before it is said again (a reset connection loses
// what was in flight; heartbeats show what a rank missed).
constexpr milliseconds kResendAfter{1000};
// How long the destructor waits for workers to leave after Shutdown before killing them.
constexpr milliseconds kShutdownWait{1000};

LeaveReason leaveReason(const ExitStatus& st) {
  return {st.signaled ? LeaveKind::Killed : LeaveKind::Exited, st.signaled ? st.signal : st.code,
          st.describe()};
}

std::string seconds1(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

// A routing identity fit for a log line: printable as is, else hex.
std::string printableId(const std::string& id) {
  const bool printable = !id.empty() && std::all_of(id.begin(), id.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7F;
  });
  if (printable) return id;
  std::string out = "0x";
  char buf[3];
  for (unsigned char c : id) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    out += buf;
  }
  return out;
}

// "tcp://HOST:PORT" -> (HOST, PORT).
std::pair<std::string, std::string> splitTcp(const std::string& ep) {
  const std::string rest = ep.rfind("tcp://", 0) == 0 ? ep.substr(6) : ep;
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos) return {rest, ""};
  return {rest.substr(0, colon), rest.substr(colon + 1)};
}

bool isWildcard(const std::string& host) {
  return host == "0.0.0.0" || host == "*" || host == "[::]" || host == "::";
}

// ---- Commands from API threads ---------------------------------------------------------------

struct RunPlan {
  RunConfig cfg;                 // everything but epoch/run id
  ResolvedRun run;               // what the request resolved to on this world
  std::vector<std::string> ids;  // routing identity of each rank
  std::string error;             // why the request was refused; empty = planned
};

struct Command {
  enum class Kind { Submit, Abort, Hold, Release } kind = Kind::Submit;
  uint64_t runId = 0;
  RunRequest req;
  std::string reason;
  std::vector<WorkerInfo> world;  // Hold
};

// A plan being made on a detached thread. The coordinator polls it; one that nobody waits
// for any more (an aborted run, a closing coordinator) ends on its own, holding nothing of
// the coordinator's but the wake-up.
struct PlanJob {
  std::mutex mu;
  std::optional<RunPlan> plan;

  std::optional<RunPlan> take() {
    std::lock_guard<std::mutex> lock(mu);
    return std::exchange(plan, std::nullopt);
  }
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
  // Last progress the worker reported (heartbeat or telemetry) in the current run.
  bool progressKnown = false;
  uint32_t iteration = 0;
  uint32_t step = 0;
  int welcomedRank = -1;
  int welcomedWorld = 0;
};

struct Child {
  int64_t pid = 0;
  bool joined = false;
};

// Unreachable: a run-scoped message could not be handed to a rank's control connection.
// Stalled: no rank made progress for the run's stall timeout.
enum class FailKind { None, Died, Silent, Unreachable, Reported, Aborted, Protocol, Stalled };

// What a rank's heartbeats say about its part of the current run.
struct RankSeen {
  bool inRun = false;  // its latest heartbeat was about this run
  ProgressSnapshot progress;
  int reportedBeats = 0;        // heartbeats in a row that said its result was sent
  bool missingResults = false;  // its RunDone came, some of its iteration reports did not
  Clock::time_point lastResend;
};

// What became of a message handed to the ROUTER.
enum class Delivery : uint8_t {
  Sent,
  QueueFull,    // the worker's control queue is at its high-water mark
  Unreachable,  // no connection to the worker (ROUTER_MANDATORY's EHOSTUNREACH)
};

// The world held by holdWorld(): fixed by the hold's own list, or by the first run planned
// after it. Its members keep their ranks (their index in `ids`) while it is held.
struct HeldWorld {
  bool fixed = false;
  std::vector<std::string> ids;     // routing identities, in rank order
  std::vector<WorkerInfo> workers;  // as they were when the world was fixed
  std::string lost;                 // the first member that left, and why; empty while it is whole
};

struct ActiveRun {
  uint64_t runId = 0;
  uint64_t epoch = 0;
  RunRequest req;
  ResolvedRun effective;
  RunConfig cfg;
  RunState state = RunState::Configuring;
  // The run's one deadline: no progress anywhere for the request's stall timeout.
  StallWatch stall{std::chrono::milliseconds(1)};
  std::vector<RankSeen> seen;
  std::vector<Clock::time_point> configSentAt;
  int n = 0;
  std::vector<std::string> ids;
  std::vector<WorkerInfo> workers;
  std::vector<bool> ready, done, acked, gone;
  std::vector<std::string> endpoints;
  std::vector<PeerDeviceInfo> devices;           // from the Readies, for CUDA IPC
  std::vector<std::vector<int64_t>> iterNs;      // [iteration][rank], -1 = not reported
  std::vector<std::vector<uint64_t>> iterWrong;  // [iteration][rank]
  std::vector<RankIteration> perRank;
  TelemetryCounts telemetry;  // received (produced less the ranks' drops) and what went where
  uint64_t iterationEventsDropped = 0;
  std::vector<uint64_t> workerDropped;
  std::vector<uint64_t> nextBatchSeq;

  // Failure being wound down (kind != None): acknowledgements are collected until ackDeadline.
  FailKind kind = FailKind::None;
  int failedRank = -1;
  std::string failText;  // without the step: "rank 2 (pid 12) died: killed by signal 9"
  std::optional<RunFailed> reported;
  bool failProgressKnown = false;
  uint32_t failIteration = 0;
  uint32_t failStep = 0;
  // Steps at which other ranks were waiting for the failed rank (from their RunFailed).
  std::optional<RunFailed> waitingPeer;
  Clock::time_point ackDeadline;
};

}  // namespace

struct Coordinator::Impl {
  CoordinatorOptions opt;
  std::string workerBinary;
  zmq::context_t ctx{1};
  zmq::socket_t router;
  std::string boundEndpoint;  // as ZeroMQ reports it
  std::string localEndpoint;  // what local children connect to
  std::string joinCmd;
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
  int pendingLocal = 0;  // local children spawned that have not joined (or ended) yet
  // Removed workers by identity; true when the process is known to be gone (a local one,
  // killed and reaped), whose late messages are dropped without a word.
  std::map<std::string, bool> removedIds;
  std::set<std::string> unknownLogged;
  uint64_t joinSeq = 0;          // the last serial given to a worker
  std::deque<QueuedRun> queued;  // submitted runs, in order; the front may be planning
  std::unique_ptr<ActiveRun> run;
  std::optional<HeldWorld> held;  // set from a hold until its release
  // Workers whose control connection was found closed, logged once until a send works again.
  std::set<std::string> unreachable;
  Clock::time_point nextHeartbeat;
  // Log rate limit for messages from unknown or misbehaving senders.
  Clock::time_point logWindow;
  int logsInWindow = 0;
  int logsSuppressed = 0;

  // ---- Events and logs -----------------------------------------------------------------------

  // Control events: never dropped.
  void emit(CoordinatorEvent e) { events->push(std::move(e)); }

  void log(int level, const std::string& text) { emit(LogEvent{level, text}); }

  // For lines a remote party can provoke at will: at most 20 per second.
  void logLimited(int level, const std::string& text) {
    const auto now = Clock::now();
    if (now - logWindow >= std::chrono::seconds(1)) {
      if (logsSuppressed > 0) {
        log(1, std::to_string(logsSuppressed) + " similar log lines suppressed");
      }
      logWindow = now;
      logsInWindow = 0;
      logsSuppressed = 0;
    }
    if (++logsInWindow <= 20) {
      log(level, text);
    } else {
      ++logsSuppressed;
    }
  }

  // ---- Sending -------------------------------------------------------------------------------

  // With ROUTER_MANDATORY, a message to a worker whose connection is gone (its process
  // ended: the kernel closed the socket) fails at once with EHOSTUNREACH. The worker is not
  // removed for that: a reset connection comes back by itself (the DEALER reconnects with its
  // identity), and liveness removes a worker that stays silent.
  Delivery sendTo(const std::string& id, const Frames& f) {
    try {
      if (!router.send(zmq::buffer(id), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        logLimited(1, "control queue to " + printableId(id) + " is full; message dropped");
        return Delivery::QueueFull;
      }
      for (size_t i = 0; i < f.size(); ++i) {
        router.send(zmq::buffer(f[i]),
                    i + 1 < f.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
      unreachable.erase(id);
      return Delivery::Sent;
    } catch (const zmq::error_t& e) {
      if (unreachable.insert(id).second) {
        const Peer* p = findPeer(id);
        logLimited(1, "cannot send to worker " + (p ? p->info.name : printableId(id)) + ": " +
                          e.what() +
                          (e.num() == EHOSTUNREACH ? " (its control connection is closed)" : ""));
      }
      return Delivery::Unreachable;
    }
  }

  template <class M>
  Delivery sendMsg(const std::string& id, const M& m) {
    return sendTo(id, m.encode());
  }

  // A run-scoped message (RunConfig, Start) that rank k of the active run cannot be handed
  // fails the run at once, naming the worker, instead of when its heartbeats stop.
  void failUndelivered(int k, Delivery d) {
    const WorkerInfo& w = run->workers[static_cast<size_t>(k)];
    fail(FailKind::Unreachable, k,
         "rank " + std::to_string(k) + " (" + w.name + ", pid " + std::to_string(w.pid) + ") " +
             (d == Delivery::QueueFull
                  ? "does not read its control messages (its queue is full)"
                  : "cannot be reached: its control connection is closed (the worker ended, or "
                    "its host or the network is down)"));
  }

  Peer* findPeer(const std::string& id) {
    for (auto& p : peers)
      if (p.id == id) return &p;
    return nullptr;
  }

  int rankOf(const std::string& id) const {
    if (!run) return -1;
    for (int r = 0; r < run->n; ++r)
      if (run->ids[static_cast<size_t>(r)] == id) return r;
    return -1;
  }

  // ---- Ranks ---------------------------------------------------------------------------------

  // Ranks in join order, grouped by host (this machine first, then the others in the order
  // they first joined), so that the ranks of one host are contiguous: what hierarchical
  // schedules and the ring expect. During a run the ranks of its participants stay as they
  // are, and workers that join meanwhile get rank -1 until it ends; while the world is held,
  // its members keep their ranks and every other worker is a spare until the release.
  void assignRanks() {
    if (run) {
      for (auto& p : peers) {
        if (rankOf(p.id) < 0) p.info.rank = -1;
        p.info.spare = p.info.rank < 0;
      }
      return;
    }
    if (held && held->fixed) {
      rankHeldWorld();
      return;
    }
    // This machine first (its local workers), then the other hosts as they joined.
    std::vector<std::string> hostOrder = {hostName()};
    std::vector<Peer*> byJoin;
    for (auto& p : peers) byJoin.push_back(&p);
    std::sort(byJoin.begin(), byJoin.end(),
              [](const Peer* a, const Peer* b) { return a->info.serial < b->info.serial; });
    for (const Peer* p : byJoin) {
      if (std::find(hostOrder.begin(), hostOrder.end(), p->info.host) == hostOrder.end()) {
        hostOrder.push_back(p->info.host);
      }
    }
    auto hostIndex = [&](const std::string& h) {
      return std::find(hostOrder.begin(), hostOrder.end(), h) - hostOrder.begin();
    };
    std::stable_sort(peers.begin(), peers.end(), [&](const Peer& a, const Peer& b) {
      const auto ha = hostIndex(a.info.host), hb = hostIndex(b.info.host);
      return ha != hb ? ha < hb : a.info.serial < b.info.serial;
    });
    for (size_t r = 0; r < peers.size(); ++r) {
      peers[r].info.rank = static_cast<int>(r);
      peers[r].info.spare = false;
    }
  }

  // The held world's members first, in their ranks (a member that left leaves its rank
  // empty), then the spares in join order.
  void rankHeldWorld() {
    std::vector<Peer> ordered;
    for (size_t r = 0; r < held->ids.size(); ++r) {
      if (Peer* p = findPeer(held->ids[r])) {
        p->info.rank = static_cast<int>(r);
        p->info.spare = false;
        ordered.push_back(std::move(*p));
        p->id.clear();  // moved; skipped below
      }
    }
    std::sort(peers.begin(), peers.end(),
              [](const Peer& a, const Peer& b) { return a.info.serial < b.info.serial; });
    for (auto& p : peers) {
      if (p.id.empty()) continue;
      p.info.rank = -1;
      p.info.spare = true;
      ordered.push_back(std::move(p));
    }
    peers = std::move(ordered);
  }

  // The world size a worker is told in Welcome: the run's, the held world's, or every worker.
  int worldSize() const {
    if (run) return run->n;
    if (held && held->fixed) return static_cast<int>(held->ids.size());
    return static_cast<int>(peers.size());
  }

  // Publishes the worker list for API threads.
  void publish() {
    std::vector<WorkerInfo> infos;
    for (const auto& p : peers) infos.push_back(p.info);
    std::lock_guard<std::mutex> lock(mu);
    snapshot = std::move(infos);
  }

  void welcome(Peer& p) {
    const int world = worldSize();
    if (p.info.rank < 0 || (p.welcomedRank == p.info.rank && p.welcomedWorld == world)) return;
    Welcome w;
    w.rank = p.info.rank;
    w.worldSize = world;
    w.heartbeatIntervalMs = static_cast<uint32_t>(opt.heartbeat.count());
    w.heartbeatLiveness = static_cast<uint32_t>(opt.missedHeartbeats);
    if (sendMsg(p.id, w) == Delivery::Sent) {
      p.welcomedRank = p.info.rank;
      p.welcomedWorld = world;
    }
  }

  // ---- Local children ------------------------------------------------------------------------

  // Starts one local worker on `device` (-1: none); a run waits for it to join (pendingLocal).
  void spawnLocal(int device) {
    std::vector<std::string> argv = {workerBinary,
                                     "--connect",
                                     localEndpoint,
                                     "--backend",
                                     opt.backend,
                                     "--parent-pid",
                                     std::to_string(::getpid())};
    if (device >= 0) {
      argv.push_back("--device");
      argv.push_back(std::to_string(device));
    }
    argv.insert(argv.end(), opt.workerExtraArgs.begin(), opt.workerExtraArgs.end());
    try {
      const int64_t pid = spawnChild(argv);
      children[pid] = Child{pid, false};
      ++pendingLocal;
      log(0, "started local worker (pid " + std::to_string(pid) + ")");
    } catch (const std::exception& e) {
      WorkerLeft left;
      left.worker.local = true;
      left.joined = false;
      left.reason = {LeaveKind::Exited, -1, std::string("could not be started: ") + e.what()};
      log(2, "cannot start a local worker: " + std::string(e.what()));
      emit(std::move(left));
    }
  }

  // Removes a worker from the session: kills a local one (also when stopped) and reaps it.
  void removePeer(const std::string& id, LeaveReason why, bool respawn) {
    auto it = std::find_if(peers.begin(), peers.end(), [&](const Peer& p) { return p.id == id; });
    if (it == peers.end()) return;
    WorkerInfo info = it->info;
    peers.erase(it);
    removedIds[id] = info.local;
    // A remote worker is told at once, so that it leaves with 0 when it is alive (a stopped
    // one reads it when continued); a local one is killed below.
    if (!info.local) sendMsg(id, Shutdown{"removed from the session: " + why.text});
    if (info.local) {
      auto c = children.find(info.pid);
      if (c != children.end()) {
        killAndReap(info.pid, milliseconds(1000));
        children.erase(c);
      }
    }
    if (run) {
      const int r = rankOf(id);
      if (r >= 0) run->gone[static_cast<size_t>(r)] = true;
    }
    unreachable.erase(id);
    noteHeldMemberLeft(id, info, why);
    log(1, "worker " + info.name + " (rank " + std::to_string(info.rank) + ", pid " +
               std::to_string(info.pid) + ") removed: " + why.text);
    assignRanks();
    publish();
    emit(WorkerLeft{info, std::move(why), true});
    if (info.local && respawn && !stopping.load()) spawnLocal(info.device);
  }

  // A held world that lost a member cannot run again: the first loss is what later runs report.
  void noteHeldMemberLeft(const std::string& id, const WorkerInfo& info, const LeaveReason& why) {
    if (!held || !held->fixed || !held->lost.empty()) return;
    const auto it = std::find(held->ids.begin(), held->ids.end(), id);
    if (it == held->ids.end()) return;
    held->lost = "rank " + std::to_string(it - held->ids.begin()) + " (" + info.name + ", pid " +
                 std::to_string(info.pid) + ") left the session: " + why.text;
  }

  // waitpid(WNOHANG) on every child: a killed local worker is noticed within a tick.
  void reapChildren() {
    std::vector<std::pair<int64_t, ExitStatus>> ended;
    for (auto& [pid, c] : children) {
      if (auto st = tryReap(pid)) ended.emplace_back(pid, *st);
    }
    for (const auto& [pid, st] : ended) {
      const bool joined = children[pid].joined;
      children.erase(pid);
      Peer* p = nullptr;
      for (auto& q : peers)
        if (q.info.local && q.info.pid == pid) p = &q;
      if (p == nullptr) {
        if (!joined) {
          --pendingLocal;
          WorkerLeft left;
          left.worker.pid = pid;
          left.worker.local = true;
          left.joined = false;
          left.reason = leaveReason(st);
          left.reason.text += " before joining";
          log(2, "local worker (pid " + std::to_string(pid) + ", " + workerBinary + ") " +
                     left.reason.text);
          emit(std::move(left));
        }
        continue;
      }
      const std::string id = p->id;
      const int r = rankOf(id);
      if (run && run->kind == FailKind::None && r >= 0 && !stopping.load()) {
        fail(FailKind::Died, r,
             "rank " + std::to_string(r) + " (pid " + std::to_string(pid) +
                 ") died: " + st.describe());
      }
      // Already reaped: removePeer finds no child left to kill.
      removePeer(id, leaveReason(st), true);
    }
  }

  // ---- Liveness ------------------------------------------------------------------------------

  void checkLiveness() {
    const auto now = Clock::now();
    const auto limit = opt.heartbeat * opt.missedHeartbeats;
    std::vector<std::string> dead;
    for (const auto& p : peers)
      if (now - p.lastSeen > limit) dead.push_back(p.id);
    for (const auto& id : dead) {
      Peer* p = findPeer(id);
      const std::string silence = seconds1(now - p->lastSeen);
      const int r = rankOf(id);
      if (run && run->kind == FailKind::None && r >= 0) {
        fail(FailKind::Silent, r,
             "rank " + std::to_string(r) + " (pid " + std::to_string(p->info.pid) +
                 ") stopped responding (no heartbeat for " + silence + ")");
      }
      removePeer(id, {LeaveKind::MissedHeartbeats, 0, "no heartbeat for " + silence}, true);
    }
    if (now >= nextHeartbeat) {
      int unconfigured = -1;  // a configuring rank without a Ready whose connection is gone
      for (const auto& p : peers) {
        const Delivery d = sendMsg(p.id, heartbeatFor(p));
        const int r = rankOf(p.id);
        if (d == Delivery::Unreachable && r >= 0 && run && run->kind == FailKind::None &&
            run->state == RunState::Configuring && !run->ready[static_cast<size_t>(r)]) {
          unconfigured = r;
        }
      }
      nextHeartbeat = now + opt.heartbeat;
      // Its RunConfig may have been queued just before the coordinator saw the connection end
      // (a worker killed between runs, under load): the send succeeded and the message was
      // lost with the connection. It will never answer Ready, so the run fails now, as an
      // undelivered RunConfig does, not when liveness gives up on it.
      if (unconfigured >= 0) failUndelivered(unconfigured, Delivery::Unreachable);
    }
  }

  // ---- Queued runs ---------------------------------------------------------------------------

  // Moves the first queued run on: it waits while local workers are still starting (at most
  // joinTimeout; not when the world is held: newcomers are spares), then is planned on another
  // thread, then starts. One run at a time. Holds and releases take effect between runs.
  void advanceQueue() {
    while (!run && !queued.empty() && queued.front().kind != QueuedRun::Kind::Run) {
      if (queued.front().kind == QueuedRun::Kind::Hold) {
        holdWorld(queued.front().world);
      } else {
        releaseWorld();
      }
      queued.pop_front();
    }
    if (run || queued.empty()) return;
    QueuedRun& q = queued.front();
    if (!q.plan) {
      if (held && held->fixed && !held->lost.empty()) {
        const QueuedRun failed = std::move(q);
        queued.pop_front();
        finishUnstarted(failed.runId, failed.req, RunState::Failed, heldWorldBroken());
        return;
      }
      const bool fixed = held && held->fixed;
      if (!fixed && pendingLocal > 0 && Clock::now() - q.since < opt.joinTimeout) {
        if (!q.waitAnnounced) {
          q.waitAnnounced = true;
          emit(StateEvent{q.runId, RunState::Queued,
                          "run " + std::to_string(q.runId) + " waits for " +
                              std::to_string(pendingLocal) + " local worker(s) to join"});
        }
        return;
      }
      if (held && !fixed && !peers.empty()) fixHeldWorld();
      std::vector<std::string> hosts, ids;
      std::vector<uint64_t> namespaces;
      std::vector<RankPlace> places;
      const auto place = [&](const WorkerInfo& w) {
        hosts.push_back(w.host);
        namespaces.push_back(w.pidNamespace);
        places.push_back({w.host, w.backend, w.device});
      };
      if (held && held->fixed) {
        ids = held->ids;
        for (const auto& w : held->workers) place(w);
      } else {
        for (const auto& p : peers) {
          place(p.info);
          ids.push_back(p.id);
        }
      }
      q.plan = std::make_shared<PlanJob>();
      std::thread([job = q.plan, wakeup = wake, req = q.req, hosts, namespaces, places, ids] {
        RunPlan p = plan(req, hosts, namespaces, places, ids);
        std::lock_guard<std::mutex> lock(job->mu);
        job->plan = std::move(p);
        wakeup->raise();
      }).detach();
      return;
    }
    std::optional<RunPlan> ready = q.plan->take();
    if (!ready) return;
    RunPlan p = std::move(*ready);
    QueuedRun next = std::move(q);
    queued.pop_front();
    if (!p.error.empty()) {
      finishUnstarted(next.runId, next.req, RunState::Refused, p.error);
      return;
    }
    startRun(next, std::move(p));
  }

  // The RunFinished of a run that never reached a worker.
  void finishUnstarted(uint64_t runId, const RunRequest& req, RunState state,
                       const std::string& error) {
    RunFinished f;
    f.result.runId = runId;
    f.result.request = req;
    f.result.state = state;
    f.result.error = error;
    // Info only: the client reports the error it finds in the result.
    log(0, "run " + std::to_string(runId) + " " + std::string(toString(state)) + ": " + error);
    emit(std::move(f));
  }

  // Ends every queued run (Aborted); a plan still being made is left to end on its own. Holds
  // and releases keep their places.
  void abortQueued(const std::string& reason) {
    std::deque<QueuedRun> kept;
    for (auto& q : queued) {
      if (q.kind == QueuedRun::Kind::Run) {
        finishUnstarted(q.runId, q.req, RunState::Aborted, reason);
      } else {
        kept.push_back(std::move(q));
      }
    }
    queued = std::move(kept);
  }

  // ---- The held world ------------------------------------------------------------------------

  // Holds `world` (matched by serial), or, when it is empty, the workers of the next run.
  void holdWorld(const std::vector<WorkerInfo>& world) {
    held = HeldWorld{};
    if (world.empty()) {
      assignRanks();
      for (auto& p : peers) welcome(p);
      publish();
      return;
    }
    held->fixed = true;
    for (const WorkerInfo& w : world) {
      const auto it = std::find_if(peers.begin(), peers.end(),
                                   [&](const Peer& p) { return p.info.serial == w.serial; });
      const bool twice = it != peers.end() &&
                         std::find(held->ids.begin(), held->ids.end(), it->id) != held->ids.end();
      if (twice && held->lost.empty()) {
        held->lost = w.name + " (pid " + std::to_string(w.pid) + ") is named twice in the world";
      } else if (it != peers.end() && !twice) {
        held->ids.push_back(it->id);
        held->workers.push_back(it->info);
      } else if (held->lost.empty()) {
        held->lost = "rank " + std::to_string(held->ids.size()) + " (" + w.name + ", pid " +
                     std::to_string(w.pid) + ") is no longer in the session";
      }
    }
    log(0, "world of " + std::to_string(held->ids.size()) +
               " ranks held; workers that join are spares until it is released");
    assignRanks();
    for (auto& p : peers) welcome(p);
    publish();
  }

  // The world the first run after an open hold is planned on: every worker now.
  void fixHeldWorld() {
    held->fixed = true;
    for (const auto& p : peers) {
      held->ids.push_back(p.id);
      held->workers.push_back(p.info);
    }
    log(0, "world of " + std::to_string(held->ids.size()) +
               " ranks held; workers that join are spares until it is released");
  }

  void releaseWorld() {
    if (!held) return;
    held.reset();
    std::vector<std::string> spares;
    for (const auto& p : peers)
      if (p.info.spare) spares.push_back(p.id);
    assignRanks();
    for (auto& p : peers) welcome(p);
    publish();
    std::string joined;
    for (const auto& id : spares) {
      const Peer* p = findPeer(id);
      joined +=
          (joined.empty() ? "" : ", ") + p->info.name + " rank " + std::to_string(p->info.rank);
    }
    log(0, "world released" + (joined.empty() ? std::string() : "; spares take part: " + joined));
  }

  // Why no run starts on the held world any more.
  std::string heldWorldBroken() const {
    return held->lost + "; the world is held, so no run starts until it is released";
  }

  // ---- Runs ----------------------------------------------------------------------------------

  void startRun(const QueuedRun& q, RunPlan p) {
    auto r = std::make_unique<ActiveRun>();
    r->runId = q.runId;
    r->epoch = r->runId;
    r->req = q.req;
    r->effective = std::move(p.run);
    r->cfg = std::move(p.cfg);
    r->cfg.runId = r->runId;
    r->cfg.epoch = r->epoch;
    r->ids = std::move(p.ids);
    r->n = static_cast<int>(r->ids.size());
    const auto n = static_cast<size_t>(r->n);
    r->ready.assign(n, false);
    r->done.assign(n, false);
    r->acked.assign(n, false);
    r->gone.assign(n, false);
    r->endpoints.assign(n, "");
    r->devices.assign(n, PeerDeviceInfo{});
    r->workerDropped.assign(n, 0);
    r->nextBatchSeq.assign(n, 0);
    r->iterNs.assign(r->req.iterations, std::vector<int64_t>(n, -1));
    r->iterWrong.assign(r->req.iterations, std::vector<uint64_t>(n, 0));
    // Progress reaches the coordinator with the heartbeats: a timeout shorter than two of
    // their intervals would take a healthy run for a stalled one.
    r->stall = StallWatch(std::max(r->req.stallTimeout, 2 * opt.heartbeat + kTick));
    r->seen.assign(n, RankSeen{});
    r->configSentAt.assign(n, Clock::now());
    run = std::move(r);
    ActiveRun& a = *run;

    // The plan was made from a snapshot: its workers must still be here. Workers that
    // joined since then sit this run out (rank -1).
    for (const auto& id : a.ids) {
      if (findPeer(id) == nullptr) {
        for (const auto& q : peers) a.workers.push_back(q.info);
        finishRun(RunState::Failed, held && !held->lost.empty()
                                        ? heldWorldBroken()
                                        : "a worker left while run " + std::to_string(a.runId) +
                                              " was being planned; submit it again");
        return;
      }
    }
    std::vector<Peer> ordered;
    for (const auto& id : a.ids) ordered.push_back(*findPeer(id));
    for (const auto& p : peers) {
      if (rankOf(p.id) < 0) ordered.push_back(p);
    }
    peers = std::move(ordered);
    for (size_t k = 0; k < peers.size(); ++k) {
      peers[k].info.rank = k < n ? static_cast<int>(k) : -1;
      peers[k].info.spare = k >= n;
      peers[k].progressKnown = false;
      if (k < n) a.workers.push_back(peers[k].info);
    }
    publish();
    emit(StateEvent{a.runId, RunState::Configuring,
                    "run " + std::to_string(a.runId) + ": " + a.cfg.algorithm + " " +
                        std::string(toString(a.cfg.collective)) + " on " + std::to_string(a.n) +
                        " ranks"});
    for (int k = 0; k < a.n; ++k) {
      welcome(peers[static_cast<size_t>(k)]);
      const Delivery d = sendMsg(a.ids[static_cast<size_t>(k)], a.cfg);
      if (d == Delivery::Sent) continue;
      // The ranks after k were never configured: there is nothing for them to abort.
      for (int j = k + 1; j < a.n; ++j) a.acked[static_cast<size_t>(j)] = true;
      failUndelivered(k, d);
      return;
    }
  }

  void onReady(const Ready& m, int r) {
    ActiveRun& a = *run;
    if (a.kind != FailKind::None) return;
    if (a.state == RunState::Running) {
      // A second Ready: this rank never got the Start (lost on the way); say it again.
      if (a.ready[static_cast<size_t>(r)]) {
        logLimited(1,
                   "rank " + std::to_string(r) + " is still waiting for Start; sending it again");
        sendMsg(a.ids[static_cast<size_t>(r)], startOf(a));
      }
      return;
    }
    if (m.dataEndpoint.empty()) {
      fail(FailKind::Protocol, r,
           "rank " + std::to_string(r) + " reported no data-plane endpoint in Ready");
      return;
    }
    a.ready[static_cast<size_t>(r)] = true;
    a.endpoints[static_cast<size_t>(r)] = m.dataEndpoint;
    a.devices[static_cast<size_t>(r)] = m.device;
    a.workers[static_cast<size_t>(r)].dataEndpoint = m.dataEndpoint;
    a.workers[static_cast<size_t>(r)].clockOffsetNs = m.clockOffsetNs;
    if (Peer* p = findPeer(a.ids[static_cast<size_t>(r)])) {
      p->info.dataEndpoint = m.dataEndpoint;
      p->info.clockOffsetNs = m.clockOffsetNs;
    }
    if (!std::all_of(a.ready.begin(), a.ready.end(), [](bool b) { return b; })) return;
    const Start s = startOf(a);
    for (int k = 0; k < a.n; ++k) {
      if (const Delivery d = sendMsg(a.ids[static_cast<size_t>(k)], s); d != Delivery::Sent) {
        failUndelivered(k, d);
        return;
      }
    }
    a.state = RunState::Running;
    publish();
    emit(StateEvent{a.runId, RunState::Running,
                    "run " + std::to_string(a.runId) + ": every rank is ready; started"});
  }

  // The Abort of a failing run, with its reason (ActiveRun::failText).
  static Abort abortOf(const ActiveRun& a) {
    Abort ab;
    ab.epoch = a.epoch;
    ab.runId = a.runId;
    ab.reason = a.failText;
    return ab;
  }

  static Start startOf(const ActiveRun& a) {
    Start s;
    s.epoch = a.epoch;
    s.runId = a.runId;
    s.endpoints = a.endpoints;
    // Only when some rank has device memory to share: a Start stays small otherwise.
    if (std::any_of(a.devices.begin(), a.devices.end(),
                    [](const PeerDeviceInfo& d) { return !d.id.empty(); })) {
      s.devices = a.devices;
    }
    return s;
  }

  // Records the iterations of `m` and hands the client an IterationEvent for each, queued
  // together: one wake-up of the client per message, not per iteration.
  void onIteration(const IterationResult& m, int r) {
    ActiveRun& a = *run;
    std::vector<CoordinatorEvent> out;
    out.reserve(m.count());
    for (size_t k = 0; k < m.count(); ++k) {
      const uint64_t wrong = k + 1 == m.count() ? m.wrong : 0;
      const auto iteration = static_cast<uint32_t>(m.iteration + k);
      if (recordIteration(r, iteration, m.timeOf(k), wrong)) {
        out.emplace_back(IterationEvent{a.runId, a.perRank.back()});
      }
    }
    a.iterationEventsDropped += out.size() - events->tryPushAll(out, 1);
  }

  // Records rank r's time in a timed iteration; false when it was known already or is not
  // an iteration of the run.
  bool recordIteration(int r, uint32_t iteration, uint64_t timeNs, uint64_t wrong) {
    ActiveRun& a = *run;
    if (iteration < a.iterNs.size() && a.iterNs[iteration][static_cast<size_t>(r)] >= 0) {
      return false;  // said again after a loss: already counted
    }
    if (iteration >= a.iterNs.size()) {
      logLimited(1, "rank " + std::to_string(r) + " reported iteration " +
                        std::to_string(iteration) + " of a run with " +
                        std::to_string(a.iterNs.size()) + " iterations; ignored");
      return false;
    }
    a.iterNs[iteration][static_cast<size_t>(r)] = static_cast<int64_t>(timeNs);
    a.iterWrong[iteration][static_cast<size_t>(r)] = wrong;
    a.perRank.push_back(RankIteration{r, iteration, static_cast<int64_t>(timeNs), wrong});
    return true;
  }

  void onTelemetry(TelemetryBatch& m, int r) {
    ActiveRun& a = *run;
    const auto k = static_cast<size_t>(r);
    if (m.seq != a.nextBatchSeq[k]) {
      logLimited(1, "rank " + std::to_string(r) + ": telemetry batch " + std::to_string(m.seq) +
                        " arrived, expected " + std::to_string(a.nextBatchSeq[k]));
    }
    a.nextBatchSeq[k] = m.seq + 1;
    a.workerDropped[k] = std::max(a.workerDropped[k], m.dropped);
    // Progress: the newest event that belongs to a step (IterationEnd carries no real step,
    // NCCL's events none of the lab's).
    // A worker ships telemetry late (at the end of a short run), so it only moves the
    // progress the heartbeats reported forward, never back.
    for (auto it = m.events.rbegin(); it != m.events.rend(); ++it) {
      if (it->kind == EventKind::IterationEnd || isNcclKind(it->kind)) continue;
      Peer* p = findPeer(a.ids[k]);
      const auto newer = [&] {
        return !p->progressKnown || it->iteration > p->iteration ||
               (it->iteration == p->iteration && it->step > p->step);
      };
      if (p != nullptr && newer()) {
        p->progressKnown = true;
        p->iteration = it->iteration;
        p->step = it->step;
      }
      break;
    }
    // The batch goes to the client, moved; nothing of it stays here.
    TelemetryCounts& t = a.telemetry;
    t.produced += m.events.size();
    const uint64_t forwarded = t.delivered + t.droppedSlowClient;
    const uint64_t room = a.req.maxEvents > forwarded ? a.req.maxEvents - forwarded : 0;
    if (m.events.size() > room) {
      t.droppedOverLimit += m.events.size() - room;
      m.events.resize(room);
    }
    const size_t n = m.events.size();
    if (n == 0) return;
    CoordinatorEvent ev = TelemetryBatchEvent{a.runId, r, std::move(m.events)};
    if (events->tryPush(ev, n)) {
      t.delivered += n;
    } else {
      t.droppedSlowClient += n;
    }
  }

  void onDone(const RunDone& m, int r) {
    ActiveRun& a = *run;
    const auto k = static_cast<size_t>(r);
    if (a.kind == FailKind::None) {
      // An iteration report lost on the way (a reset connection): the rank is asked for its
      // results again (heartbeatFor) instead of finishing the run with a hole in it.
      const bool missing = std::any_of(a.iterNs.begin(), a.iterNs.end(),
                                       [&](const std::vector<int64_t>& it) { return it[k] < 0; });
      a.seen[k].missingResults = missing;
      if (missing) return;
    }
    a.done[k] = true;
    a.acked[k] = true;
    a.workerDropped[k] = std::max(a.workerDropped[k], m.eventsDropped);
    if (a.kind != FailKind::None) return;
    if (std::all_of(a.done.begin(), a.done.end(), [](bool b) { return b; })) {
      finishRun(RunState::Done, "");
    }
  }

  void onFailed(const RunFailed& m, int r) {
    ActiveRun& a = *run;
    a.acked[static_cast<size_t>(r)] = true;
    if (a.kind == FailKind::None) {
      a.reported = m;
      fail(FailKind::Reported, r, m.message());
      return;
    }
    if (a.failedRank >= 0 && m.peer == a.failedRank && m.step >= 0 && !a.waitingPeer) {
      a.waitingPeer = m;
    }
  }

  // Starts winding the run down: Abort to every other rank, then acknowledgements.
  void fail(FailKind kind, int rank, const std::string& text) {
    ActiveRun& a = *run;
    if (a.kind != FailKind::None) return;
    a.kind = kind;
    a.failedRank = rank;
    a.failText = text;
    if (rank >= 0 && kind == FailKind::Unreachable) a.acked[static_cast<size_t>(rank)] = true;
    if (rank >= 0 && (kind == FailKind::Died || kind == FailKind::Silent)) {
      if (Peer* p = findPeer(a.ids[static_cast<size_t>(rank)]); p && p->progressKnown) {
        a.failProgressKnown = true;
        a.failIteration = p->iteration;
        a.failStep = p->step;
      }
      a.acked[static_cast<size_t>(rank)] = true;
    }
    a.ackDeadline = Clock::now() + kAckWait;
    const Abort ab = abortOf(a);
    for (int k = 0; k < a.n; ++k) {
      const auto u = static_cast<size_t>(k);
      if (k == rank && kind != FailKind::Reported && kind != FailKind::Protocol) continue;
      if (a.done[u] || a.gone[u] || a.acked[u]) continue;
      // A rank that cannot be told has nothing to acknowledge: the run ends without it.
      if (sendMsg(a.ids[u], ab) != Delivery::Sent) a.acked[u] = true;
    }
    log(kind == FailKind::Aborted ? 1 : 2, "run " + std::to_string(a.runId) + ": " + text);
  }

  // Completes a failing run once every live rank acknowledged the Abort, or time is up.
  void pollFailure() {
    if (!run) return;
    ActiveRun& a = *run;
    if (a.kind == FailKind::None) {
      const auto now = Clock::now();
      if (a.stall.expired(now)) fail(FailKind::Stalled, -1, stallText(a, now));
      return;
    }
    bool all = true;
    for (int k = 0; k < a.n; ++k) {
      const auto u = static_cast<size_t>(k);
      if (!a.acked[u] && !a.gone[u]) all = false;
    }
    if (!all && Clock::now() < a.ackDeadline) return;
    std::string error = a.failText;
    if (a.kind == FailKind::Died || a.kind == FailKind::Silent) {
      if (a.failProgressKnown) {
        error += " at step " + std::to_string(a.failStep) + " (iteration " +
                 std::to_string(a.failIteration) + ")";
      } else if (a.waitingPeer) {
        error += " at step " + std::to_string(a.waitingPeer->step) + " (rank " +
                 std::to_string(a.waitingPeer->rank) + " was waiting for its data";
        if (a.waitingPeer->iteration >= 0) {
          error += " in iteration " + std::to_string(a.waitingPeer->iteration);
        }
        error += ")";
      } else if (a.state == RunState::Configuring) {
        error += " before its first step (the run was still being configured)";
      } else {
        error += " before reporting any step";
      }
    }
    finishRun(a.kind == FailKind::Aborted ? RunState::Aborted : RunState::Failed, error);
  }

  // "no rank made progress for 20.3 s (stall timeout 20.0 s): rank 0 waits for data from
  // rank 1 for step 5 (iteration 2); rank 1 waits for Start; ..." from the ranks' heartbeats.
  static std::string stallText(const ActiveRun& a, Clock::time_point now) {
    std::string text = stallHeadline(a.stall.quietFor(now), a.stall.timeout());
    for (int k = 0; k < a.n; ++k) {
      const auto u = static_cast<size_t>(k);
      std::string what;
      if (a.done[u]) {
        what = "is done";
      } else if (!a.seen[u].inRun) {
        what = "has not shown that it received the run";
      } else {
        what = describe(a.seen[u].progress);
      }
      text += (k == 0 ? ": " : "; ") + std::string("rank ") + std::to_string(k) + " " + what;
    }
    return text;
  }

  // A run rank's heartbeat: its progress restarts the stall clock, and what it shows it
  // missed (a RunConfig, an Abort) is said again.
  void onRunHeartbeat(const Heartbeat& hb, int r) {
    ActiveRun& a = *run;
    RankSeen& s = a.seen[static_cast<size_t>(r)];
    const auto now = Clock::now();
    const bool inRun = hb.epoch == a.epoch;
    if (inRun) {
      if (!s.inRun || hb.progress != s.progress.ticks || hb.phase != s.progress.phase) {
        a.stall.progressed(now);
      }
      s.progress.ticks = hb.progress;
      s.progress.phase = hb.phase;
      s.progress.wait = hb.wait;
      s.progress.peer = hb.waitPeer;
      s.progress.step = hb.waitStep;
      s.progress.iteration = hb.iteration;
      s.reportedBeats = hb.phase == RunPhase::Reported ? s.reportedBeats + 1 : 0;
    }
    s.inRun = inRun;
    const auto u = static_cast<size_t>(r);
    if (now - s.lastResend < kResendAfter) return;
    if (a.kind == FailKind::None && !inRun && now - a.configSentAt[u] > kResendAfter) {
      s.lastResend = now;
      a.configSentAt[u] = now;
      logLimited(1, "rank " + std::to_string(r) + " shows no sign of run " +
                        std::to_string(a.runId) + "; sending its configuration again");
      sendMsg(a.ids[u], a.cfg);
    } else if (a.kind != FailKind::None && inRun && !a.acked[u] && !a.gone[u] &&
               hb.phase != RunPhase::Reported) {
      s.lastResend = now;
      sendMsg(a.ids[u], abortOf(a));
    }
  }

  // The heartbeat to one worker: in a run, it asks again for results the worker says it sent
  // (two heartbeats in a row, so that a result still on its way is not asked for).
  Heartbeat heartbeatFor(const Peer& p) const {
    Heartbeat hb;
    const int r = rankOf(p.id);
    if (!run || r < 0) return hb;
    const auto u = static_cast<size_t>(r);
    hb.epoch = run->epoch;
    hb.wantReport = run->kind == FailKind::None && !run->done[u] && run->seen[u].inRun &&
                    (run->seen[u].reportedBeats >= 2 || run->seen[u].missingResults);
    return hb;
  }

  // The result of the active run as it ends: times, checks and where the telemetry went.
  static RunResult resultOf(ActiveRun& a, RunState state, const std::string& error) {
    RunResult res;
    res.runId = a.runId;
    res.request = a.req;
    res.effective = a.effective;
    res.nranks = a.n;
    res.workers = a.workers;
    res.state = state;
    res.error = error;
    res.failedRank = state == RunState::Done ? -1 : a.failedRank;
    res.perRank = a.perRank;
    for (size_t i = 0; i < a.iterNs.size(); ++i) {
      const auto& ns = a.iterNs[i];
      if (ns.empty() || std::any_of(ns.begin(), ns.end(), [](int64_t t) { return t < 0; })) {
        continue;
      }
      res.iterationUs.push_back(static_cast<double>(*std::max_element(ns.begin(), ns.end())) / 1e3);
    }
    if (!res.iterationUs.empty()) {
      res.timeUs = std::accumulate(res.iterationUs.begin(), res.iterationUs.end(), 0.0) /
                   static_cast<double>(res.iterationUs.size());
    }
    if (!a.iterWrong.empty()) {
      const auto& last = a.iterWrong.back();
      res.wrong = std::accumulate(last.begin(), last.end(), uint64_t{0});
    }
    res.telemetry = a.telemetry;
    res.telemetry.droppedByRanks =
        std::accumulate(a.workerDropped.begin(), a.workerDropped.end(), uint64_t{0});
    res.telemetry.produced += res.telemetry.droppedByRanks;
    res.eventsDropped = res.telemetry.droppedByRanks + res.telemetry.droppedOverLimit +
                        res.telemetry.droppedSlowClient;
    res.iterationEventsDropped = a.iterationEventsDropped;
    return res;
  }

  void finishRun(RunState state, const std::string& error) {
    RunFinished f{resultOf(*run, state, error)};
    if (state == RunState::Done) log(0, "run " + std::to_string(run->runId) + " done");
    for (auto& p : peers) p.progressKnown = false;
    run.reset();
    // Workers that joined or left during the run get their ranks now.
    assignRanks();
    for (auto& p : peers) welcome(p);
    publish();
    emit(std::move(f));
  }

  // ---- Incoming messages ---------------------------------------------------------------------

  // The envelope of a message from the ROUTER (identity, header, body), read where ZeroMQ
  // holds it: a telemetry batch is not copied before it is decoded.
  static DecodeResult<Envelope> decodeFrames(const std::vector<zmq::message_t>& frames) {
    const auto view = [](const zmq::message_t& f) {
      return ByteView(static_cast<const uint8_t*>(f.data()), f.size());
    };
    if (frames.size() == 3) return decode(view(frames[1]), view(frames[2]));
    std::vector<Bytes> parts;
    for (size_t i = 1; i < frames.size(); ++i) {
      const ByteView v = view(frames[i]);
      parts.emplace_back(v.begin(), v.end());
    }
    return decode(std::span<const Bytes>(parts));  // the frame count error
  }

  void onMessage(std::vector<zmq::message_t>& frames) {
    if (frames.empty()) return;
    const std::string id(static_cast<const char*>(frames[0].data()), frames[0].size());
    Peer* peer = findPeer(id);
    if (peer) peer->lastSeen = Clock::now();
    auto env = decodeFrames(frames);
    // Named only when a line is logged: most messages are decoded and handled without one.
    const auto who = [&] {
      return peer ? "rank " + std::to_string(peer->info.rank) + " (" + peer->info.name + ")"
                  : "unknown sender " + printableId(id);
    };
    if (!env) {
      logLimited(
          1, "ignored a malformed control message from " + who() + ": " + env.error().message());
      return;
    }
    if (!sentByWorker(env->type())) {
      logLimited(1, "ignored " + std::string(typeName(env->type())) + " from " + who() +
                        " (only the coordinator sends it)");
      return;
    }
    if (auto* h = std::get_if<Hello>(&env->message)) {
      onHello(id, *h);
      return;
    }
    if (!peer) {
      if (auto removed = removedIds.find(id); removed != removedIds.end()) {
        // A dead local worker's last messages may arrive after it was reaped: not a speaker.
        if (!removed->second && unknownLogged.insert(id).second) {
          sendMsg(id, Shutdown{"this worker was removed from the session"});
          log(1, "worker " + printableId(id) +
                     " was removed from the session and spoke again; "
                     "told it to shut down");
        }
      } else if (unknownLogged.size() < 10000 && unknownLogged.insert(id).second) {
        logLimited(1, "ignored " + std::string(typeName(env->type())) + " from " + who() +
                          " that has not said Hello");
      }
      return;
    }
    if (auto* ping = std::get_if<Ping>(&env->message)) {
      const int64_t t1 = steadyNowNs();
      sendMsg(id, Pong::answering(*ping, t1, steadyNowNs()));
      return;
    }
    if (auto* hb = std::get_if<Heartbeat>(&env->message)) {
      if (hb->inRun) {
        peer->progressKnown = true;
        peer->iteration = hb->iteration;
        peer->step = hb->step;
      }
      if (const int r = rankOf(id); r >= 0) onRunHeartbeat(*hb, r);
      return;
    }
    if (auto* l = std::get_if<Log>(&env->message)) {
      // Rate-limited: log lines are control events, which the client's queue never drops.
      logLimited(l->level >= LogLevel::Warning ? (l->level == LogLevel::Error ? 2 : 1) : 0,
                 who() + ": " + l->text);
      return;
    }
    // Run-scoped messages: only the current run's epoch, only from its ranks.
    if (!run || env->epoch() != run->epoch) return;
    const int r = rankOf(id);
    if (r < 0) return;
    run->stall.progressed(Clock::now());
    std::visit(
        [&](auto& m) {
          using T = std::decay_t<decltype(m)>;
          if constexpr (requires { m.rank; }) {
            if (m.rank != r) {
              logLimited(1, who() + " sent " + std::string(typeName(T::kType)) + " for rank " +
                                std::to_string(m.rank) + "; ignored");
              return;
            }
          }
          if constexpr (std::is_same_v<T, Ready>) onReady(m, r);
          if constexpr (std::is_same_v<T, IterationResult>) onIteration(m, r);
          if constexpr (std::is_same_v<T, TelemetryBatch>) onTelemetry(m, r);
          if constexpr (std::is_same_v<T, RunDone>) onDone(m, r);
          if constexpr (std::is_same_v<T, RunFailed>) onFailed(m, r);
        },
        env->message);
  }

  void onHello(const std::string& id, const Hello& h) {
    if (findPeer(id)) {
      logLimited(1, "ignored a second Hello from " + printableId(id));
      return;
    }
    if (h.protocolVersion != kProtocolVersion) {
      sendMsg(id, Shutdown{"protocol version " + std::to_string(h.protocolVersion) +
                           " is not supported (the lab speaks " + std::to_string(kProtocolVersion) +
                           ")"});
      log(1,
          "refused worker " + h.name + ": protocol version " + std::to_string(h.protocolVersion));
      return;
    }
    if (peers.size() >= static_cast<size_t>(kMaxRanks)) {
      sendMsg(id, Shutdown{"the session is full (" + std::to_string(kMaxRanks) + " workers)"});
      log(1, "refused worker " + h.name + ": the session is full");
      return;
    }
    Peer p;
    p.id = id;
    p.info.serial = ++joinSeq;
    p.lastSeen = Clock::now();
    p.info.name = h.name;
    p.info.host = h.hostName;
    p.info.pid = h.pid;
    p.info.backend = h.backend;
    p.info.device = h.deviceIndex;
    p.info.pidNamespace = h.pidNamespace;
    auto c = children.find(h.pid);
    // By the spawn record, not the host name: a child started with another --host is ours.
    p.info.local = c != children.end() && !c->second.joined && spawnedHere(id);
    if (p.info.local) c->second.joined = true;
    peers.push_back(p);
    removedIds.erase(id);
    assignRanks();
    Peer* added = findPeer(id);
    welcome(*added);
    std::string waits = "; it gets a rank when the current run ends";
    if (held && held->fixed) {
      waits = "; a spare while the world of " + std::to_string(held->ids.size()) +
              " ranks is held: it gets a rank when that is released";
    }
    log(0, "worker " + h.name + " joined from " + h.hostName + " (pid " + std::to_string(h.pid) +
               (added->info.local ? ", local" : ", remote") + ")" +
               (added->info.rank >= 0 ? " as rank " + std::to_string(added->info.rank) : waits));
    if (added->info.local) --pendingLocal;
    // Published first: a client that sees the event finds the worker in workers().
    publish();
    emit(WorkerJoined{added->info});
  }

  // A local child's routing identity ends with ":p<our pid>" (from its --parent-pid), which a
  // worker on another machine with the same pid as a child does not carry.
  static bool spawnedHere(const std::string& id) {
    return id.ends_with(":p" + std::to_string(::getpid()));
  }

  // ---- Commands ------------------------------------------------------------------------------

  void processCommands() {
    std::deque<Command> cmds;
    {
      std::lock_guard<std::mutex> lock(mu);
      cmds.swap(commands);
    }
    for (auto& c : cmds) {
      if (c.kind != Command::Kind::Abort) {
        QueuedRun q;
        q.kind = c.kind == Command::Kind::Submit ? QueuedRun::Kind::Run
                 : c.kind == Command::Kind::Hold ? QueuedRun::Kind::Hold
                                                 : QueuedRun::Kind::Release;
        q.runId = c.runId;
        q.req = std::move(c.req);
        q.world = std::move(c.world);
        q.since = Clock::now();
        queued.push_back(std::move(q));
        continue;
      }
      const std::string reason = c.reason.empty() ? "aborted" : c.reason;
      if (run && run->kind == FailKind::None) fail(FailKind::Aborted, -1, reason);
      abortQueued(reason);
    }
  }

  // ---- The loop ------------------------------------------------------------------------------

  // Once the loop has ended: runs submitted since its last look end Failed, and later
  // submit() calls answer for themselves (threadDone).
  void finishLateCommands() {
    std::deque<Command> late;
    {
      std::lock_guard<std::mutex> lock(mu);
      threadDone = true;
      late.swap(commands);
    }
    for (auto& c : late) {
      if (c.kind == Command::Kind::Submit) {
        finishUnstarted(c.runId, c.req, RunState::Failed, "the coordinator has stopped");
      }
    }
  }

  void loop() {
    for (int k = 0; k < opt.localWorkers; ++k) spawnLocal(localDevice(opt, k));
    nextHeartbeat = Clock::now() + opt.heartbeat;
    while (!stopping.load()) {
      pollAndDrain(router, *wake, kTick, 1000, [&](std::vector<zmq::message_t>& frames) {
        onMessage(frames);
        return true;
      });
      processCommands();
      reapChildren();
      checkLiveness();
      pollFailure();
      advanceQueue();
    }
    shutdownAll();
  }

  void shutdownAll() {
    processCommands();  // submitted before the destructor: they end too
    if (run) {
      if (run->kind == FailKind::None)
        fail(FailKind::Aborted, -1, "the coordinator is shutting down");
      finishRun(RunState::Aborted, run->failText);
    }
    abortQueued("the coordinator is shutting down");
    for (const auto& p : peers) sendMsg(p.id, Shutdown{"the lab is closing"});
    // A child that has not joined yet (a replacement still starting) cannot be told to leave
    // and holds nothing: it goes at once instead of being waited for.
    for (auto it = children.begin(); it != children.end();) {
      if (it->second.joined) {
        ++it;
        continue;
      }
      if (!killAndReap(it->first, milliseconds(2000))) {
        std::fprintf(stderr, "allreduce-lab: local worker pid %lld could not be reaped\n",
                     static_cast<long long>(it->first));
      }
      it = children.erase(it);
    }
    const auto deadline = Clock::now() + kShutdownWait;
    while (!children.empty() && Clock::now() < deadline) {
      std::vector<int64_t> ended;
      for (auto& [pid, c] : children)
        if (tryReap(pid)) ended.push_back(pid);
      for (int64_t pid : ended) children.erase(pid);
      std::this_thread::sleep_for(milliseconds(5));
    }
    if (!children.empty()) {
      std::string list;
      for (auto& [pid, c] : children) list += (list.empty() ? "" : ", ") + std::to_string(pid);
      log(1, "killing local worker(s) that did not leave within " + seconds1(kShutdownWait) +
                 ": pid " + list);
    }
    for (auto& [pid, c] : children) {
      if (!killAndReap(pid, milliseconds(2000))) {
        std::fprintf(stderr, "allreduce-lab: local worker pid %lld could not be reaped\n",
                     static_cast<long long>(pid));
      }
    }
    children.clear();
    for (const auto& p : peers) {
      emit(WorkerLeft{p.info, {LeaveKind::Shutdown, 0, "the lab is closing"}, true});
    }
    peers.clear();
    publish();
  }

  // ---- Planning (the planning thread) --------------------------------------------------------

  // Checks a request against the ranks' hosts (in rank order) and builds the RunConfig; a bad
  // request comes back with `error` naming the parameter. Touches no worker.
  static RunPlan plan(const RunRequest& req, const std::vector<std::string>& hosts,
                      const std::vector<uint64_t>& namespaces, const std::vector<RankPlace>& places,
                      const std::vector<std::string>& ids) {
    RunPlan out;
    try {
      if (hosts.empty()) throw ConfigError("no workers have joined; start some or wait for them");
      out.run = resolveRunRequest(req, hosts);
      checkPlaces(req.algorithm, places);
      out.cfg = runConfig(req, out.run, hosts);
      out.cfg.pidNamespaces = namespaces;
      // Lending needs two ranks with device memory to share (the cuda backend's): without
      // them every rank keeps the data plane's one-way channels.
      const auto lenders = std::count_if(places.begin(), places.end(),
                                         [](const RankPlace& p) { return p.backend == "cuda"; });
      out.cfg.cudaIpc = req.cudaIpc && lenders >= 2;
      if (auto why = validate(Message(out.cfg))) throw ConfigError(*why);
      out.ids = ids;
    } catch (const std::exception& e) {  // ConfigError, or no memory for the schedule
      out.error = e.what();
    }
    return out;
  }

  static RunConfig runConfig(const RunRequest& req, const ResolvedRun& run,
                             const std::vector<std::string>& hosts) {
    const int n = run.nranks;
    const int rph = run.ranksPerHost;

    RunConfig c;
    c.runId = 1;
    c.epoch = 1;
    c.worldSize = n;
    c.algorithm = req.algorithm;
    c.collective = req.collective;
    c.dtype = req.dtype;
    c.op = req.op;
    c.count = req.count;
    c.sliceBytes = req.sliceBytes;
    c.root = req.root;
    c.ranksPerHost = static_cast<uint32_t>(rph);
    c.inflight = static_cast<uint32_t>(std::min<int64_t>(req.inflight, kMaxInflight + 1));
    c.inPlace = req.inPlace;
    c.warmup = static_cast<uint32_t>(std::min<int64_t>(req.warmup, kMaxIterations + 1));
    c.iterations = static_cast<uint32_t>(std::min<int64_t>(req.iterations, kMaxIterations + 1));
    c.check = req.check;
    c.telemetry = req.telemetry;
    c.ringOrder.assign(run.ringOrder.begin(), run.ringOrder.end());
    c.hosts = hosts;
    c.dataPlane = req.dataPlane;
    c.cudaIpc = req.cudaIpc;
    c.shaping = req.shaping;
    return c;
  }
};

// ---- Public API --------------------------------------------------------------------------------

Coordinator::Coordinator(CoordinatorOptions opt) : impl_(std::make_unique<Impl>()) {
  Impl& I = *impl_;
  if (opt.localWorkers < 0) {
    throw ConfigError("local workers must not be negative (got " +
                      std::to_string(opt.localWorkers) + ")");
  }
  if (opt.expectRemote < 0) {
    throw ConfigError("expected remote workers must not be negative (got " +
                      std::to_string(opt.expectRemote) + ")");
  }
  if (opt.localWorkers + opt.expectRemote > kMaxRanks) {
    throw ConfigError("at most " + std::to_string(kMaxRanks) + " workers (asked for " +
                      std::to_string(opt.localWorkers + opt.expectRemote) + ")");
  }
  if (opt.heartbeat.count() < 1 ||
      opt.heartbeat.count() > static_cast<int64_t>(kMaxHeartbeatIntervalMs)) {
    throw ConfigError("heartbeat must be in 1.." + std::to_string(kMaxHeartbeatIntervalMs) + " ms");
  }
  if (opt.missedHeartbeats < 1 || opt.missedHeartbeats > static_cast<int>(kMaxHeartbeatLiveness)) {
    throw ConfigError("missed heartbeats must be in 1.." + std::to_string(kMaxHeartbeatLiveness));
  }
  requireBackend(opt.backend);
  if (opt.localWorkers > 0) {
    I.workerBinary = findWorkerBinary(opt.workerBinary);
    if (I.workerBinary.empty()) {
      throw ConfigError(opt.workerBinary.empty()
                            ? "allreduce-worker not found next to " + selfExeDir() +
                                  " (looked in ../workers/ and ./); set the worker binary"
                            : "worker binary '" + opt.workerBinary + "' is not an executable file");
    }
  }
  I.opt = std::move(opt);
  I.events = std::make_unique<EventQueue>(I.opt.eventQueueCapacity, I.opt.onEventsReady);

  const std::string listen = I.opt.listen.empty() ? "tcp://127.0.0.1:*" : I.opt.listen;
  I.router = zmq::socket_t(I.ctx, zmq::socket_type::router);
  I.router.set(zmq::sockopt::router_mandatory, 1);
  // A worker whose connection was reset reconnects with the same identity, possibly before
  // this side has seen the old connection die: the new connection takes the identity over.
  I.router.set(zmq::sockopt::router_handover, 1);
  I.router.set(zmq::sockopt::linger, 0);
  I.router.set(zmq::sockopt::rcvhwm, 0);  // telemetry is lossless: never drop incoming
  try {
    I.router.bind(listen);
  } catch (const zmq::error_t& e) {
    throw ConfigError("cannot bind the control endpoint " + listen + ": " + e.what());
  }
  I.boundEndpoint = I.router.get(zmq::sockopt::last_endpoint);
  if (I.boundEndpoint.rfind("tcp://", 0) == 0) {
    auto [host, port] = splitTcp(I.boundEndpoint);
    const bool wild = isWildcard(host);
    I.localEndpoint = wild ? "tcp://127.0.0.1:" + port : I.boundEndpoint;
    std::string shown = host;
    if (wild) {
      shown = hostAddress();
      if (shown.empty()) shown = hostName();
    }
    I.joinCmd = "allreduce-worker --connect tcp://" + shown + ":" + port;
  } else {
    I.localEndpoint = I.boundEndpoint;
    I.joinCmd = "allreduce-worker --connect " + I.boundEndpoint;
  }
  // The thread owns the socket from here on (a thread start is a full memory barrier).
  I.thread = std::thread([&I] {
    try {
      I.loop();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "allreduce-lab: coordinator thread failed: %s\n", e.what());
      I.shutdownAll();
    }
    I.finishLateCommands();
  });
}

Coordinator::~Coordinator() {
  impl_->stopping.store(true);
  impl_->wake->raise();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->router.close();
}

std::string Coordinator::endpoint() const { return impl_->boundEndpoint; }
std::string Coordinator::joinCommand() const { return impl_->joinCmd; }

std::vector<WorkerInfo> Coordinator::workers() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->snapshot;
}

uint64_t Coordinator::submit(RunRequest req) {
  Impl& I = *impl_;
  const uint64_t id = I.nextRunId.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(I.mu);
    if (!I.threadDone) {
      Command c;
      c.kind = Command::Kind::Submit;
      c.runId = id;
      c.req = std::move(req);
      I.commands.push_back(std::move(c));
      I.wake->raise();
      return id;
    }
  }
  RunFinished f;
  f.result.runId = id;
  f.result.request = std::move(req);
  f.result.state = RunState::Failed;
  f.result.error = "the coordinator has stopped";
  I.events->push(std::move(f));
  return id;
}

void Coordinator::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Command c;
  c.kind = Command::Kind::Abort;
  c.reason = reason;
  impl_->commands.push_back(std::move(c));
  impl_->wake->raise();
}

void Coordinator::holdWorld(std::vector<WorkerInfo> world) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Command c;
  c.kind = Command::Kind::Hold;
  c.world = std::move(world);
  impl_->commands.push_back(std::move(c));
  impl_->wake->raise();
}

void Coordinator::releaseWorld() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Command c;
  c.kind = Command::Kind::Release;
  impl_->commands.push_back(std::move(c));
  impl_->wake->raise();
}

size_t Coordinator::takeEvents(std::vector<CoordinatorEvent>& out, std::chrono::milliseconds wait,
                               size_t max) {
  return impl_->events->take(out, wait, max);
}

RunResult Coordinator::run(const RunRequest& req,
                           const std::function<void(CoordinatorEvent&)>& onEvent) {
  const uint64_t id = submit(req);
  TelemetryCollector telemetry;
  std::vector<CoordinatorEvent> evs;
  for (;;) {
    evs.clear();
    takeEvents(evs, std::chrono::milliseconds(100));
    for (auto& ev : evs) {
      if (auto* t = std::get_if<TelemetryBatchEvent>(&ev); t && t->runId == id) {
        telemetry.add(*t);
      } else if (auto* f = std::get_if<RunFinished>(&ev); f && f->result.runId == id) {
        RunResult res = std::move(f->result);
        res.events = telemetry.take();
        return res;
      } else if (onEvent) {
        onEvent(ev);
      }
    }
  }
}

void sortByTime(std::vector<TelemetryEvent>& events) {
  std::stable_sort(events.begin(), events.end(),
                   [](const TelemetryEvent& x, const TelemetryEvent& y) { return x.tNs < y.tNs; });
}

void TelemetryCollector::add(int rank, std::vector<TelemetryEvent>&& events) {
  ARL_ENFORCE(rank >= 0 && rank < kMaxRanks, "telemetry of rank " << rank);
  if (events.empty()) return;
  const auto r = static_cast<size_t>(rank);
  if (batches_.size() <= r) batches_.resize(r + 1);
  size_ += events.size();
  batches_[r].push_back(std::move(events));
}

namespace {

bool inTimeOrder(const std::vector<std::vector<TelemetryEvent>>& batches) {
  int64_t last = std::numeric_limits<int64_t>::min();
  for (const auto& b : batches) {
    for (const TelemetryEvent& e : b) {
      if (e.tNs < last) return false;
      last = e.tNs;
    }
  }
  return true;
}

// One rank's events as one run in time order: its batches as they are when they already
// are in order, else concatenated and sorted.
void orderRank(std::vector<std::vector<TelemetryEvent>>& batches) {
  if (inTimeOrder(batches)) return;
  std::vector<TelemetryEvent> all;
  for (auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  sortByTime(all);
  batches.clear();
  batches.push_back(std::move(all));
}

}  // namespace

std::vector<TelemetryEvent> TelemetryCollector::take() {
  // A cursor per rank with events: (rank, batch, position). The heap's top is the cursor
  // whose next event is the earliest, the lower rank on a tie.
  struct Cursor {
    size_t rank = 0;
    size_t batch = 0;
    size_t pos = 0;
  };
  std::vector<Cursor> heap;
  for (size_t r = 0; r < batches_.size(); ++r) {
    if (batches_[r].empty()) continue;
    orderRank(batches_[r]);
    heap.push_back({r, 0, 0});
  }
  const auto at = [&](const Cursor& c) -> const TelemetryEvent& {
    return batches_[c.rank][c.batch][c.pos];
  };
  const auto later = [&](const Cursor& a, const Cursor& b) {
    const int64_t ta = at(a).tNs;
    const int64_t tb = at(b).tNs;
    return ta != tb ? ta > tb : a.rank > b.rank;
  };
  std::make_heap(heap.begin(), heap.end(), later);
  std::vector<TelemetryEvent> out;
  out.reserve(size_);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Cursor& c = heap.back();
    const auto& rankBatches = batches_[c.rank];
    // Take this rank's events while they are no later than the next rank's earliest.
    const bool alone = heap.size() == 1;
    const int64_t bound = alone ? std::numeric_limits<int64_t>::max() : at(heap.front()).tNs;
    const size_t boundRank = alone ? 0 : heap.front().rank;
    for (;;) {
      const TelemetryEvent& e = at(c);
      if (!alone && (e.tNs > bound || (e.tNs == bound && c.rank > boundRank))) break;
      out.push_back(e);
      if (++c.pos == rankBatches[c.batch].size()) {
        c.pos = 0;
        if (++c.batch == rankBatches.size()) break;
      }
    }
    if (c.batch == rankBatches.size()) {
      heap.pop_back();
    } else {
      std::push_heap(heap.begin(), heap.end(), later);
    }
  }
  batches_.clear();
  size_ = 0;
  return out;
}

}  // namespace arl
