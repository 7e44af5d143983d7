// The worker runtime (see worker_runtime.h). Two threads:
//  - the control thread owns the DEALER socket: it answers the coordinator, heartbeats,
//    watches the coordinator's liveness and the parent process, and sends whatever the run
//    thread queued;
//  - the run thread (one per run) generates the schedule, owns the backend buffers and the
//    data plane, and drives the Executor. It stops within milliseconds of an abort (RunJob::
//    abort: the cancel flag that RankRun looks at, and the data plane's abort); the control
//    thread never blocks on it, except briefly when the worker leaves.
// They share a RunJob's start/abort state, its Outbox (result messages) and the session's
// TelemetryRing (the rank's events, recorded without a lock); the control thread sends both
// in the order the run thread produced them. The run thread never touches the control socket.
#include "runtime/worker_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <variant>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "backend/registry.h"
#include "base/clock.h"
#include "base/errors.h"
#include "control_poll.h"
#include "coord_wakeup.h"
#include "exec/collective_library.h"
#include "exec/rank_run.h"
#include "exec/telemetry_ring.h"
#include "runtime/process.h"
#include "runtime/protocol.h"
#include "schedule/generators.h"
#include "schedule/verifier.h"
#include "transport/peer_pairing.h"
#include "transport/peer_transport.h"
#include "transport/shm/shm_transport.h"
#include "transport/stale_owner.h"
#include "transport/zmq/zmq_transport.h"

namespace arl {

namespace {

using std::chrono::milliseconds;

// ---- Logging: one line per event on stderr ---------------------------------------------------

std::string g_logPrefix = "allreduce-worker";

void logLine(const std::string& text) {
  const std::string line = g_logPrefix + ": " + text + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

// An integer of the environment (ARL_TEST_CORRUPT_HEADER) in [lo, hi].
int parseInt(const std::string& flag, const std::string& v, int lo, int hi) {
  try {
    size_t used = 0;
    const long x = std::stol(v, &used);
    if (used != v.size() || x < lo || x > hi) throw std::out_of_range(v);
    return static_cast<int>(x);
  } catch (const std::exception&) {
    throw ConfigError(flag + ": expected an integer in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "], got '" + v + "'");
  }
}

// ---- Network helpers -------------------------------------------------------------------------

// Host part of "tcp://HOST:PORT" ("" for other transports).
std::string tcpHostOf(const std::string& endpoint) {
  if (endpoint.rfind("tcp://", 0) != 0) return {};
  std::string rest = endpoint.substr(6);
  const auto colon = rest.rfind(':');
  if (colon != std::string::npos) rest = rest.substr(0, colon);
  if (rest.size() >= 2 && rest.front() == '[' && rest.back() == ']') {
    rest = rest.substr(1, rest.size() - 2);
  }
  return rest;
}

// ---- Test-only header corruption -------------------------------------------------------------

struct Corruption {
  int rank = -1;
  std::string field;
};

std::optional<Corruption> corruptionFromEnv() {
  const char* v = std::getenv(kCorruptHeaderEnv);
  if (v == nullptr || *v == '\0') return std::nullopt;
  const std::string s = v;
  const auto colon = s.find(':');
  static const char* kFields[] = {"signature", "epoch", "seq",    "step",
                                  "chunk",     "slice", "offset", "length"};
  Corruption c;
  if (colon != std::string::npos) {
    c.field = s.substr(colon + 1);
    try {
      c.rank = parseInt(kCorruptHeaderEnv, s.substr(0, colon), 0, kMaxRanks - 1);
    } catch (const ConfigError&) {
      c.rank = -1;
    }
  }
  const bool known = std::any_of(std::begin(kFields), std::end(kFields),
                                 [&](const char* f) { return c.field == f; });
  if (c.rank < 0 || !known) {
    logLine(std::string("ignoring ") + kCorruptHeaderEnv + "='" + s +
            "' (expected RANK:FIELD, FIELD one of signature epoch seq step chunk slice offset "
            "length)");
    return std::nullopt;
  }
  return c;
}

// A Transport that alters one field of the first header it sends, then forwards everything
// unchanged: the receiver must report the mismatch instead of summing the payload.
class CorruptingTransport final : public Transport {
 public:
  CorruptingTransport(Transport& inner, std::string field)
      : inner_(inner), field_(std::move(field)) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                       size_t bytes) override {
    if (done_) return inner_.send(peer, h, data, bytes);
    done_ = true;
    ChunkHeader c = h;
    if (field_ == "signature") c.opSignature ^= 0x5A5A5A5Au;
    if (field_ == "epoch") c.epoch += 1000;
    if (field_ == "seq") c.seq += 7;
    if (field_ == "step") c.step += 1;
    if (field_ == "chunk") c.chunk += 1;
    if (field_ == "slice") c.slice += 1;
    if (field_ == "offset") c.offset += 1;
    if (field_ == "length") c.length += 1;
    logLine("test: corrupting the " + field_ + " of the first data-plane header to rank " +
            std::to_string(peer) + " (" + kCorruptHeaderEnv + ")");
    return inner_.send(peer, c, data, bytes);
  }
  std::unique_ptr<InMessage> recv(int peer, uint32_t step,
                                  std::chrono::milliseconds timeout) override {
    return inner_.recv(peer, step, timeout);
  }
  bool ready(int peer, uint32_t step) override { return inner_.ready(peer, step); }
  void abort() override { inner_.abort(); }
  bool readsBackendMemory(int peer) const override { return inner_.readsBackendMemory(peer); }
  void reclaimAll(uint32_t step) override { inner_.reclaimAll(step); }

 private:
  Transport& inner_;
  std::string field_;
  bool done_ = false;
};

// ---- Test-only loss of control messages ------------------------------------------------------

// The types named in ARL_TEST_LOSE_CONTROL whose first message is still to be lost.
std::set<MsgType> lossesFromEnv() {
  const char* v = std::getenv(kLoseControlEnv);
  std::set<MsgType> out;
  if (v == nullptr || *v == '\0') return out;
  std::string rest = v;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string name = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    bool known = false;
    for (uint16_t t = 1; t <= kMaxMsgType; ++t) {
      if (typeName(static_cast<MsgType>(t)) == name) {
        out.insert(static_cast<MsgType>(t));
        known = true;
      }
    }
    if (!known) logLine(std::string("ignoring unknown type '") + name + "' in " + kLoseControlEnv);
  }
  return out;
}

// ARL_TEST_STALL="RANK:STEP" as (rank, step).
std::optional<std::pair<int, uint32_t>> stallFromEnv() {
  const char* v = std::getenv(kStallEnv);
  if (v == nullptr || *v == '\0') return std::nullopt;
  const std::string s = v;
  const auto colon = s.find(':');
  try {
    if (colon == std::string::npos) throw ConfigError("no colon");
    const int rank = parseInt(kStallEnv, s.substr(0, colon), 0, kMaxRanks - 1);
    const int step = parseInt(kStallEnv, s.substr(colon + 1), 0, 1 << 30);
    return std::make_pair(rank, static_cast<uint32_t>(step));
  } catch (const ConfigError&) {
    logLine(std::string("ignoring ") + kStallEnv + "='" + s + "' (expected RANK:STEP)");
    return std::nullopt;
  }
}

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

