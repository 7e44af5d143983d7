// The coordinator's workers (coordinator_impl.h): ranks in join order grouped by host, the
// held world, local children started and reaped, joins, and liveness.
#include <unistd.h>

#include <algorithm>
#include <tuple>
#include <utility>

#include "base/limits.h"
#include "runtime/coordinator_impl.h"
#include "transport/shm/shm_transport.h"

namespace arl {

namespace coord {

LeaveReason leaveReason(const ExitStatus& st) {
  return {st.signaled ? LeaveKind::Killed : LeaveKind::Exited, st.signaled ? st.signal : st.code,
          st.describe()};
}

}  // namespace coord

namespace {

using coord::Clock;
using coord::Command;
using coord::leaveReason;
using coord::Peer;
using coord::printableId;
using coord::secondsText;
using std::chrono::milliseconds;

}  // namespace

// Ranks in join order, or a launcher's (WorkerInfo::launchRank), grouped by host (this
// machine first, then the others in the order they first joined or were placed), so that the ranks
// of one host are contiguous: what hierarchical schedules and the ring expect. During a run the
// ranks of its participants stay as they are, and workers that join meanwhile get rank -1 until it
// ends; while the world is held, its members keep their ranks and every other worker is a spare
// until the release.
void Coordinator::Impl::assignRanks() {
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
  // This machine first (its local workers), then the other hosts as they joined, or for
  // workers a launcher placed, in its order: join order races, the launch's ranks do not.
  const auto placedOrder = [](const WorkerInfo& w) {
    return std::make_tuple(w.launchRank >= 0, w.launchRank, w.serial);
  };
  std::vector<std::string> hostOrder = {hostName()};
  std::vector<Peer*> byJoin;
  for (auto& p : peers) byJoin.push_back(&p);
  std::sort(byJoin.begin(), byJoin.end(), [&](const Peer* a, const Peer* b) {
    return placedOrder(a->info) < placedOrder(b->info);
  });
  for (const Peer* p : byJoin) {
    if (std::find(hostOrder.begin(), hostOrder.end(), p->info.host) == hostOrder.end()) {
      hostOrder.push_back(p->info.host);
    }
  }
  auto hostIndex = [&](const std::string& h) {
    return std::find(hostOrder.begin(), hostOrder.end(), h) - hostOrder.begin();
  };
  // Inside a host, placed workers by their rank on it.
  const auto inHost = [](const WorkerInfo& w) {
    return std::make_tuple(w.launchRank >= 0, w.launchLocalRank, w.launchRank, w.serial);
  };
  std::stable_sort(peers.begin(), peers.end(), [&](const Peer& a, const Peer& b) {
    const auto ha = hostIndex(a.info.host), hb = hostIndex(b.info.host);
    return ha != hb ? ha < hb : inHost(a.info) < inHost(b.info);
  });
  for (size_t r = 0; r < peers.size(); ++r) {
    peers[r].info.rank = static_cast<int>(r);
    peers[r].info.spare = false;
  }
}

// The held world's members first, in their ranks (a member that left leaves its rank
// empty), then the spares in join order.
void Coordinator::Impl::rankHeldWorld() {
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
int Coordinator::Impl::worldSize() const {
  if (run) return run->size();
  if (held && held->fixed) return static_cast<int>(held->ids.size());
  return static_cast<int>(peers.size());
}

// Publishes the worker list for API threads.
void Coordinator::Impl::publish() {
  std::vector<WorkerInfo> infos;
  for (const auto& p : peers) infos.push_back(p.info);
  std::lock_guard<std::mutex> lock(mu);
  snapshot = std::move(infos);
}

void Coordinator::Impl::welcome(Peer& p) {
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

// Starts one local worker on `device` (-1: none); a run waits for it to join (pendingLocal).
void Coordinator::Impl::spawnLocal(int device) {
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
  const auto keyed = keyArgs();
  argv.insert(argv.end(), keyed.begin(), keyed.end());
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
void Coordinator::Impl::removePeer(const std::string& id, LeaveReason why, bool respawn) {
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
    if (r >= 0) run->rankGone(r);
  }
  unreachable.erase(id);
  noteHeldMemberLeft(id, info, why);
  log(1, "worker " + info.name + " (rank " + std::to_string(info.rank) + ", pid " +
             std::to_string(info.pid) + ") removed: " + why.text);
  assignRanks();
  publish();
  emit(WorkerLeft{info, std::move(why), true});
  if (info.local && respawn && !stopping.load()) {
    if (inMpiSet(info)) {
      endMpiSet(why, true);  // an MPI world that lost a member is started again whole
    } else {
      spawnLocal(info.device);
    }
  }
}

// A held world that lost a member cannot run again: the first loss is what later runs report.
void Coordinator::Impl::noteHeldMemberLeft(const std::string& id, const WorkerInfo& info,
                                           const LeaveReason& why) {
  if (!held || !held->fixed || !held->lost.empty()) return;
  const auto it = std::find(held->ids.begin(), held->ids.end(), id);
  if (it == held->ids.end()) return;
  held->lost = "rank " + std::to_string(it - held->ids.begin()) + " (" + info.name + ", pid " +
               std::to_string(info.pid) + ") left the session: " + why.text;
}

// waitpid(WNOHANG) on every child: a killed local worker is noticed within a tick.
void Coordinator::Impl::reapChildren() {
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
    if (ActiveRun* a = healthyRun(); a && r >= 0 && !stopping.load()) {
      a->fail(FailKind::Died, r,
              "rank " + std::to_string(r) + " (pid " + std::to_string(pid) +
                  ") died: " + st.describe());
    }
    // Already reaped: removePeer finds no child left to kill.
    removePeer(id, leaveReason(st), true);
  }
  // A worker killed before every sender attached left its segment named in /dev/shm.
  if (!ended.empty()) sweepStaleShmSegments();
  watchMpiSet();
  watchLaunchers();
}

// "; host H also runs ranks 2, 3" when other ranks share rank `r`'s host `host`: a host
// that leaves the network silences them all, and the first one found fails the run.
std::string Coordinator::Impl::hostNote(const std::string& host, int r) const {
  std::vector<int> others;
  for (const auto& p : peers) {
    const int pr = rankOf(p.id);
    if (pr >= 0 && pr != r && p.info.host == host) others.push_back(pr);
  }
  if (others.empty()) return {};
  std::sort(others.begin(), others.end());
  std::string out = "; host " + host + " also runs rank" + (others.size() > 1 ? "s " : " ");
  for (size_t i = 0; i < others.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(others[i]);
  return out;
}

void Coordinator::Impl::checkLiveness() {
  const auto now = Clock::now();
  const auto limit = opt.heartbeat * opt.missedHeartbeats;
  std::vector<std::string> dead;
  for (const auto& p : peers)
    if (now - p.lastSeen > limit) dead.push_back(p.id);
  for (const auto& id : dead) {
    Peer* p = findPeer(id);
    const std::string silence = secondsText(now - p->lastSeen);
    const int r = rankOf(id);
    if (ActiveRun* a = healthyRun(); a && r >= 0) {
      a->fail(FailKind::Silent, r,
              "rank " + std::to_string(r) + " (pid " + std::to_string(p->info.pid) +
                  ") stopped responding (no heartbeat for " + silence + ")" +
                  hostNote(p->info.host, r));
    }
    removePeer(id, {LeaveKind::MissedHeartbeats, 0, "no heartbeat for " + silence}, true);
  }
  if (now >= nextHeartbeat) {
    int unconfigured = -1;  // a configuring rank without a Ready whose connection is gone
    for (const auto& p : peers) {
      const int r = rankOf(p.id);
      const Delivery d = sendMsg(p.id, r >= 0 ? run->heartbeatFor(r) : Heartbeat{});
      if (d == Delivery::Unreachable && r >= 0 && run->awaitingReady(r)) {
        unconfigured = r;
      }
    }
    nextHeartbeat = now + opt.heartbeat;
    // Its RunConfig may have been queued just before the coordinator saw the connection end
    // (a worker killed between runs, under load): the send succeeded and the message was
    // lost with the connection. It will never answer Ready, so the run fails now, as an
    // undelivered RunConfig does, not when liveness gives up on it.
    if (unconfigured >= 0) run->failUndelivered(unconfigured, Delivery::Unreachable);
  }
}

// Holds `world` (matched by serial), or, when it is empty, the workers of the next run.
void Coordinator::Impl::holdWorld(const std::vector<WorkerInfo>& world) {
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
void Coordinator::Impl::fixHeldWorld() {
  held->fixed = true;
  for (const auto& p : peers) {
    held->ids.push_back(p.id);
    held->workers.push_back(p.info);
  }
  log(0, "world of " + std::to_string(held->ids.size()) +
             " ranks held; workers that join are spares until it is released");
}

void Coordinator::Impl::releaseWorld() {
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
    joined += (joined.empty() ? "" : ", ") + p->info.name + " rank " + std::to_string(p->info.rank);
  }
  log(0, "world released" + (joined.empty() ? std::string() : "; spares take part: " + joined));
}

// Why no run starts on the held world any more.
std::string Coordinator::Impl::heldWorldBroken() const {
  return held->lost + "; the world is held, so no run starts until it is released";
}

void Coordinator::Impl::onHello(const std::string& id, const Hello& h,
                                const std::string& fingerprint) {
  if (findPeer(id)) {
    logLimited(1, "ignored a second Hello from " + printableId(id));
    return;
  }
  if (h.protocolVersion != kProtocolVersion) {
    sendMsg(id, Shutdown{"protocol version " + std::to_string(h.protocolVersion) +
                         " is not supported (the lab speaks " + std::to_string(kProtocolVersion) +
                         ")"});
    log(1, "refused worker " + h.name + ": protocol version " + std::to_string(h.protocolVersion));
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
  p.info.launchRank = h.launchRank;
  p.info.launchLocalRank = h.launchLocalRank;
  p.info.keyFingerprint = fingerprint;
  // A data key offered in the clear would be no one's proof: only a CURVE peer's counts.
  if (!fingerprint.empty()) p.info.dataKey = h.dataKey;
  auto c = children.find(h.pid);
  // By the spawn record, not the host name: a child started with another --host is ours.
  p.info.local = c != children.end() && !c->second.joined && spawnedHere(id);
  if (p.info.local) c->second.joined = true;
  // mpirun's workers are its children, not ours: ours by their identity and backend.
  if (!p.info.local && mpiSet && spawnedHere(id) && h.backend == "mpi" &&
      static_cast<int>(mpiSet->workers.size()) < mpiSet->size) {
    p.info.local = mpiSet->workers.insert(h.pid).second;
  }
  p.joinedAt = p.lastSeen;
  p.info.proven = p.info.local;
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
             (added->info.local ? ", local" : ", remote") +
             (fingerprint.empty() ? "" : ", key " + fingerprint) + ")" +
             (added->info.rank >= 0 ? " as rank " + std::to_string(added->info.rank) : waits));
  if (added->info.local) --pendingLocal;
  // Published first: a client that sees the event finds the worker in workers().
  publish();
  emit(WorkerJoined{added->info});
}

// A local child's routing identity ends with ":p<our pid>" (from its --parent-pid), which a
// worker on another machine with the same pid as a child does not carry.
bool Coordinator::Impl::spawnedHere(const std::string& id) {
  return id.ends_with(":p" + std::to_string(::getpid()));
}

}  // namespace arl
