// The run thread (runtime/run_job.h): a run's schedule, data plane and iterations, and the
// Outbox that carries what it reports to the control thread.
//
// A run of the lab's own schedule: generate and annotate the schedule, allocate the buffers
// once and fill the inputs (RankRun), bind the data plane (shared memory when every rank is
// on this host and in its pid namespace, else ZeroMQ over ipc:// or tcp://) and post Ready
// with its endpoint; on Start connect to every peer, run the warm-up and timed iterations
// (their times in IterationResults of up to 10 ms each, ResultBatch), close the data plane
// and post RunDone. A library run (nccl-ring, nccl-tree) has the library's communicator
// instead of a schedule and a data plane (runLibraryJob). Any failure posts RunFailed first,
// then aborts the data plane, so that the coordinator hears the cause before the consequences.
#include "runtime/run_job.h"
#include "runtime/run_job_steps.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string_view>

#include "backend/registry.h"
#include "base/errors.h"
#include "coord_wakeup.h"
#include "exec/collective_library.h"
#include "exec/rank_run.h"
#include "exec/telemetry_ring.h"
#include "runtime/control_store.h"
#include "runtime/process.h"
#include "runtime/worker_log.h"
#include "schedule/generators.h"
#include "schedule/msccl_import.h"
#include "schedule/verifier.h"
#include "transport/peer_pairing.h"
#include "transport/peer_transport.h"
#include "transport/shm/shm_transport.h"
#include "transport/split_transport.h"
#include "transport/stale_owner.h"
#include "transport/zmq/zmq_transport.h"

