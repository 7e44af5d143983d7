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
// One run's state machine lives in active_run.h, its planning in run_plan.h; this file keeps
// the socket, the membership (peers, ranks, the held world, local children, liveness) and the
// queue of submitted runs.
#include "runtime/coordinator.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>
#include <zmq_addon.hpp>

#include "backend/registry.h"
#include "base/endpoint.h"
#include "base/errors.h"
#include "base/limits.h"
#include "control_poll.h"
#include "runtime/coordinator_impl.h"
#include "runtime/mpi_launch.h"
#include "runtime/telemetry_collector.h"

namespace arl {

namespace coord {

// "1.0 s": a silence or a wait, for a log line or an error.
std::string secondsText(Clock::duration d) {
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

}  // namespace coord

namespace {

using coord::Clock;
using coord::Command;
using coord::kShutdownWait;
using coord::kTick;
using coord::Peer;
using coord::printableId;
using coord::secondsText;
using std::chrono::milliseconds;

}  // namespace

// For lines a remote party can provoke at will: at most 20 per second.
void Coordinator::Impl::logLimited(int level, const std::string& text) {
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

// With ROUTER_MANDATORY, a message to a worker whose connection is gone (its process
// ended: the kernel closed the socket) fails at once with EHOSTUNREACH. The worker is not
// removed for that: a reset connection comes back by itself (the DEALER reconnects with its
// identity), and liveness removes a worker that stays silent.
Delivery Coordinator::Impl::sendFrames(const std::string& id, const Frames& f) {
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
    const Peer* p = findPeer(id);
    const auto now = Clock::now();
    const auto [since, first] = unreachable.try_emplace(id, now);
    // Found closed only just now: a reset connection that its DEALER is connecting again
    // (ZeroMQ's reconnect interval, 100 ms), or a worker that died. The grace tells them apart
    // long before liveness would, and no longer than liveness allows.
    const bool reconnecting =
        e.num() == EHOSTUNREACH && p != nullptr &&
        now - since->second <
            std::min<Clock::duration>(coord::kReconnectGrace, opt.heartbeat * opt.missedHeartbeats);
    if (first) {
      logLimited(1, "cannot send to worker " + (p ? p->info.name : printableId(id)) + ": " +
                        e.what() +
                        (e.num() != EHOSTUNREACH ? ""
                         : reconnecting
                             ? " (its control connection is closed; waiting up to " +
                                   secondsText(coord::kReconnectGrace) + " for it to connect again)"
                             : " (its control connection is closed)"));
    }
    return reconnecting ? Delivery::Reconnecting : Delivery::Unreachable;
  }
}

Peer* Coordinator::Impl::findPeer(const std::string& id) {
  for (auto& p : peers)
    if (p.id == id) return &p;
  return nullptr;
}

// Moves the first queued run on: it waits while local workers are still starting (at most
// joinTimeout; not when the world is held: newcomers are spares), then is planned on another
// thread, then starts. One run at a time. Holds and releases take effect between runs.
void Coordinator::Impl::advanceQueue() {
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
    std::vector<PlannedRank> ranks;
    const auto place = [&](const std::string& id, const WorkerInfo& w) {
      ranks.push_back({id, w.host, w.pidNamespace, w.dataKey, {w.host, w.backend, w.device}});
    };
    if (held && held->fixed) {
      for (size_t k = 0; k < held->ids.size(); ++k) place(held->ids[k], held->workers[k]);
    } else {
      for (const auto& p : peers) place(p.id, p.info);
    }
    q.plan = PlanJob::start(q.req, std::move(ranks), [wakeup = wake] { wakeup->raise(); });
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
void Coordinator::Impl::finishUnstarted(uint64_t runId, const RunRequest& req, RunState state,
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
void Coordinator::Impl::abortQueued(const std::string& reason) {
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

void Coordinator::Impl::startRun(const QueuedRun& q, RunPlan p) {
  // Progress reaches the coordinator with the heartbeats: a timeout shorter than two of
  // their intervals would take a healthy run for a stalled one.
  const auto stallTimeout = std::max(q.req.stallTimeout, 2 * opt.heartbeat + kTick);
  // The plan was made from a snapshot: its workers must still be here.
  const bool whole = std::all_of(p.ids.begin(), p.ids.end(),
                                 [&](const std::string& id) { return findPeer(id) != nullptr; });
  if (!whole) {
    std::vector<WorkerInfo> now;
    for (const auto& peer : peers) now.push_back(peer.info);
    run = std::make_unique<ActiveRun>(q.runId, q.req, std::move(p), std::move(now), stallTimeout,
                                      *this, *events);
    run->end(RunState::Failed, held && !held->lost.empty()
                                   ? heldWorldBroken()
                                   : "a worker left while run " + std::to_string(q.runId) +
                                         " was being planned; submit it again");
    finishRun();
    return;
  }
  // The run's ranks first, in their order; workers that joined since the plan sit this run
  // out (rank -1).
  std::vector<Peer> ordered;
  for (const auto& id : p.ids) ordered.push_back(*findPeer(id));
  for (const auto& peer : peers) {
    if (std::find(p.ids.begin(), p.ids.end(), peer.id) == p.ids.end()) ordered.push_back(peer);
  }
  peers = std::move(ordered);
  const size_t n = p.ids.size();
  std::vector<WorkerInfo> workers;
  for (size_t k = 0; k < peers.size(); ++k) {
    peers[k].info.rank = k < n ? static_cast<int>(k) : -1;
    peers[k].info.spare = k >= n;
    if (k < n) workers.push_back(peers[k].info);
  }
  run = std::make_unique<ActiveRun>(q.runId, q.req, std::move(p), std::move(workers), stallTimeout,
                                    *this, *events);
  publish();
  for (size_t k = 0; k < n; ++k) welcome(peers[k]);
  run->configure();
}

// Delivers the result of the run that ended (ActiveRun::ended()).
void Coordinator::Impl::finishRun() {
  RunFinished f{run->result()};
  run.reset();
  // Workers that joined or left during the run get their ranks now.
  assignRanks();
  for (auto& p : peers) welcome(p);
  publish();
  emit(std::move(f));
}

// A run that ended with the last message or tick is delivered at once.
void Coordinator::Impl::finishEndedRun() {
  if (run && run->ended()) finishRun();
}

// The envelope of a message from the ROUTER (identity, header, body), read where ZeroMQ
// holds it: a telemetry batch is not copied before it is decoded.
DecodeResult<Envelope> Coordinator::Impl::decodeFrames(const std::vector<zmq::message_t>& frames) {
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

// A worker of another protocol version is told so in its own version (protocol.h says what
// never changes between versions), once, and never admitted: it reads the reason and exits
// instead of waiting for a Welcome it could not read.
void Coordinator::Impl::refuseOtherVersion(const std::string& id, const zmq::message_t& header) {
  if (unknownLogged.size() >= 10000 || !unknownLogged.insert(id).second) return;
  const auto version =
      headerVersion(ByteView(static_cast<const uint8_t*>(header.data()), header.size()));
  if (!version) return;
  const std::string line = versionMismatch(*version, "this worker");
  sendFrames(id, shutdownInVersion(*version, line));
  log(1, "refused worker " + printableId(id) + ": " + versionMismatch(*version, "it"));
}

// The fingerprint the ZAP handler gave the sender's key (its "User-Id"); "" in the clear.
std::string Coordinator::Impl::userId(zmq::message_t& frame) {
  const char* v = zmq_msg_gets(frame.handle(), "User-Id");
  return v != nullptr ? std::string(v) : std::string();
}

void Coordinator::Impl::onMessage(std::vector<zmq::message_t>& frames) {
  if (frames.empty()) return;
  const std::string id(static_cast<const char*>(frames[0].data()), frames[0].size());
  Peer* peer = findPeer(id);
  if (peer) {
    peer->lastSeen = Clock::now();
    unreachable.erase(id);  // it is connected again
    if (!peer->info.proven &&
        peer->lastSeen - peer->joinedAt >= opt.heartbeat * opt.missedHeartbeats) {
      peer->info.proven = true;
      publish();
    }
  }
  auto env = decodeFrames(frames);
  // Named only when a line is logged: most messages are decoded and handled without one.
  const auto who = [&] {
    return peer ? "rank " + std::to_string(peer->info.rank) + " (" + peer->info.name + ")"
                : "unknown sender " + printableId(id);
  };
  if (!env) {
    if (env.error().code == DecodeErrc::UnsupportedVersion && !peer && frames.size() == 3) {
      refuseOtherVersion(id, frames[1]);
      return;
    }
    logLimited(1,
               "ignored a malformed control message from " + who() + ": " + env.error().message());
    return;
  }
  if (!sentByWorker(env->type())) {
    logLimited(1, "ignored " + std::string(typeName(env->type())) + " from " + who() +
                      " (only the coordinator sends it)");
    return;
  }
  if (auto* h = std::get_if<Hello>(&env->message)) {
    onHello(id, *h, userId(frames[1]));
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
    if (const int r = rankOf(id); r >= 0) run->onHeartbeat(*hb, r);
    return;
  }
  if (auto* l = std::get_if<Log>(&env->message)) {
    // Rate-limited: log lines are control events, which the client's queue never drops.
    logLimited(l->level >= LogLevel::Warning ? (l->level == LogLevel::Error ? 2 : 1) : 0,
               who() + ": " + l->text);
    return;
  }
  // Run-scoped messages: only the current run's epoch, only from its ranks.
  if (!run || env->epoch() != run->epoch()) return;
  const int r = rankOf(id);
  if (r < 0) return;
  run->progressed();
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
        if constexpr (std::is_same_v<T, Ready>) onReady(m, r, *peer);
        if constexpr (std::is_same_v<T, IterationResult>) run->onIteration(m, r);
        if constexpr (std::is_same_v<T, TelemetryBatch>) run->onTelemetry(m, r);
        if constexpr (std::is_same_v<T, RunDone>) run->onDone(m, r);
        if constexpr (std::is_same_v<T, RunFailed>) run->onFailed(m, r);
        if constexpr (std::is_same_v<T, FlightRecord>) run->onFlightRecord(m, r);
        if constexpr (std::is_same_v<T, StoreSet>) run->onStoreSet(m, r);
        if constexpr (std::is_same_v<T, StoreGet>) sendMsg(id, run->onStoreGet(m));
      },
      env->message);
  finishEndedRun();
}

// A Ready names the worker's data-plane endpoint and clock offset for workers() too.
void Coordinator::Impl::onReady(const Ready& m, int r, Peer& peer) {
  const RunState before = run->state();
  run->onReady(m, r);
  const WorkerInfo& w = run->worker(r);
  peer.info.dataEndpoint = w.dataEndpoint;
  peer.info.clockOffsetNs = w.clockOffsetNs;
  if (run->state() != before) publish();
}

void Coordinator::Impl::processCommands() {
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
    if (ActiveRun* a = healthyRun()) a->fail(FailKind::Aborted, -1, reason);
    abortQueued(reason);
  }
}

// Once the loop has ended: runs submitted since its last look end Failed, and later
// submit() calls answer for themselves (threadDone).
void Coordinator::Impl::finishLateCommands() {
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

void Coordinator::Impl::loop() {
  if (opt.backend == "mpi" && opt.localWorkers > 0) {
    spawnMpiSet();
  } else {
    for (int k = 0; k < opt.localWorkers; ++k) spawnLocal(localDevice(opt.localDevices, k));
  }
  startLaunchers();
  nextHeartbeat = Clock::now() + opt.heartbeat;
  while (!stopping.load()) {
    pollAndDrain(router, *wake, kTick, 1000, [&](std::vector<zmq::message_t>& frames) {
      onMessage(frames);
      return true;
    });
    processCommands();
    logRefusals();
    reapChildren();
    checkLiveness();
    if (run) run->poll();
    finishEndedRun();
    advanceQueue();
  }
  shutdownAll();
}

void Coordinator::Impl::shutdownAll() {
  processCommands();  // submitted before the destructor: they end too
  if (run) {
    if (!run->failing()) run->fail(FailKind::Aborted, -1, "the coordinator is shutting down");
    run->end(RunState::Aborted, run->failText());
    finishRun();
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
    log(1, "killing local worker(s) that did not leave within " + secondsText(kShutdownWait) +
               ": pid " + list);
  }
  for (auto& [pid, c] : children) {
    if (!killAndReap(pid, milliseconds(2000))) {
      std::fprintf(stderr, "allreduce-lab: local worker pid %lld could not be reaped\n",
                   static_cast<long long>(pid));
    }
  }
  children.clear();
  shutdownMpiSet();
  shutdownLaunchers();
  for (const auto& p : peers) {
    emit(WorkerLeft{p.info, {LeaveKind::Shutdown, 0, "the lab is closing"}, true});
  }
  peers.clear();
  publish();
}

// ---- Public API --------------------------------------------------------------------------------

Coordinator::Coordinator(CoordinatorOptions opt) : impl_(std::make_unique<Impl>()) {
  Impl& impl = *impl_;
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
  if (opt.localWorkers > 0 || opt.launch) {
    impl.workerBinary = findWorkerBinary(opt.workerBinary);
    if (impl.workerBinary.empty()) {
      throw ConfigError(opt.workerBinary.empty()
                            ? "allreduce-worker not found next to " + selfExeDir() +
                                  " (looked in ../workers/ and ./); set the worker binary"
                            : "worker binary '" + opt.workerBinary + "' is not an executable file");
    }
  }
  if (opt.backend == "mpi" && opt.localWorkers > 0) {
    impl.mpirun = findMpirun();
    if (impl.mpirun.empty()) {
      throw ConfigError(
          "backend mpi: mpirun is not on PATH; local workers of backend mpi run under Open "
          "MPI's mpirun (install openmpi-bin)");
    }
  }
  impl.opt = std::move(opt);
  impl.events = std::make_unique<EventQueue>(impl.opt.eventQueueCapacity, impl.opt.onEventsReady);

  const std::string listen = impl.opt.listen.empty() ? "tcp://127.0.0.1:*" : impl.opt.listen;
  impl.router = zmq::socket_t(impl.ctx, zmq::socket_type::router);
  impl.router.set(zmq::sockopt::router_mandatory, 1);
  // A worker whose connection was reset reconnects with the same identity, possibly before
  // this side has seen the old connection die: the new connection takes the identity over.
  impl.router.set(zmq::sockopt::router_handover, 1);
  impl.router.set(zmq::sockopt::linger, 0);
  impl.router.set(zmq::sockopt::maxmsgsize, kMaxControlMessageBytes);
  impl.router.set(zmq::sockopt::rcvhwm, 0);  // telemetry is lossless: never drop incoming
  impl.secure(listen);
  try {
    impl.router.bind(listen);
  } catch (const zmq::error_t& e) {
    throw ConfigError("cannot bind the control endpoint " + listen + ": " + e.what());
  }
  impl.boundEndpoint = impl.router.get(zmq::sockopt::last_endpoint);
  if (const auto tcp = splitTcp(impl.boundEndpoint)) {
    const bool wild = isWildcardHost(tcp->host);
    impl.localEndpoint = wild ? "tcp://127.0.0.1:" + tcp->port : impl.boundEndpoint;
    std::string shown = tcp->host;
    if (wild) {
      shown = hostAddress();
      if (shown.empty()) shown = hostName();
    }
    impl.remoteEndpoint = "tcp://" + shown + ":" + tcp->port;
    impl.joinCmd = "allreduce-worker --connect " + impl.remoteEndpoint;
  } else {
    impl.localEndpoint = impl.boundEndpoint;
    impl.remoteEndpoint = impl.boundEndpoint;
    impl.joinCmd = "allreduce-worker --connect " + impl.boundEndpoint;
  }
  // Quoted: Z85 has characters a shell reads (& < > $ ...), but no single quote.
  if (impl.security.curve) impl.joinCmd += " --server-key '" + impl.security.serverKey + "'";
  impl.planLaunchers();
  // Workers of backend mpi share one MPI world: one mpirun starts them all, on the hosts the
  // user names (Open MPI's --host list).
  if (impl.opt.backend == "mpi") {
    impl.joinCmd = "mpirun -np " + std::to_string(std::max(impl.opt.expectRemote, 1)) +
                   " --host HOST1,HOST2,... " + impl.joinCmd + " --backend mpi";
  }
  // The thread owns the socket from here on (a thread start is a full memory barrier).
  impl.thread = std::thread([&impl] {
    try {
      impl.loop();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "allreduce-lab: coordinator thread failed: %s\n", e.what());
      impl.shutdownAll();
    }
    impl.finishLateCommands();
  });
}

Coordinator::~Coordinator() {
  impl_->stopping.store(true);
  impl_->wake->raise();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->handshakes.reset();  // it stops monitoring `router`, which must still be open
  impl_->router.close();
}

std::string Coordinator::endpoint() const { return impl_->boundEndpoint; }
std::string Coordinator::joinCommand() const { return impl_->joinCmd; }
std::vector<std::string> Coordinator::launchCommands() const {
  std::vector<std::string> lines;
  for (const auto& argv : impl_->launchArgv) lines.push_back(shellLine(argv));
  return lines;
}
ControlSecurityState Coordinator::security() const { return impl_->security; }

std::vector<WorkerInfo> Coordinator::workers() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->snapshot;
}

uint64_t Coordinator::submit(RunRequest req) {
  Impl& impl = *impl_;
  const uint64_t id = impl.nextRunId.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(impl.mu);
    if (!impl.threadDone) {
      Command c;
      c.kind = Command::Kind::Submit;
      c.runId = id;
      c.req = std::move(req);
      impl.commands.push_back(std::move(c));
      impl.wake->raise();
      return id;
    }
  }
  RunFinished f;
  f.result.runId = id;
  f.result.request = std::move(req);
  f.result.state = RunState::Failed;
  f.result.error = "the coordinator has stopped";
  impl.events->push(std::move(f));
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

}  // namespace arl