  // Queues a message behind the events recorded so far and wakes the control thread, or
  // leaves it for the control thread's next regular look (at most 10 ms away) when `wake` is
  // false: a wake-up per iteration would take a core from the ranks while they run. Returns
  // the message's number (1, 2, ...) for waitSent().
  uint64_t post(Message m, bool wake = true) {
    const uint64_t before = ring_ != nullptr ? ring_->written() : 0;
    uint64_t n = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      msgs_.push_back({before, std::move(m)});
      n = ++posted_;
    }
    if (wake && wake_ != nullptr) wake_->raise();
    return n;
  }

  // Control thread: every message up to number `n` has been handed to the socket.
  void markSent(uint64_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      sent_ = std::max(sent_, n);
    }
    sentCv_.notify_all();
  }

  // Waits until message `n` has been handed to the socket, or `timeout` has passed.
  bool waitSent(uint64_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return sentCv_.wait_for(lock, timeout, [&] { return sent_ >= n; });
  }

  void setWakeup(Wakeup* w) { wake_ = w; }

  struct Taken {
    // (ring position the message follows, message), in the order they were posted
    std::vector<std::pair<uint64_t, Message>> msgs;
    uint64_t lastMsg = 0;  // number of the last message in msgs (see post())
  };

  // Takes the messages waiting (perhaps none).
  Taken take() {
    Taken t;
    std::lock_guard<std::mutex> lock(mu_);
    t.msgs.swap(msgs_);
    t.lastMsg = posted_;
    return t;
  }

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
  RunConfig cfg;
  int rank = 0;
  std::string myHost;
  std::string coordinatorHost;  // for the tcp advertise address
  std::string backend;          // a name in the backend registry
  int device = -1;              // the worker's device (--device; -1: none)
  int64_t offsetNs = 0;         // coordinator clock - worker clock (ClockSample::offsetNs)
  std::optional<Corruption> corruption;
  std::optional<std::pair<int, uint32_t>> stallAt;  // ARL_TEST_STALL: (rank, step)
  bool verbose = false;                             // log the run's phases (--verbose)

  Outbox out;
  // The rank's telemetry (the session's ring, emptied for this run); null at level Off.
  TelemetryRing* ring = nullptr;
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
  std::atomic<bool> running{false};    // inside warmup/timed iterations
  std::atomic<uint32_t> iteration{0};
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

  // Gives `results` room for the run's IterationResults and touches that memory now, before
  // the run thread starts: growing it between iterations allocated fresh pages on the run
  // thread, and a page fault there (15 us on a virtual machine) lands in the time of a peer
  // waiting for this rank (docs/telemetry.md, "The tail"). An IterationResult carries the
  // iterations of up to 10 ms (ResultBatch), so 1024 of them last ten seconds at least; a
  // longer run grows the vector as it goes.
  void reserveResults(uint32_t iterations) {
    constexpr size_t kMaxReserved = 1024;  // 176 KiB of Messages
    const size_t n = std::min<size_t>(size_t{iterations} + 2, kMaxReserved);
    results.resize(n);  // constructs, so writes, every element: the pages are faulted in
    results.clear();    // and stay, with the capacity
  }

  // Posts a result message and keeps it for a re-send.
  uint64_t postResult(Message m, bool wake = true) {
    {
      std::lock_guard<std::mutex> lock(mu);
      results.push_back(m);
    }
    return out.post(std::move(m), wake);
  }

  void abort() {
    std::lock_guard<std::mutex> lock(mu);
    aborted = true;
    cancelled.store(true);
    if (dp != nullptr) dp->abort();
    cv.notify_all();
  }
};

// How long a failing rank waits for its RunFailed to leave before it aborts its data plane.
constexpr milliseconds kReportFirst{200};
// A run thread stops within milliseconds of its abort: every phase looks at it. One still
// running this long after is stuck beyond repair, and the worker exits (code 5).
constexpr std::chrono::seconds kStopLimit{30};
// How long leaving (Shutdown, a silent coordinator, a dead parent) waits for the run thread;
// below the coordinator's grace for local workers on shutdown (1 s).
constexpr milliseconds kLeaveWait{500};

// The run's data plane: shared memory or ZeroMQ, bound before Ready and connected on Start.
struct RunDataPlane {
  std::unique_ptr<ZmqDataPlane> zmq;
  std::unique_ptr<ShmDataPlane> shm;
  Transport* dp = nullptr;  // the one of the two that exists
  DataPlanePeers peers;
  // The backend's memory that ranks of this host may read in place (CUDA IPC), when the run
  // asks for it and the backend has some; then every channel goes both ways (a lent slice
  // comes back on the reverse channel).
  PeerMemory* peerMemory = nullptr;
  bool bothWays = false;  // channels both ways without lending (a rank without such memory)

  void close() {
    if (zmq) zmq->close();
    if (shm) shm->close();
  }
};

// Generates this run's schedule, annotated with provenance when chunk telemetry asks for it.
// Generators are pure functions of plain data and do not look at `cancel`: with the default
// 1 MiB slice they take milliseconds even at 256 MiB; the smallest slices the limits accept
// make them take seconds, and an abort then waits for the step under way to end.
Schedule runSchedule(const RunConfig& c, int rank, const std::atomic<bool>& cancel) {
  if (cancel.load()) throw PeerError(rank, -1, -1, "run aborted before it started");
  GenParams p;
  p.collective = c.collective;
  p.nranks = c.worldSize;
  p.count = c.count;
  p.sliceElems = c.sliceBytes / dtypeSize(c.dtype);
  p.root = c.root;
  p.ranksPerHost = static_cast<int>(c.ranksPerHost);
  p.ring.assign(c.ringOrder.begin(), c.ringOrder.end());
  Schedule s;
  try {
    s = generate(c.algorithm, p);
  } catch (const GenError& e) {
    throw PeerError(rank, -1, -1, std::string("schedule refused: ") + e.what());
  }
  if (cancel.load()) throw PeerError(rank, -1, -1, "run aborted while generating its schedule");
  if (c.telemetry == TelemetryLevel::Chunks && c.worldSize <= kMaxRanks) {
    const VerifyResult v = annotate(s);
    if (!v.ok) throw PeerError(rank, -1, -1, "schedule failed verification: " + v.message);
  }
  return s;
}

RankRunOptions rankRunOptions(RunJob& j) {
  const RunConfig& c = j.cfg;
  RankRunOptions ro;
  ro.exec.dtype = c.dtype;
  ro.exec.op = c.op;
  ro.exec.inflight = static_cast<int>(c.inflight);
  ro.exec.telemetry = c.telemetry;
  ro.exec.runId = c.runId;
  ro.exec.epoch = c.epoch;
  // Telemetry on the coordinator's clock (ClockSample::offsetNs).
  const int64_t offset = j.offsetNs;
  ro.exec.clock = [offset] { return steadyNowNs() + offset; };
  ro.exec.beforeOp = [&j](size_t, const Op& op) {
    j.step.store(op.step, std::memory_order_relaxed);
    j.progress.tick();
    if (j.stallAt && j.stallAt->first == j.rank && j.stallAt->second == op.step) {
      j.stallAt.reset();
      logLine("test: rank " + std::to_string(j.rank) + " stops before step " +
              std::to_string(op.step) + " (" + kStallEnv + ")");
      std::unique_lock<std::mutex> lock(j.mu);
      j.cv.wait(lock, [&] { return j.aborted; });
      throw PeerError(j.rank, -1, op.step, "run aborted");
    }
  };
  ro.exec.progress = &j.progress;
  if (const char* v = std::getenv(kEveryOtherEnv)) ro.recordEveryOther = std::string(v) == "1";
  ro.inPlace = c.inPlace;
  ro.warmup = c.warmup;
  ro.iterations = c.iterations;
  ro.check = c.check;
  ro.cancel = &j.cancelled;
  return ro;
}