namespace arl {

// ---- Outbox ----------------------------------------------------------------------------------

uint64_t Outbox::post(Message m, bool wake) {
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

void Outbox::markSent(uint64_t n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    sent_ = std::max(sent_, n);
  }
  sentCv_.notify_all();
}

bool Outbox::waitSent(uint64_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return sentCv_.wait_for(lock, timeout, [&] { return sent_ >= n; });
}

Outbox::Taken Outbox::take() {
  Taken t;
  std::lock_guard<std::mutex> lock(mu_);
  t.msgs.swap(msgs_);
  t.lastMsg = posted_;
  return t;
}

// ---- RunJob ----------------------------------------------------------------------------------

RunJob::~RunJob() {
  if (th.joinable()) th.join();
}

void RunJob::reserveResults(uint32_t iterations) {
  constexpr size_t kMaxReserved = 1024;  // 176 KiB of Messages
  const size_t n = std::min<size_t>(size_t{iterations} + 2, kMaxReserved);
  results.resize(n);  // constructs, so writes, every element: the pages are faulted in
  results.clear();    // and stay, with the capacity
}

void RunJob::launch() {
  th = std::thread([this] { runJobMain(*this); });
}

void RunJob::start(std::vector<std::string> rankEndpoints,
                   std::vector<PeerDeviceInfo> rankDevices) {
  std::lock_guard<std::mutex> lock(mu);
  endpoints = std::move(rankEndpoints);
  devices = std::move(rankDevices);
  started = true;
  cv.notify_all();
}

void RunJob::abort() {
  std::lock_guard<std::mutex> lock(mu);
  aborted = true;
  cancelled.store(true);
  if (dp != nullptr) dp->abort();
  cv.notify_all();
}

void RunJob::answerStore(StoreValue v) {
  std::lock_guard<std::mutex> lock(mu);
  storeAnswer = std::move(v);
  cv.notify_all();
}

uint64_t RunJob::postResult(Message m, bool wake) {
  {
    std::lock_guard<std::mutex> lock(mu);
    results.push_back(m);
  }
  return out.post(std::move(m), wake);
}

namespace jobsteps {

using std::chrono::milliseconds;

// How long a failing rank waits for its RunFailed to leave before it aborts its data plane.
constexpr milliseconds kReportFirst{200};

// Generates this run's schedule, annotated with provenance when chunk telemetry asks for it.
// Generators are pure functions of plain data and do not look at `cancel`: with the default
// 1 MiB slice they take milliseconds even at 256 MiB; the smallest slices the limits accept
// make them take seconds, and an abort then waits for the step under way to end.
Schedule runSchedule(const RunConfig& c, int rank, const std::atomic<bool>& cancel) {
  if (cancel.load()) throw PeerError(rank, -1, -1, "run aborted before it started");
  GenParams p;
  p.collective = c.collective;
  // The world holds the collective's ranks and the workers that serve them (the switch).
  p.nranks = c.worldSize - (c.scheduleXml.empty() ? helperWorkers(c.algorithm) : 0);
  p.count = c.count;
  p.sliceElems = c.sliceBytes / dtypeSize(c.dtype);
  p.root = c.root;
  p.ranksPerHost = static_cast<int>(c.ranksPerHost);
  p.radix = static_cast<int>(c.radix);
  p.ring.assign(c.ringOrder.begin(), c.ringOrder.end());
  p.torusDims.assign(c.torusDims.begin(), c.torusDims.end());
  p.window = c.window;
  Schedule s;
  try {
    s = c.scheduleXml.empty()
            ? generate(c.algorithm, p)
            : mscclSchedule(parseMscclProgram(c.scheduleXml, c.algorithm), p.count, p.sliceElems);
  } catch (const GenError& e) {
    throw PeerError(rank, -1, -1, std::string("schedule refused: ") + e.what());
  } catch (const MscclImportError& e) {
    throw PeerError(rank, -1, -1, std::string("schedule refused: ") + e.what());
  }
  if (cancel.load()) throw PeerError(rank, -1, -1, "run aborted while generating its schedule");
  if (c.telemetry == TelemetryLevel::Chunks && c.worldSize <= kMaxRanks) {
    const VerifyResult v = annotate(s);
    if (!v.ok) throw PeerError(rank, -1, -1, "schedule failed verification: " + v.message);
  }
  return s;
}

void recordRun(RunJob& j, uint32_t nsteps) {
  if (j.flight == nullptr) return;
  const RunConfig& c = j.cfg;
  FlightRun run;
  run.runId = c.runId;
  run.algorithm = c.algorithm;
  run.collective = c.collective;
  run.dtype = c.dtype;
  run.count = c.count;
  run.nranks = c.worldSize;
  run.sliceBytes = c.sliceBytes;
  run.nsteps = nsteps;
  j.flight->setRun(run);
}

FlightRecord flightRecord(const RunJob& j) {
  FlightRecord m;
  m.epoch = j.cfg.epoch;
  m.rank = j.rank;
  m.recorded = j.flight->recorded();
  m.records = j.flight->records();
  return m;
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
    if (j.faults.stall && j.faults.stall->rank == j.rank && j.faults.stall->step == op.step) {
      j.faults.stall.reset();
      workerLog("test: rank " + std::to_string(j.rank) + " stops before step " +
                std::to_string(op.step) + " (" + kStallEnv + ")");
      std::unique_lock<std::mutex> lock(j.mu);
      j.cv.wait(lock, [&] { return j.aborted; });
      throw PeerError(j.rank, -1, op.step, "run aborted");
    }
  };
  ro.exec.progress = &j.progress;
  ro.exec.flight = j.flight;
  ro.recordEveryOther = j.recordEveryOther;
  ro.inPlace = c.inPlace;
  ro.warmup = c.warmup;
  ro.iterations = c.iterations;
  ro.check = c.check;  // 0 with random data (RunRequest::checkedIterations, check(RunConfig))
  ro.randomData = c.randomData;
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

// Each ring holds `inflight` + 2 of the largest messages this rank receives, or the schedule's
// window + 2 when that is more: a windowed ring's sender puts a window of messages on a channel
// before it reads one (Schedule::window), and deadlocks on a ring that holds fewer.
ShmOptions shmOptions(const Schedule& s, int rank, const RunConfig& c) {
  uint64_t maxElems = 0;
  for (const auto& prog : s.ranks) {
    for (const Op& op : prog) {
      if (op.sendPeer == rank) maxElems = std::max<uint64_t>(maxElems, op.count);
    }
  }
  ShmOptions so = shmWaitsFromEnv(ShmOptions{});
  so.ringBytes =
      shmRingBytes(maxElems * dtypeSize(c.dtype), static_cast<int>(std::max(c.inflight, s.window)));
  so.shaping = c.shaping;
  return so;
}

// Whether the run's hosts (RunConfig::hosts) are all this worker's.
bool everyRankOnThisHost(const RunJob& j) {
  const std::vector<std::string>& hosts = j.cfg.hosts;
  return hosts.empty() || std::all_of(hosts.begin(), hosts.end(),
                                      [&](const std::string& h) { return h == j.myHost; });
}

// Phase 1 of the data plane: creates and binds it; returns the endpoint for Ready.
std::string bindDataPlane(RunJob& j, const Schedule& s, RunDataPlane& plane) {
  return bindDataPlaneFor(j, plane, dataPlanePeers(s, j.rank), shmOptions(s, j.rank, j.cfg));
}

// Which ranks this one reaches over shared memory in a run on several hosts, with the
// automatic choice or tcp: the ranks of its own host (sameHostPeers). Empty when one plane
// carries every pair: one host, another pid namespace or an explicit zmq or shm.
std::vector<bool> shmPeersAcrossHosts(const RunJob& j, bool oneHost) {
  const RunConfig& c = j.cfg;
  if (oneHost) return {};
  if (c.dataPlane != DataPlaneKind::Auto && c.dataPlane != DataPlaneKind::Tcp) return {};
  if (c.hosts.size() != static_cast<size_t>(c.worldSize)) return {};
  std::vector<uint64_t> namespaces = c.pidNamespaces;
  if (namespaces.size() != c.hosts.size()) namespaces.clear();
  return sameHostPeers(c.hosts, namespaces, j.rank);
}

// `ranks` split by `viaShm`: those it marks, then the others.
std::pair<std::vector<int>, std::vector<int>> splitRanks(const std::vector<int>& ranks,
                                                         const std::vector<bool>& viaShm) {
  std::pair<std::vector<int>, std::vector<int>> out;
  for (int r : ranks) (viaShm[static_cast<size_t>(r)] ? out.first : out.second).push_back(r);
  return out;
}

// tcp:// is open to every machine that reaches the port: the run's keys keep it to the run's
// members (CURVE on zmq, the handshake on tcp). ipc:// sits in a directory only this user can
// open (ZmqDataPlane::bind).
void keepToMembers(const RunJob& j, BindOptions& bo) {
  if (bo.kind != BindOptions::Kind::Tcp || j.cfg.dataKeys.empty()) return;
  bo.curveSecretKey = j.dataSecretKey;
  bo.curvePeerKeys = j.cfg.dataKeys;
}

// Creates the network plane of `c`'s choice: tcp for tcp and auto, zmq for zmq; the Transport.
// Auto takes tcp since it measured faster than ZeroMQ at every size on this machine's
// loopback (docs/dataplane.md, "The tcp plane"): a 16-byte round trip 13.6 us against 134,
// 4 KiB 18.6 against 128, 16 MiB messages 3.7 GB/s against 0.46.
Transport* makeNetworkPlane(const RunConfig& c, int rank, RunDataPlane& plane) {
  if (c.dataPlane == DataPlaneKind::Tcp || c.dataPlane == DataPlaneKind::Auto) {
    plane.tcp = std::make_unique<TcpDataPlane>(rank, c.worldSize);
    // Small messages made while a batch of arrived ones is handled leave together
    // (tcp_transport.h, "Held sends"): every user of a run's plane (the executor, the
    // asynchronous parameter server) waits only on the plane itself or after the executor's
    // reclaimAll(). ARL_TCP_HOLD_SENDS=0 turns them off, and =queued ignores the executor's
    // sendFollows() hints, to measure what each saves (docs/hosts.md).
    const char* hold = std::getenv("ARL_TCP_HOLD_SENDS");
    plane.tcp->holdSmallSends(hold == nullptr || std::string_view(hold) != "0");
    plane.tcp->heedSendFollows(hold == nullptr || std::string_view(hold) != "queued");
    return plane.tcp.get();
  }
  plane.zmq = std::make_unique<ZmqDataPlane>(rank, c.worldSize);
  return plane.zmq.get();
}

// Binds the network plane that makeNetworkPlane made; its endpoint.
std::string bindNetworkPlane(const RunJob& j, RunDataPlane& plane, BindOptions bo) {
  keepToMembers(j, bo);
  // ZeroMQ's queues hold a windowed ring's window of messages a channel (Schedule::window).
  const int window = static_cast<int>(std::min<uint32_t>(j.cfg.window, kMaxInflight));
  bo.sndHwm = std::max(bo.sndHwm, window);
  bo.rcvHwm = std::max(bo.rcvHwm, window);
  bo.shaping = j.cfg.shaping;
  bo.clockOffsetNs = j.offsetNs;
  return plane.tcp ? plane.tcp->bind(bo) : plane.zmq->bind(bo);
}

// Binds both planes of a run on several hosts: shared memory for the peers of this host,
// the network (tcp:// of ZeroMQ or of the tcp plane) for the others, each only when some
// peer needs it; returns the joined endpoint.
std::string bindSplitDataPlane(RunJob& j, RunDataPlane& plane, const ShmOptions& shm) {
  const RunConfig& c = j.cfg;
  const auto [nearSend, farSend] = splitRanks(plane.peers.sendTo, plane.viaShm);
  const auto [nearRecv, farRecv] = splitRanks(plane.peers.recvFrom, plane.viaShm);
  const bool needShm = !nearSend.empty() || !nearRecv.empty();
  const bool needNet = !farSend.empty() || !farRecv.empty() || !needShm;
  if (needShm) plane.shm = std::make_unique<ShmDataPlane>(j.rank, c.worldSize);
  Transport* net = needNet ? makeNetworkPlane(c, j.rank, plane) : nullptr;
  if (needShm && needNet) {
    std::function<void()> flushFar;
    if (plane.tcp) flushFar = [tcp = plane.tcp.get()] { tcp->flush(); };
    plane.split =
        std::make_unique<SplitTransport>(*plane.shm, *net, plane.viaShm, std::move(flushFar));
    plane.dp = plane.split.get();
  } else {
    plane.dp = needShm ? static_cast<Transport*>(plane.shm.get()) : net;
  }
  {
    std::lock_guard<std::mutex> lock(j.mu);
    if (j.aborted) throw PeerError(j.rank, -1, -1, "run aborted before it started");
    j.dp = plane.dp;
  }
  std::string shmEndpoint, zmqEndpoint;
  if (needNet) zmqEndpoint = bindNetworkPlane(j, plane, tcpBindOptions(j));
  if (needShm) {
    try {
      shmEndpoint = plane.shm->bind(shm, nearRecv);
    } catch (const ConfigError& e) {
      throw PeerError(j.rank, -1, -1, e.what());
    }
  }
  return joinEndpoints(shmEndpoint, zmqEndpoint);
}

std::string bindDataPlaneFor(RunJob& j, RunDataPlane& plane, DataPlanePeers peers,
                             const ShmOptions& shm) {
  const RunConfig& c = j.cfg;
  const int rank = j.rank;
  const bool oneHost = everyRankOnThisHost(j);
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
  plane.peers = std::move(peers);
  if (plane.peerMemory != nullptr || plane.bothWays) {
    std::vector<int> both = plane.peers.sendTo;
    both.insert(both.end(), plane.peers.recvFrom.begin(), plane.peers.recvFrom.end());
    std::sort(both.begin(), both.end());
    both.erase(std::unique(both.begin(), both.end()), both.end());
    plane.peers.sendTo = both;
    plane.peers.recvFrom = both;
  }
  plane.viaShm = shmPeersAcrossHosts(j, oneHost);
  if (!plane.viaShm.empty()) return bindSplitDataPlane(j, plane, shm);
  if (useShm) {
    plane.shm = std::make_unique<ShmDataPlane>(rank, c.worldSize);
    plane.dp = plane.shm.get();
  } else {
    plane.dp = makeNetworkPlane(c, rank, plane);
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
    // The tcp plane on one host listens on loopback.
    if (plane.tcp) bo.kind = BindOptions::Kind::Tcp;
    return bindNetworkPlane(j, plane, bo);
  }
  try {
    return plane.shm->bind(shm, plane.peers.recvFrom);
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

// Connects each plane of a run on several hosts to its peers, at their endpoints of its
// scheme.
void connectSplitDataPlane(RunDataPlane& plane, const std::vector<std::string>& endpoints) {
  const auto [nearSend, farSend] = splitRanks(plane.peers.sendTo, plane.viaShm);
  auto ofScheme = [&](std::string_view scheme) {
    std::vector<std::string> out;
    for (const std::string& e : endpoints) out.push_back(endpointOfScheme(e, scheme));
    return out;
  };
  if (plane.shm) plane.shm->connect(ofScheme("shm://"), nearSend);
  if (plane.zmq) plane.zmq->connect(ofScheme("tcp://"), farSend);
  if (plane.tcp) {
    const auto [nearRecv, farRecv] = splitRanks(plane.peers.recvFrom, plane.viaShm);
    plane.tcp->connect(ofScheme("tcp://"), partnersOf({farSend, farRecv}));
  }
}

// Phase 2: waits for Start, which carries every rank's endpoint, and connects.
void connectDataPlane(RunJob& j, RunDataPlane& plane) {
  const int rank = j.rank;
  const std::vector<std::string> endpoints = awaitStart(j);
  // Connecting maps the receivers' segments, and on shared memory touches every page of this
  // rank's rings there: set-up work alone, whose CPU time the stall watch counts as progress.
  j.progress.setPhase(RunPhase::SettingUp);
  try {
    if (plane.viaShm.empty()) {
      if (plane.shm) plane.shm->connect(endpoints, plane.peers.sendTo);
      if (plane.zmq) plane.zmq->connect(endpoints, plane.peers.sendTo);
      if (plane.tcp) plane.tcp->connect(endpoints, partnersOf(plane.peers));
    } else {
      connectSplitDataPlane(plane, endpoints);
    }
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

// Runs the warm-up, timed and further checked iterations, reporting the timed ones in batches
// (ResultBatch), the last of them before any further checked one runs; returns the run's
// #wrong, over every iteration checked. `iteration` follows the run for RunFailed: the timed
// iteration, else -1 (j.checkIteration says which of the check's iterations it is in).
// With `shm`, the rank drains it (ShmDataPlane::drain) before it checks its output: the check
// takes milliseconds at large sizes, which peers still in their last iteration would wait out.
uint64_t runIterations(RunJob& j, const std::function<void(const RankRunHooks&)>& iterate,
                       ShmDataPlane* shm, int64_t& iteration) {
  const RunConfig& c = j.cfg;
  uint64_t wrongTotal = 0;
  ResultBatch batch(c, j.rank);
  RankRunHooks hooks;
  hooks.beforeIteration = [&](uint32_t it) {
    const IterationPlace place = iterationPlace(it, c.warmup, c.iterations);
    const bool isTimed = place.kind == IterationPlace::Kind::Timed;
    const bool isChecked = place.kind == IterationPlace::Kind::Checked;
    iteration = isTimed ? static_cast<int64_t>(place.index) : -1;
    j.iteration.store(isTimed ? place.index : 0);
    j.checkIteration.store(isChecked ? place.index : 0);
    j.step.store(0);
    return true;
  };
  hooks.beforeCheck = [&] {
    if (shm != nullptr) shm->drain();
    if (j.verbose) workerLog("run " + std::to_string(c.runId) + ": checking the output");
  };
  hooks.afterTimed = [&](const TimedIteration& t) {
    wrongTotal += t.wrong.value_or(0);
    if (batch.add(t, t.index + 1 == c.iterations)) batch.post(j);
  };
  hooks.afterChecks = [&](uint64_t wrong) { wrongTotal += wrong; };
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
  RunFailed f;
  if (const auto* pe = dynamic_cast<const PeerError*>(&e)) {
    f = RunFailed::from(*pe, j.cfg.epoch, iteration);
  } else {
    f.epoch = j.cfg.epoch;
    f.rank = j.rank;
    f.step = j.running.load() ? static_cast<int64_t>(j.step.load()) : -1;
    f.iteration = iteration;
    f.reason = e.what();
  }
  f.checkIteration = j.checkIteration.load();
  if (f.checkIteration > 0) f.checkIterations = j.cfg.check;
  return f;
}

// The RunDone of a run that completed with `wrong` elements wrong; `moreDropped`: events lost
// before they reached the ring (a library's own reporting).
void postDone(RunJob& j, uint64_t wrong, uint64_t moreDropped = 0, const RankRun* run = nullptr) {
  RunDone done;
  done.epoch = j.cfg.epoch;
  done.rank = j.rank;
  done.wrongTotal = wrong;
  // Random data is not checked: the digest of the output says what the rank holds.
  if (j.cfg.randomData && run != nullptr)
    done.outputDigest = run->outputDigest(&done.outputSample, kMaxOutputSampleBytes);
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
    if (p > j.rank && !why.empty() && c.cudaIpc) workerLog(why);
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
      const uint32_t loans = std::max(PeerMemoryTransport::kDefaultLoansPerPeer,
                                      std::max(j.cfg.inflight, j.cfg.window) + 2);
      lending.emplace(*plane.dp, *plane.peerMemory, std::move(pairing), loans);
    }
  }
  Transport& inner = lending ? static_cast<Transport&>(*lending) : *plane.dp;
  std::optional<CorruptingTransport> corrupting;
  if (j.faults.corruption && j.faults.corruption->rank == j.rank) {
    corrupting.emplace(inner, j.faults.corruption->field);
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
  postDone(j, wrong, 0, &run);
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
  spec.timed = c.iterations;
  ControlStore store(j);
  spec.store = &store;
  spec.hostAddress = everyRankOnThisHost(j) ? "127.0.0.1" : tcpBindOptions(j).tcpAdvertiseHost;
  spec.timeout = j.livenessBound;
  // Declared in this order so that, on every path, the library leaves its communicator (an
  // abort after a failure: no kernel of it is left reading the buffers) before RankRun frees
  // the buffers, and the backend goes last.
  std::unique_ptr<Backend> backend;
  std::unique_ptr<RankRun> run;
  std::unique_ptr<CollectiveLibrary> lib = makeCollectiveLibrary(spec);
  const Schedule s = libraryShape(c.algorithm, c.collective, c.worldSize, c.count, c.root);
  recordRun(j, 0);  // a library's collective is one call: no steps of ours to follow
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
    postReady(j, j.rank == 0 ? lib->newBootstrap() : lib->memberEndpoint());
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
    workerLog("run " + std::to_string(c.runId) + ": " + std::string(algo.library) + " reported " +
              std::to_string(own.recorded) + " events of timed iterations (" +
              std::to_string(own.warmup) + " of untimed calls left out, " +
              std::to_string(own.unattributed) + " of no call, " + std::to_string(own.dropped) +
              " lost)");
  }
  postDone(j, wrong, own.dropped, run.get());
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
  recordRun(j, s.nsteps);
  RankRun run(s, j.rank, *backend, rankRunOptions(j));
  if (j.verbose) {
    const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
    char buf[96];
    std::snprintf(buf, sizeof buf, "run %llu: set up in %.1f ms",
                  static_cast<unsigned long long>(j.cfg.runId), ms);
    workerLog(buf);
  }
  try {
    runOnDataPlane(j, s, run, plane, iteration);
  } catch (const std::exception& e) {
    fail(e);
    plane.close();  // before `run` frees the buffers: zero-copy sends may still read them
  }
}

}  // namespace jobsteps

void runJobMain(RunJob& j) {
  using namespace jobsteps;
  int64_t iteration = -1;  // for RunFailed: -1 before the first timed iteration
  RunDataPlane plane;
  j.progress.setPhase(RunPhase::SettingUp);
  // The failure is reported first, so that the coordinator hears the cause before the
  // consequences and can abort the other ranks at once; then the data plane is aborted: a
  // failed run says no goodbye (its peers may be gone).
  const auto fail = [&](const std::exception& e) {
    RunFailed f = runFailed(j, e, iteration);  // names the step while `running` says one is
    j.running.store(false);
    // Ahead of the RunFailed: the coordinator holds the records when it counts the failure
    // acknowledged.
    if (j.flight != nullptr) j.out.post(flightRecord(j), false);
    j.progress.setPhase(RunPhase::Reported);
    j.reportedAt = SteadyClock::now();
    j.reported.store(true);
    const uint64_t n = j.postResult(std::move(f));
    // The abort lets this rank's peers fail too; their reports must not overtake the cause.
    j.out.waitSent(n, kReportFirst);
    if (plane.dp) plane.dp->abort();
  };
  try {
    if (j.cfg.train) {
      runTrainJob(j, plane, iteration, fail);
    } else if (const LibraryAlgorithm* algo = findLibraryAlgorithm(j.cfg.algorithm)) {
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

}  // namespace arl