// tcp:// on every interface, advertised at the address the other hosts can reach.
BindOptions tcpBindOptions(const RunJob& j) {
  BindOptions bo;
  bo.kind = BindOptions::Kind::Tcp;
  bo.tcpHost = "0.0.0.0";
  // The address this host reaches the coordinator from is the one the other hosts can
  // reach; a coordinator on loopback says nothing about that, so ask the routing table.
  std::string adv = localAddressToward(j.coordinatorHost);
  if (adv.empty() || adv.rfind("127.", 0) == 0) adv = hostAddress();
  if (adv.empty()) adv = "127.0.0.1";
  bo.tcpAdvertiseHost = adv;
  return bo;
}

// Each ring holds `inflight` + 1 of the largest messages this rank receives.
ShmOptions shmOptions(const Schedule& s, int rank, const RunConfig& c) {
  uint64_t maxElems = 0;
  for (const auto& prog : s.ranks) {
    for (const Op& op : prog) {
      if (op.sendPeer == rank) maxElems = std::max<uint64_t>(maxElems, op.count);
    }
  }
  ShmOptions so = shmWaitsFromEnv(ShmOptions{});
  so.ringBytes = shmRingBytes(maxElems * dtypeSize(c.dtype), static_cast<int>(c.inflight));
  so.shaping = c.shaping;
  return so;
}

// Phase 1 of the data plane: creates and binds it; returns the endpoint for Ready.
std::string bindDataPlane(RunJob& j, const Schedule& s, RunDataPlane& plane) {
  const RunConfig& c = j.cfg;
  const int rank = j.rank;
  const bool oneHost =
      c.hosts.empty() || std::all_of(c.hosts.begin(), c.hosts.end(),
                                     [&](const std::string& h) { return h == j.myHost; });
  // Shared memory also needs one pid namespace: a rank cannot tell whether a peer in another
  // one is alive, nor clean up after it (transport/shm/shm_transport.h).
  const uint64_t myNs = pidNamespaceId();
  const bool oneNamespace = std::all_of(c.pidNamespaces.begin(), c.pidNamespaces.end(),
                                        [&](uint64_t ns) { return ns == myNs; });
  if (c.dataPlane == DataPlaneKind::Shm && !oneHost) {
    throw PeerError(rank, -1, -1, "the shm data plane needs every rank on this host");
  }
  if (c.dataPlane == DataPlaneKind::Shm && !oneNamespace) {
    throw PeerError(rank, -1, -1, "the shm data plane needs every rank in this pid namespace");
  }
  const bool useShm = c.dataPlane == DataPlaneKind::Shm ||
                      (c.dataPlane == DataPlaneKind::Auto && oneHost && oneNamespace);
  plane.peers = dataPlanePeers(s, rank);
  if (plane.peerMemory != nullptr || plane.bothWays) {
    std::vector<int> both = plane.peers.sendTo;
    both.insert(both.end(), plane.peers.recvFrom.begin(), plane.peers.recvFrom.end());
    std::sort(both.begin(), both.end());
    both.erase(std::unique(both.begin(), both.end()), both.end());
    plane.peers.sendTo = both;
    plane.peers.recvFrom = both;
  }
  if (useShm) {
    plane.shm = std::make_unique<ShmDataPlane>(rank, c.worldSize);
    plane.dp = plane.shm.get();
  } else {
    plane.zmq = std::make_unique<ZmqDataPlane>(rank, c.worldSize);
    plane.dp = plane.zmq.get();
  }
  {
    std::lock_guard<std::mutex> lock(j.mu);
    if (j.aborted) throw PeerError(rank, -1, -1, "run aborted before it started");
    j.dp = plane.dp;
  }
  // ipc:// needs a shared file system as well as one host: another namespace may be a
  // container with a /tmp of its own.
  if (!useShm) {
    BindOptions bo = oneHost && oneNamespace ? BindOptions{} : tcpBindOptions(j);
    bo.shaping = c.shaping;
    bo.clockOffsetNs = j.offsetNs;
    return plane.zmq->bind(bo);
  }
  try {
    return plane.shm->bind(shmOptions(s, rank, c), plane.peers.recvFrom);
  } catch (const ConfigError& e) {
    throw PeerError(rank, -1, -1, e.what());
  }
}

// Reports Ready with `endpoint` and the device whose memory peers may read (kept for a
// re-send until Start arrives).
void postReady(RunJob& j, const std::string& endpoint, const PeerMemory* memory = nullptr) {
  Ready ready;
  ready.epoch = j.cfg.epoch;
  ready.rank = j.rank;
  ready.runId = j.cfg.runId;
  ready.dataEndpoint = endpoint;
  ready.clockOffsetNs = j.offsetNs;
  if (memory != nullptr) {
    ready.device.id = memory->deviceId();
    ready.device.reach = memory->reachableDevices();
  }
  {
    std::lock_guard<std::mutex> lock(j.mu);
    j.ready = ready;
    j.readySentAt = SteadyClock::now();
  }
  j.out.post(ready);
}

// Waits for Start and returns every rank's endpoint from it.
std::vector<std::string> awaitStart(RunJob& j) {
  const int rank = j.rank;
  std::vector<std::string> endpoints;
  j.progress.setPhase(RunPhase::AwaitingStart);
  {
    std::unique_lock<std::mutex> lock(j.mu);
    j.cv.wait(lock, [&] { return j.started || j.aborted; });
    if (j.aborted) throw PeerError(rank, -1, -1, "run aborted before it started");
    endpoints = j.endpoints;
  }
  if (endpoints.size() != static_cast<size_t>(j.cfg.worldSize)) {
    throw PeerError(rank, -1, -1,
                    "Start carries " + std::to_string(endpoints.size()) +
                        " data-plane endpoints for a world of " + std::to_string(j.cfg.worldSize));
  }
  return endpoints;
}

// Phase 2: waits for Start, which carries every rank's endpoint, and connects.
void connectDataPlane(RunJob& j, RunDataPlane& plane) {
  const int rank = j.rank;
  const std::vector<std::string> endpoints = awaitStart(j);
  // Connecting maps the receivers' segments, and on shared memory touches every page of this
  // rank's rings there: set-up work alone, whose CPU time the stall watch counts as progress.
  j.progress.setPhase(RunPhase::SettingUp);
  try {
    if (plane.shm) plane.shm->connect(endpoints, plane.peers.sendTo);
    if (plane.zmq) plane.zmq->connect(endpoints, plane.peers.sendTo);
  } catch (const ConfigError& e) {
    throw PeerError(rank, -1, -1, e.what());
  }
}

// How long a rank gathers the times of its timed iterations before it posts them as one
// IterationResult: the control thread looks every 10 ms anyway. A message per iteration cost
// the machine more CPU than a 4 KiB iteration (this worker's control thread, ZeroMQ's I/O
// threads on both sides and the coordinator handle each), while the ranks iterated
// (docs/telemetry.md, "The tail").
constexpr int64_t kResultIntervalNs = 10'000'000;

// The timed iterations not yet posted, as the IterationResult that will carry them.
class ResultBatch {
 public:
  ResultBatch(const RunConfig& c, int rank) : lastPostNs_(steadyNowNs()) {
    msg_.epoch = c.epoch;
    msg_.rank = rank;
    // Room for a whole batch, so that gathering allocates nothing between iterations.
    msg_.moreTimesNs.reserve(std::min<size_t>(c.iterations, kMaxIterationsPerResult - 1));
  }

  // Adds a timed iteration; true when the batch is due: `last`, full, or kResultIntervalNs
  // after the previous post (so an iteration longer than that is posted at once).
  bool add(const TimedIteration& t, bool last) {
    if (empty_) {
      msg_.iteration = t.index;
      msg_.timeNs = static_cast<uint64_t>(t.ns);
      msg_.moreTimesNs.clear();
      empty_ = false;
    } else {
      msg_.moreTimesNs.push_back(static_cast<uint64_t>(t.ns));
    }
    msg_.wrong = t.wrong.value_or(0);
    return last || msg_.count() >= kMaxIterationsPerResult ||
           steadyNowNs() - lastPostNs_ >= kResultIntervalNs;
  }

  // Posts what was gathered (nothing when empty), without waking the control thread.
  void post(RunJob& j) {
    if (empty_) return;
    j.postResult(msg_, /*wake=*/false);
    empty_ = true;
    lastPostNs_ = steadyNowNs();
  }

 private:
  IterationResult msg_;
  int64_t lastPostNs_;
  bool empty_ = true;
};

// Runs the warm-up and timed iterations, reporting the timed ones in batches (ResultBatch);
// returns the run's #wrong. `iteration` follows the run for RunFailed: -1 while warming up.
// With `shm`, the rank drains it (ShmDataPlane::drain) before it checks its output: the check
// takes milliseconds at large sizes, which peers still in their last iteration would wait out.
uint64_t runIterations(RunJob& j, const std::function<void(const RankRunHooks&)>& iterate,
                       ShmDataPlane* shm, int64_t& iteration) {
  const RunConfig& c = j.cfg;
  uint64_t wrongTotal = 0;
  ResultBatch batch(c, j.rank);
  RankRunHooks hooks;
  hooks.beforeIteration = [&](uint32_t it) {
    const bool isTimed = it >= c.warmup;
    iteration = isTimed ? static_cast<int64_t>(it - c.warmup) : -1;
    j.iteration.store(isTimed ? it - c.warmup : 0);
    j.step.store(0);
    return true;
  };
  hooks.beforeCheck = [&] {
    if (shm != nullptr) shm->drain();
    if (j.verbose) logLine("run " + std::to_string(c.runId) + ": checking the output");
  };
  hooks.afterTimed = [&](const TimedIteration& t) {
    wrongTotal += t.wrong.value_or(0);
    if (batch.add(t, t.index + 1 == c.iterations)) batch.post(j);
  };
  j.running.store(true);
  try {
    iterate(hooks);
  } catch (...) {
    batch.post(j);  // the iterations that completed before the failure
    throw;
  }
  batch.post(j);
  j.running.store(false);
  return wrongTotal;
}

RunFailed runFailed(const RunJob& j, const std::exception& e, int64_t iteration) {
  if (const auto* pe = dynamic_cast<const PeerError*>(&e)) {
    return RunFailed::from(*pe, j.cfg.epoch, iteration);
  }
  RunFailed f;
  f.epoch = j.cfg.epoch;
  f.rank = j.rank;
  f.step = j.running.load() ? static_cast<int64_t>(j.step.load()) : -1;
  f.iteration = iteration;
  f.reason = e.what();
  return f;
}

// The RunDone of a run that completed with `wrong` elements wrong; `moreDropped`: events lost
// before they reached the ring (a library's own reporting).
void postDone(RunJob& j, uint64_t wrong, uint64_t moreDropped = 0) {
  RunDone done;
  done.epoch = j.cfg.epoch;
  done.rank = j.rank;
  done.wrongTotal = wrong;
  done.eventsDropped = (j.ring != nullptr ? j.ring->dropped() : 0) + moreDropped;
  j.progress.setPhase(RunPhase::Reported);
  j.reportedAt = SteadyClock::now();
  j.reported.store(true);
  j.postResult(done);
}

// This rank's pairing for CUDA IPC, from what Start says of every rank's device; each
// refused pair that exchanges data is logged once, by its lower rank.
PeerPairing peerPairing(const RunJob& j, const RunDataPlane& plane) {
  const RunConfig& c = j.cfg;
  const auto n = static_cast<size_t>(c.worldSize);
  std::vector<PeerPlace> places(n);
  for (size_t r = 0; r < n; ++r) {
    places[r].host = c.hosts.empty() ? j.myHost : c.hosts[r];
    places[r].pidNamespace = c.pidNamespaces.empty() ? 0 : c.pidNamespaces[r];
    if (j.devices.size() == n) {
      places[r].device = j.devices[r].id;
      places[r].reach = j.devices[r].reach;
    }
  }
  PeerPairing pairing = pairPeerMemory(places, j.rank, c.cudaIpc);
  for (int p : plane.peers.sendTo) {
    const std::string& why = pairing.refused[static_cast<size_t>(p)];
    if (p > j.rank && !why.empty() && c.cudaIpc) logLine(why);
  }
  return pairing;
}

// Binds, reports Ready, connects on Start, runs, closes the data plane and reports RunDone.
void runOnDataPlane(RunJob& j, const Schedule& s, RankRun& run, RunDataPlane& plane,
                    int64_t& iteration) {
  postReady(j, bindDataPlane(j, s, plane), plane.peerMemory);
  connectDataPlane(j, plane);

  std::optional<PeerMemoryTransport> lending;
  if (plane.peerMemory != nullptr) {
    PeerPairing pairing = peerPairing(j, plane);
    if (std::count(pairing.viaPeerMemory.begin(), pairing.viaPeerMemory.end(), true) > 0) {
      // As many slices out to a peer as its shared-memory ring would hold (shmRingBytes),
      // and never fewer than the default.
      const uint32_t loans =
          std::max(PeerMemoryTransport::kDefaultLoansPerPeer, j.cfg.inflight + 2);
      lending.emplace(*plane.dp, *plane.peerMemory, std::move(pairing), loans);
    }
  }
  Transport& inner = lending ? static_cast<Transport&>(*lending) : *plane.dp;
  std::optional<CorruptingTransport> corrupting;
  if (j.corruption && j.corruption->rank == j.rank) {
    corrupting.emplace(inner, j.corruption->field);
  }
  Transport& transport = corrupting ? *corrupting : inner;
  const uint64_t wrong = runIterations(
      j, [&](const RankRunHooks& h) { run.run(transport, j.ring, h); }, plane.shm.get(), iteration);
  // Every backend operation has completed (the iterations end synchronised): unmap the peers.
  if (lending) lending->close();

  // The data plane is closed before RunDone leaves, so no send of this run is in flight
  // when the next one starts: ZeroMQ's close() says goodbye to its peers (it waits for
  // their last messages; j.dp stays set meanwhile, so an Abort still interrupts it);
  // shared memory needs no goodbye for its data, which already sits in the receivers' rings,
  // but drains them for the timing's sake: a rank that finished first waits, as it does
  // between iterations, until its receivers have taken its last data, instead of tearing
  // down and reporting on a core they may need for their last iteration (docs/telemetry.md,
  // "The tail").
  j.progress.setPhase(RunPhase::Closing);
  if (plane.shm) plane.shm->drain();
  plane.close();
  postDone(j, wrong);
}

// A run of a library algorithm (exec/collective_library.h): no schedule and no data plane of
// the lab's. The library is made first, on this thread, so that it selects the rank's device
// before the backend allocates there. Rank 0 makes the bootstrap token and reports it as its
// Ready endpoint; Start carries it to every rank (endpoints[0]), and each rank joins the
// library's communicator with it, waiting in phase AwaitingStart (the stall watch counts no
// CPU time there) until every rank has joined.
//
// What the library reports about itself (NCCL's events) is recorded into the rank's ring by
// this thread, the ring's one producer: before each iteration, untimed, what was reported
// since, and after the last one, once the library has ended its communicator, the rest.
void runLibraryJob(RunJob& j, const LibraryAlgorithm& algo, int64_t& iteration,
                   const std::function<void(const std::exception&)>& fail) {
  const RunConfig& c = j.cfg;
  LibraryRunSpec spec;
  spec.algorithm = &algo;
  spec.collective = c.collective;
  spec.dtype = c.dtype;
  spec.op = c.op;
  spec.count = c.count;
  spec.root = c.root;
  spec.rank = j.rank;
  spec.nranks = c.worldSize;
  spec.device = j.device;
  spec.telemetry = j.ring != nullptr ? c.telemetry : TelemetryLevel::Off;
  // Declared in this order so that, on every path, the library leaves its communicator (an
  // abort after a failure: no kernel of it is left reading the buffers) before RankRun frees
  // the buffers, and the backend goes last.
  std::unique_ptr<Backend> backend;
  std::unique_ptr<RankRun> run;
  std::unique_ptr<CollectiveLibrary> lib = makeCollectiveLibrary(spec);
  const Schedule s = libraryShape(c.algorithm, c.collective, c.worldSize, c.count, c.root);
  uint64_t wrong = 0;
  LibraryEventCounts own;
  const auto collect = [&](bool final) {
    if (j.ring != nullptr) own += lib->collectEvents(*j.ring, c.warmup, j.offsetNs, final);
  };
  try {
    backend = makeBackend(j.backend);
    RankRunOptions ro = rankRunOptions(j);
    ro.tolerance = lib->tolerance();
    run = std::make_unique<RankRun>(s, j.rank, *backend, ro);
    postReady(j, j.rank == 0 ? lib->newBootstrap() : std::string(kLibraryMemberEndpoint));
    const std::vector<std::string> endpoints = awaitStart(j);
    lib->join(endpoints.front(), j.cancelled);
    wrong = runIterations(
        j,
        [&](const RankRunHooks& h) {
          RankRunHooks hooks = h;
          hooks.beforeIteration = [&](uint32_t it) {
            collect(false);
            return h.beforeIteration(it);
          };
          run->run([&](const RankBuffers& b) { lib->run(b, j.cancelled); }, hooks);
        },
        nullptr, iteration);
    j.progress.setPhase(RunPhase::Closing);
    collect(true);
  } catch (const std::exception& e) {
    fail(e);  // reported first; the library aborts its communicator on the way out
    return;
  }
  lib.reset();
  if (j.verbose && own.recorded + own.dropped + own.unattributed > 0) {
    logLine("run " + std::to_string(c.runId) + ": " + std::string(algo.library) + " reported " +
            std::to_string(own.recorded) + " events of timed iterations (" +
            std::to_string(own.warmup) + " of warm-ups left out, " +
            std::to_string(own.unattributed) + " of no call, " + std::to_string(own.dropped) +
            " lost)");
  }
  postDone(j, wrong, own.dropped);
}

// A run of one of the lab's own schedules: generate it, set up, run on the data plane.
void runScheduleJob(RunJob& j, RunDataPlane& plane, int64_t& iteration,
                    const std::function<void(const std::exception&)>& fail) {
  const std::unique_ptr<Backend> backend = makeBackend(j.backend);
  if (j.cfg.cudaIpc) {
    plane.peerMemory = backend->peerMemory();
    // Every rank of such a run makes its channels go both ways, so one that lends nothing
    // itself must too: its peers may lend each other slices.
    plane.bothWays = plane.peerMemory == nullptr;
  }
  const auto t0 = SteadyClock::now();
  const Schedule s = runSchedule(j.cfg, j.rank, j.cancelled);
  RankRun run(s, j.rank, *backend, rankRunOptions(j));
  if (j.verbose) {
    const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
    char buf[96];
    std::snprintf(buf, sizeof buf, "run %llu: set up in %.1f ms",
                  static_cast<unsigned long long>(j.cfg.runId), ms);
    logLine(buf);
  }
  try {
    runOnDataPlane(j, s, run, plane, iteration);
  } catch (const std::exception& e) {
    fail(e);
    plane.close();  // before `run` frees the buffers: zero-copy sends may still read them
  }
}

void runJobMain(RunJob& j) {
  int64_t iteration = -1;  // for RunFailed: -1 before the first timed iteration
  RunDataPlane plane;
  j.progress.setPhase(RunPhase::SettingUp);
  // The failure is reported first, so that the coordinator hears the cause before the
  // consequences and can abort the other ranks at once; then the data plane is aborted: a
  // failed run says no goodbye (its peers may be gone).
  const auto fail = [&](const std::exception& e) {
    RunFailed f = runFailed(j, e, iteration);  // names the step while `running` says one is
    j.running.store(false);
    j.progress.setPhase(RunPhase::Reported);
    j.reportedAt = SteadyClock::now();
    j.reported.store(true);
    const uint64_t n = j.postResult(std::move(f));
    // The abort lets this rank's peers fail too; their reports must not overtake the cause.
    j.out.waitSent(n, kReportFirst);
    if (plane.dp) plane.dp->abort();
  };
  try {
    if (const LibraryAlgorithm* algo = findLibraryAlgorithm(j.cfg.algorithm)) {
      runLibraryJob(j, *algo, iteration, fail);
    } else {
      runScheduleJob(j, plane, iteration, fail);
    }
  } catch (const std::exception& e) {
    fail(e);  // the setup failed
  }
  plane.close();
  {
    std::lock_guard<std::mutex> lock(j.mu);
    j.dp = nullptr;
  }
  j.finishedAt = SteadyClock::now();
  j.finished.store(true);
}

// ---- The control thread ----------------------------------------------------------------------

class WorkerSession {
 public:
  explicit WorkerSession(const WorkerOptions& opt)
      : opt_(opt),
        host_(opt.hostName.empty() ? hostName() : opt.hostName),
        pid_(static_cast<int64_t>(::getpid())) {
    name_ = opt.name.empty() ? host_ + ":" + std::to_string(pid_) : opt.name;
    g_logPrefix = "allreduce-worker[" + std::to_string(pid_) + "]";
    hbInterval_ = opt.heartbeat;
    liveness_ = opt.liveness;
    corruption_ = corruptionFromEnv();
    losses_ = lossesFromEnv();
    stall_ = stallFromEnv();
  }

  // Also on the error paths: no run thread may outlive the session.
  ~WorkerSession() {
    stopJobNow();
    if (job_ && job_->th.joinable()) job_->th.join();
  }

  int run() {
    sock_ = zmq::socket_t(ctx_, zmq::socket_type::dealer);
    std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(steadyNowNs()));
    char rnd[17];
    std::snprintf(rnd, sizeof rnd, "%016llx", static_cast<unsigned long long>(rng()));
    // A coordinator's own child names its parent: how the coordinator knows it for its own
    // whatever --host it reports.
    const std::string identity =
        "w:" + host_.substr(0, 64) + ":" + std::to_string(pid_) + ":" + rnd +
        (opt_.parentPid > 0 ? ":p" + std::to_string(opt_.parentPid) : std::string());
    sock_.set(zmq::sockopt::routing_id, identity);
    sock_.set(zmq::sockopt::linger, 0);
    // Telemetry is lossless on the control connection: never drop at a high-water mark.
    sock_.set(zmq::sockopt::sndhwm, 0);
    sock_.set(zmq::sockopt::rcvhwm, 0);
    try {
      sock_.connect(opt_.connect);
    } catch (const zmq::error_t& e) {
      logLine("cannot connect to " + opt_.connect + ": " + e.what());
      return 2;
    }
    Hello h;
    h.name = name_;
    h.hostName = host_;
    h.pid = pid_;
    h.backend = opt_.backend;
    h.deviceIndex = opt_.device;
    h.pidNamespace = pidNamespaceId();
    send(h);
    sendPing();
    const auto started = SteadyClock::now();
    lastHeard_ = started;
    lastTick_ = started;
    nextHeartbeat_ = started + hbInterval_;

    for (;;) {
      std::optional<int> exitCode;
      pollAndDrain(sock_, wake_, milliseconds(10), 256, [&](std::vector<zmq::message_t>& frames) {
        lastHeard_ = SteadyClock::now();
        exitCode = handle(frames);
        return !exitCode;
      });
      if (exitCode) return leave(*exitCode);
      flushOutbox(false);
      const auto now = SteadyClock::now();
      if (now >= nextHeartbeat_) {
        send(heartbeat());
        nextHeartbeat_ = now + hbInterval_;
      }
      resendReady(now);
      if (pingOutstanding_ && now - pingSentAt_ > std::chrono::seconds(1)) sendPing();
      // A loop that stalled (the process was stopped) heard nothing meanwhile through no fault
      // of the coordinator: it gets a full window again, so that a Shutdown queued for this
      // worker is read (exit 0) instead of the worker leaving for silence (exit 3).
      if (now - lastTick_ > hbInterval_) lastHeard_ = now;
      lastTick_ = now;
      const auto silence = now - lastHeard_;
      const auto limit = welcomed_ ? hbInterval_ * liveness_ : opt_.joinTimeout;
      if (silence > limit) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "%s %s for %.1f s; leaving",
                      welcomed_ ? "coordinator silent at" : "no answer from coordinator at",
                      opt_.connect.c_str(), std::chrono::duration<double>(silence).count());
        logLine(buf);
        return leave(3);
      }
      if (opt_.parentPid > 0 && static_cast<int64_t>(::getppid()) != opt_.parentPid) {
        logLine("parent process " + std::to_string(opt_.parentPid) + " is gone; leaving");
        return leave(4);
      }
      reapJob();
      checkStuckJob(now);
    }
  }

 private:
  template <class M>
  void send(const M& m) {
    sendFrames(m.encode());
  }

  void sendFrames(const Frames& f) {
    try {
      for (size_t i = 0; i < f.size(); ++i) {
        sock_.send(zmq::buffer(f[i]),
                   i + 1 < f.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    } catch (const zmq::error_t& e) {
      logLine(std::string("control send failed: ") + e.what());
    }
  }

  // The same for frames this thread no longer needs: a large frame is handed to ZeroMQ as
  // it is (its I/O thread frees it once sent) instead of being copied into a message.
  void sendFrames(Frames&& f) {
    constexpr size_t kHandOver = size_t{64} << 10;
    try {
      for (size_t i = 0; i < f.size(); ++i) {
        const auto flags = i + 1 < f.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
        if (f[i].size() < kHandOver) {
          sock_.send(zmq::buffer(f[i]), flags);
          continue;
        }
        auto owned = std::make_unique<Bytes>(std::move(f[i]));
        zmq::message_t msg(
            owned->data(), owned->size(),
            [](void*, void* hint) { delete static_cast<Bytes*>(hint); }, owned.get());
        owned.release();  // the message frees it now
        sock_.send(msg, flags);
      }
    } catch (const zmq::error_t& e) {
      logLine(std::string("control send failed: ") + e.what());
    }
  }

  // What this worker's run is doing, for the coordinator's liveness and stall watch.
  Heartbeat heartbeat() {
    Heartbeat hb;
    if (!job_) return hb;
    RunJob& j = *job_;
    if (!j.finished.load() && j.running.load()) {
      hb.inRun = true;
      hb.iteration = j.iteration.load();
      hb.step = j.step.load();
    }
    const ProgressSnapshot p = j.progress.snapshot();
    hb.epoch = j.cfg.epoch;
    hb.phase = j.reported.load() ? RunPhase::Reported : p.phase;
    hb.progress = j.finished.load() ? p.ticks : progressCount(p, j.th);
    hb.wait = p.wait;
    hb.waitPeer = p.wait == WaitKind::None ? -1 : p.peer;
    hb.waitStep = p.step;
    return hb;
  }

  // A Ready, or the Start that answers it, may be lost (a reset connection): while this rank
  // waits for Start it says Ready again every second; the coordinator answers a second Ready
  // with the Start it already sent.
  void resendReady(SteadyClock::time_point now) {
    if (!job_ || job_->finished.load()) return;
    std::optional<Ready> again;
    {
      std::lock_guard<std::mutex> lock(job_->mu);
      if (!job_->ready || job_->started || job_->aborted) return;
      if (now - job_->readySentAt < kResendAfter) return;
      job_->readySentAt = now;
      again = job_->ready;
    }
    if (opt_.verbose)
      logLine("no Start yet for run " + std::to_string(again->runId) + "; Ready again");
    send(*again);
  }

  // The coordinator misses this rank's results of run `epoch` (lost on the way): says them
  // again, once the outbox has sent everything queued before them.
  void resendResults(uint64_t epoch) {
    if (!job_ || job_->cfg.epoch != epoch || !job_->reported.load()) return;
    flushOutbox(true);
    std::vector<Message> again;
    {
      std::lock_guard<std::mutex> lock(job_->mu);
      again = job_->results;
    }
    if (opt_.verbose) {
      logLine("the coordinator misses the results of run " + std::to_string(job_->cfg.runId) +
              "; sending " + std::to_string(again.size()) + " message(s) again");
    }
    for (const Message& m : again) sendFrames(encode(m));
  }

  // Test-only: whether to lose this message (the first of a type named in the environment).
  bool lost(MsgType t) {
    if (losses_.erase(t) == 0) return false;
    logLine("test: losing the first " + std::string(typeName(t)) + " (" + kLoseControlEnv + ")");
    return true;
  }

  void sendPing() {
    Ping p;
    p.seq = pingSeq_++;
    p.t0Ns = steadyNowNs();
    pingSentAt_ = SteadyClock::now();
    pingOutstanding_ = true;
    send(p);
  }

  // Sends what the run thread queued, in order, and ships telemetry only when it must: before
  // the message that ends a run (RunDone, RunFailed: the coordinator has every event of a run
  // when it learns the run ended), when the ring holds kShipWhenHeld records (room for the
  // rank to go on recording), when records have waited kLiveInterval (a live view's
  // refresh), or when `force`. Iteration results do not wait for the telemetry
  // recorded before them: shipping it while the ranks run is the work that disturbs them
  // (docs/telemetry.md, "Shipping at the end"), and a run short enough for its records to
  // fit in the ring ships them after its last timed iteration.
  void flushOutbox(bool force) {
    if (!job_) return;
    RunJob& j = *job_;
    Outbox::Taken t = j.out.take();
    for (const auto& [position, msg] : t.msgs) {
      if (std::holds_alternative<RunDone>(msg) || std::holds_alternative<RunFailed>(msg)) {
        shipTelemetry(j, position);
      }
      if (lost(typeOf(msg))) continue;
      sendFrames(encode(msg));
      if (opt_.verbose) logLine("sent " + describe(msg));
    }
    if (j.ring != nullptr) {
      j.ring->populateAhead();
      const uint64_t written = j.ring->written();
      const uint64_t held = written - j.ring->read();
      const auto now = SteadyClock::now();
      if (held == 0) heldSince_.reset();
      if (held > 0 && !heldSince_) heldSince_ = now;
      const bool due =
          force || held >= kShipWhenHeld || (heldSince_ && now - *heldSince_ >= kLiveInterval);
      if (due) shipTelemetry(j, written);
    }
    if (!t.msgs.empty()) j.out.markSent(t.lastMsg);
  }

  // Sends the ring's records before position `upTo` as they lie, in batches of at most
  // kMaxEventsPerBatch, and gives their room back to the rank.
  void shipTelemetry(RunJob& j, uint64_t upTo) {
    TelemetryRing* ring = j.ring;
    if (ring == nullptr) return;
    const uint64_t target = std::min(upTo, ring->written());
    while (ring->read() < target) {
      const uint64_t end = std::min<uint64_t>(target, ring->read() + kMaxEventsPerBatch);
      const TelemetryRing::View v = ring->peek(end);
      TelemetryBatch b;
      b.epoch = j.cfg.epoch;
      b.rank = j.rank;
      b.runId = j.cfg.runId;
      b.seq = j.batchSeq++;
      b.dropped = ring->dropped();
      sendFrames(b.encodeRecords(v.first, v.second));
      ring->release(end);
    }
    heldSince_.reset();
  }

  // Tells the run thread to stop and returns at once: every phase of a run looks at the
  // abort within milliseconds, and the loop reaps the thread (reapJob) while it heartbeats.
  void abortJob() {
    if (!job_ || job_->finished.load()) return;
    if (!job_->abortedAt) job_->abortedAt = SteadyClock::now();
    job_->abort();
  }

  // A run thread still running kStopLimit after its abort is stuck beyond repair (no phase
  // takes that long to stop): the process ends rather than run the next run beside it.
  void checkStuckJob(SteadyClock::time_point now) const {
    if (!job_ || !job_->abortedAt || job_->finished.load()) return;
    if (now - *job_->abortedAt < kStopLimit) return;
    logLine("the run thread of run " + std::to_string(job_->cfg.runId) + " did not stop within " +
            std::to_string(kStopLimit.count()) + " s of its abort; exiting hard");
    std::_Exit(5);
  }

  // Once the run thread has finished: sends what it queued and joins it.
  void retireJob() {
    if (!job_ || !job_->finished.load()) return;
    flushOutbox(true);
    if (!job_->th.joinable()) return;
    job_->th.join();
    if (opt_.verbose && job_->abortedAt && job_->reportedAt >= *job_->abortedAt) {
      // Reported: the run's RunFailed was queued; stopped: the thread had also closed its
      // data plane and given its buffers back.
      const auto msSince = [&](SteadyClock::time_point t) {
        return std::chrono::duration<double, std::milli>(t - *job_->abortedAt).count();
      };
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "run %llu: the run thread stopped %.1f ms after the abort (reported after "
                    "%.1f ms)",
                    static_cast<unsigned long long>(job_->cfg.runId), msSince(job_->finishedAt),
                    msSince(job_->reportedAt));
      logLine(buf);
    }
  }

  // Every loop pass: retires a finished run thread, then starts the run held for it.
  void reapJob() {
    retireJob();
    if (!pending_ || (job_ && !job_->finished.load())) return;
    PendingRun p = std::move(*pending_);
    pending_.reset();
    startJob(p.cfg, p.epoch);
    if (p.aborted) abortJob();
  }

  // For leaving: aborts the run and waits until its thread has finished (it stops within
  // milliseconds; one that does not within kLeaveWait ends the process). Joins nothing.
  void stopJobNow() {
    pending_.reset();
    if (!job_ || !job_->th.joinable()) return;
    abortJob();
    const auto deadline = SteadyClock::now() + kLeaveWait;
    while (!job_->finished.load() && SteadyClock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(2));
    }
    if (!job_->finished.load()) {
      logLine("the run thread did not stop within " + std::to_string(kLeaveWait.count()) +
              " ms; exiting hard");
      std::fflush(stderr);
      std::_Exit(5);
    }
  }

  // Handles one message; returns an exit code when the worker must leave.
  std::optional<int> handle(const std::vector<zmq::message_t>& frames) {
    if (frames.size() != 2) {
      logLine("ignored a control message of " + std::to_string(frames.size()) +
              " frames from the coordinator");
      return std::nullopt;
    }
    auto env = decode(ByteView(static_cast<const uint8_t*>(frames[0].data()), frames[0].size()),
                      ByteView(static_cast<const uint8_t*>(frames[1].data()), frames[1].size()));
    if (!env) {
      logLine("ignored a malformed control message: " + env.error().message());
      return std::nullopt;
    }
    if (opt_.verbose) logLine("received " + describe(env->message));
    if (lost(typeOf(env->message))) return std::nullopt;
    const uint64_t epoch = env->epoch();
    return std::visit([&](const auto& m) { return on(m, epoch); }, env->message);
  }

  bool announces() const { return opt_.verbose || opt_.parentPid == 0; }

  std::optional<int> on(const Welcome& w, uint64_t) {
    if (!welcomed_) {
      // A worker started by hand says where it joined; a coordinator's own child stays quiet
      // so that its lines do not mix into the coordinator's output.
      if (announces()) logLine("joined " + opt_.connect + " as " + name_);
    } else if (opt_.verbose && (w.rank != rank_ || w.worldSize != world_)) {
      logLine("now rank " + std::to_string(w.rank) + " of " + std::to_string(w.worldSize));
    }
    welcomed_ = true;
    rank_ = w.rank;
    world_ = w.worldSize;
    hbInterval_ = milliseconds(w.heartbeatIntervalMs);
    liveness_ = static_cast<int>(w.heartbeatLiveness);
    return std::nullopt;
  }

  std::optional<int> on(const Pong& p, uint64_t) {
    const int64_t t3 = steadyNowNs();
    if (!pingOutstanding_ || p.seq + 1 != pingSeq_) return std::nullopt;
    pingOutstanding_ = false;
    samples_.push_back(clockSample(p, t3));
    if (auto best = bestClockSample(samples_)) offsetNs_ = best->offsetNs;
    if (samples_.size() < kPings) sendPing();
    return std::nullopt;
  }

  std::optional<int> on(const Heartbeat& h, uint64_t) {
    if (h.wantReport) resendResults(h.epoch);
    return std::nullopt;
  }

  std::optional<int> on(const RunConfig& c, uint64_t epoch) {
    // The coordinator says a RunConfig again when this worker's heartbeats show it missed
    // it; one that did arrive (running, or held until the old run thread ends) is not run twice.
    if ((job_ && job_->cfg.epoch == epoch) || (pending_ && pending_->epoch == epoch)) {
      return std::nullopt;
    }
    if (pending_ && opt_.verbose) {
      logLine("run " + std::to_string(pending_->cfg.runId) + " never started: run " +
              std::to_string(c.runId) + " replaces it");
    }
    pending_.reset();
    if (job_ && !job_->finished.load()) {
      if (!job_->reported.load() && !job_->abortedAt) {
        logLine("RunConfig for run " + std::to_string(c.runId) + " while run " +
                std::to_string(job_->cfg.runId) + " is active: aborting the old run");
      }
      // The old thread may also just be releasing its buffers: the new run starts once it
      // has finished (reapJob), and the loop heartbeats meanwhile.
      abortJob();
      if (opt_.verbose) {
        logLine("run " + std::to_string(c.runId) + " starts once the thread of run " +
                std::to_string(job_->cfg.runId) + " has finished");
      }
      pending_ = PendingRun{c, epoch, false};
      return std::nullopt;
    }
    retireJob();
    startJob(c, epoch);
    return std::nullopt;
  }

  // Gives the job the session's telemetry ring, emptied; "" or why there is none. Mapped at
  // the first run that records, then kept: the previous run's thread has finished and its
  // records were sent (retireJob), so the ring is free to empty.
  std::string attachRing(RunJob& j) {
    try {
      if (!ring_) ring_ = std::make_unique<TelemetryRing>(kRingRecords);
    } catch (const std::exception& e) {
      return std::string("no memory for the telemetry ring: ") + e.what();
    }
    ring_->reset();
    j.ring = ring_.get();
    j.out.setRing(j.ring);
    return {};
  }

  // Starts the run thread for a RunConfig; no other run thread may be running.
  void startJob(const RunConfig& c, uint64_t epoch) {
    job_ = std::make_unique<RunJob>();
    RunJob& j = *job_;
    j.cfg = c;
    j.cfg.epoch = epoch;
    j.rank = rank_;
    j.myHost = host_;
    j.coordinatorHost = tcpHostOf(opt_.connect);
    j.backend = opt_.backend;
    j.device = opt_.device;
    j.offsetNs = offsetNs_;
    j.corruption = corruption_;
    j.stallAt = std::exchange(stall_, std::nullopt);
    j.verbose = opt_.verbose;
    j.out.setWakeup(&wake_);
    j.reserveResults(c.iterations);
    std::string refused;
    if (!welcomed_ || rank_ < 0 || rank_ >= c.worldSize) {
      refused = "RunConfig for a world of " + std::to_string(c.worldSize) +
                " but this worker has rank " + std::to_string(rank_);
    } else if (c.telemetry != TelemetryLevel::Off) {
      refused = attachRing(j);
    }
    if (!refused.empty()) {
      RunFailed f;
      f.epoch = epoch;
      f.rank = std::max(rank_, 0);
      f.reason = refused;
      j.postResult(f);
      j.finished.store(true);
      return;
    }
    j.th = std::thread([&j] { runJobMain(j); });
  }

  std::optional<int> on(const Start& s, uint64_t epoch) {
    if (!job_ || job_->cfg.epoch != epoch) {
      logLine("ignored Start for epoch " + std::to_string(epoch) + " (no such run)");
      return std::nullopt;
    }
    std::lock_guard<std::mutex> lock(job_->mu);
    job_->endpoints = s.endpoints;
    job_->devices = s.devices;
    job_->started = true;
    job_->cv.notify_all();
    return std::nullopt;
  }

  std::optional<int> on(const Abort& a, uint64_t epoch) {
    if (job_ && job_->cfg.epoch == epoch) {
      abortJob();
    } else if (pending_ && pending_->epoch == epoch) {
      pending_->aborted = true;  // it starts aborted, and its RunFailed acknowledges this
    } else if (opt_.verbose) {
      logLine("ignored Abort for epoch " + std::to_string(epoch) + ": " + a.reason);
    }
    return std::nullopt;
  }

  std::optional<int> on(const Shutdown& s, uint64_t) {
    if (announces()) {
      logLine("shutdown requested" + (s.reason.empty() ? std::string() : ": " + s.reason));
    }
    return 0;
  }

  std::optional<int> on(const Log& l, uint64_t) {
    logLine(std::string("coordinator ") + std::string(toString(l.level)) + ": " + l.text);
    return std::nullopt;
  }

  // Types only a worker sends.
  template <class M>
  std::optional<int> on(const M& m, uint64_t) {
    logLine("ignored " + std::string(typeName(typeOf(Message(m)))) + " from the coordinator");
    return std::nullopt;
  }

  int leave(int code) {
    stopJobNow();
    retireJob();
    sock_.close();
    if (opt_.verbose) logLine("leaving with exit code " + std::to_string(code));
    return code;
  }

  static constexpr size_t kPings = 5;
  static constexpr milliseconds kResendAfter{1000};
  // Telemetry a rank may record ahead of this thread (2^18 records of 48 bytes, 12 MiB):
  // beyond it, records are dropped and counted (docs/telemetry.md, "The bound").
  static constexpr size_t kRingRecords = size_t{1} << 18;
  // Telemetry is shipped during a run once a quarter of the ring is held (at a million
  // records a second, every 65 ms, with 196 ms of room left for this thread to be late), or
  // once records have waited this long: about what a live view is behind at most.
  static constexpr size_t kShipWhenHeld = kRingRecords / 4;
  static constexpr milliseconds kLiveInterval{250};

  WorkerOptions opt_;
  std::string host_;
  int64_t pid_;
  std::string name_;
  zmq::context_t ctx_{1};
  zmq::socket_t sock_;
  Wakeup wake_;  // raised by the run thread when it queues a message
  std::optional<Corruption> corruption_;
  std::set<MsgType> losses_;                       // ARL_TEST_LOSE_CONTROL
  std::optional<std::pair<int, uint32_t>> stall_;  // ARL_TEST_STALL

  milliseconds hbInterval_;
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
  std::unique_ptr<RunJob> job_;
  // A RunConfig that waits for the previous run thread to finish.
  struct PendingRun {
    RunConfig cfg;
    uint64_t epoch = 0;
    bool aborted = false;  // an Abort for its epoch came meanwhile
  };
  std::optional<PendingRun> pending_;
};

}  // namespace

int runWorker(const WorkerOptions& opt) {
  try {
    WorkerSession session(opt);
    return session.run();
  } catch (const std::exception& e) {
    logLine(std::string("fatal: ") + e.what());
    return 1;
  }
}

}  // namespace arl
