// The worker's control thread (runtime/worker_session.h).
#include "runtime/worker_session.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <utility>
#include <variant>
#include <zmq_addon.hpp>

#include "control_poll.h"
#include "exec/telemetry_ring.h"
#include "runtime/process.h"
#include "runtime/worker_log.h"
#include "transport/stale_owner.h"

namespace arl {

namespace {

using std::chrono::milliseconds;

// A run thread stops within milliseconds of its abort: every phase looks at it. One still
// running this long after is stuck beyond repair, and the worker exits (code 5).
constexpr std::chrono::seconds kStopLimit{30};
// How long leaving (Shutdown, a silent coordinator, a dead parent) waits for the run thread;
// below the coordinator's grace for local workers on shutdown (1 s).
constexpr milliseconds kLeaveWait{500};

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

}  // namespace

// The control socket's handshakes, read from its monitor (zmq_socket_monitor): a coordinator
// that refuses this worker does not answer its Hello, it fails the handshake, and the worker
// says why in one line instead of waiting out the join timeout. A CURVE server that cannot
// open the client's HELLO (the client used another server key) closes the connection, which
// the client sees as ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL, as it sees a handshake that timed
// out (ZMQ_HANDSHAKE_IVL); a ZAP refusal arrives as ZMQ_EVENT_HANDSHAKE_FAILED_AUTH with the
// handler's status code (RFC 27); mismatched mechanisms (keys on one side only) as
// ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL, ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH.
class HandshakeWatch final : public zmq::monitor_t {
 public:
  HandshakeWatch(zmq::socket_t& s, const WorkerOptions& opt) : opt_(opt) {
    init(s, "inproc://arl-control-monitor",
         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
             ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
  }
  // Why the coordinator refused this worker; nullopt while nothing failed.
  std::optional<std::string> refusal() {
    while (!refusal_ && check_event(0)) {
    }
    return refusal_;
  }

 private:
  bool curve() const { return !opt_.serverKey.empty(); }
  std::string at() const { return "the coordinator at " + opt_.connect; }

  void on_event_handshake_succeeded(const zmq_event_t&, const char*) override {}
  void on_event_handshake_failed_auth(const zmq_event_t& e, const char*) override {
    refusal_ = at() + " refused this worker's key " + keyFingerprint(opt_.keys.publicKey) +
               (e.value == 400 ? std::string(": it is not in the lab's allow-list (ask for ") +
                                     opt_.keys.publicKey + " to be added to its allowed_workers)"
                               : " (ZAP status " + std::to_string(e.value) + ")");
  }
  void on_event_handshake_failed_protocol(const zmq_event_t& e, const char*) override {
    if (e.value != ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
      refusal_ = "the handshake with " + at() + " failed (ZeroMQ protocol error " +
                 std::to_string(e.value) + ")" + (curve() ? serverKeyHint() : std::string());
    } else if (curve()) {
      refusal_ = at() + " does not use keys (it listens in the clear): join without --server-key";
    } else {
      refusal_ = at() +
                 " requires keys: run 'allreduce-lab keys', have the lab's owner add your public "
                 "key to its allowed_workers, and join with --server-key KEY (its join command "
                 "shows the key)";
    }
  }
  void on_event_handshake_failed_no_detail(const zmq_event_t&, const char*) override {
    if (curve()) refusal_ = "the CURVE handshake with " + at() + " failed" + serverKeyHint();
  }
  std::string serverKeyHint() const {
    return ": the server key " + keyFingerprint(opt_.serverKey) +
           " is not the lab's (compare --server-key with the key its join command shows)";
  }

  const WorkerOptions& opt_;
  std::optional<std::string> refusal_;
};

WorkerSession::WorkerSession(const WorkerOptions& opt)
    : opt_(opt),
      host_(opt.hostName.empty() ? hostName() : opt.hostName),
      pid_(static_cast<int64_t>(::getpid())) {
  name_ = opt.name.empty() ? host_ + ":" + std::to_string(pid_) : opt.name;
  setWorkerLogPrefix("allreduce-worker[" + std::to_string(pid_) + "]");
  hbInterval_ = opt.heartbeat;
  liveness_ = opt.liveness;
  corruption_ = corruptionFromEnv();
  losses_ = lossesFromEnv();
  stall_ = stallFromEnv();
  if (const char* v = std::getenv(kEveryOtherEnv)) recordEveryOther_ = std::string(v) == "1";
}

WorkerSession::~WorkerSession() {
  stopJobNow();
  if (job_ && job_->th.joinable()) job_->th.join();
}

bool WorkerSession::refused() {
  if (!handshake_ || welcomed_) return false;
  const auto why = handshake_->refusal();
  if (why) workerLog(*why);
  return why.has_value();
}

void WorkerSession::secureControl() {
  if (!opt_.serverKey.empty()) {
    // Made per session and never written down: a data plane admits the run's members by it.
    dataKeys_ = makeCurveKeyPair();
    sock_.set(zmq::sockopt::curve_serverkey, opt_.serverKey);
    sock_.set(zmq::sockopt::curve_publickey, opt_.keys.publicKey);
    sock_.set(zmq::sockopt::curve_secretkey, opt_.keys.secretKey);
    sock_.set(zmq::sockopt::handshake_ivl, static_cast<int>(opt_.handshakeTimeout.count()));
  }
  handshake_ = std::make_unique<HandshakeWatch>(sock_, opt_);
}

int WorkerSession::run() {
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
  sock_.set(zmq::sockopt::maxmsgsize, kMaxControlMessageBytes);
  // Telemetry is lossless on the control connection: never drop at a high-water mark.
  sock_.set(zmq::sockopt::sndhwm, 0);
  sock_.set(zmq::sockopt::rcvhwm, 0);
  try {
    secureControl();
    sock_.connect(opt_.connect);
  } catch (const zmq::error_t& e) {
    workerLog("cannot connect to " + opt_.connect + ": " + e.what());
    return 2;
  }
  Hello h;
  h.name = name_;
  h.hostName = host_;
  h.pid = pid_;
  h.backend = opt_.backend;
  h.deviceIndex = opt_.device;
  h.pidNamespace = pidNamespaceId();
  h.dataKey = dataKeys_.publicKey;
  h.launchRank = opt_.placement.rank;
  h.launchLocalRank = opt_.placement.localRank;
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
    if (refused()) return leave(6);
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
      workerLog(buf);
      return leave(3);
    }
    const int64_t watched = opt_.watchPid > 0 ? opt_.watchPid : opt_.parentPid;
    if (watched > 0 && static_cast<int64_t>(::getppid()) != watched) {
      workerLog("parent process " + std::to_string(watched) + " is gone; leaving");
      return leave(4);
    }
    reapJob();
    checkStuckJob(now);
  }
}

void WorkerSession::sendFrames(const Frames& f) {
  try {
    for (size_t i = 0; i < f.size(); ++i) {
      sock_.send(zmq::buffer(f[i]),
                 i + 1 < f.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  } catch (const zmq::error_t& e) {
    workerLog(std::string("control send failed: ") + e.what());
  }
}

void WorkerSession::sendFrames(Frames&& f) {
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
          owned->data(), owned->size(), [](void*, void* hint) { delete static_cast<Bytes*>(hint); },
          owned.get());
      owned.release();  // the message frees it now
      sock_.send(msg, flags);
    }
  } catch (const zmq::error_t& e) {
    workerLog(std::string("control send failed: ") + e.what());
  }
}

Heartbeat WorkerSession::heartbeat() {
  Heartbeat hb;
  if (!job_) return hb;
  RunJob& j = *job_;
  if (!j.finished.load() && j.running.load()) {
    hb.inRun = true;
    hb.iteration = j.iteration.load();
    hb.checkIteration = j.checkIteration.load();
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

void WorkerSession::resendReady(SteadyClock::time_point now) {
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
    workerLog("no Start yet for run " + std::to_string(again->runId) + "; Ready again");
  send(*again);
}

void WorkerSession::resendResults(uint64_t epoch) {
  if (!job_ || job_->cfg.epoch != epoch || !job_->reported.load()) return;
  flushOutbox(true);
  std::vector<Message> again;
  {
    std::lock_guard<std::mutex> lock(job_->mu);
    again = job_->results;
  }
  if (opt_.verbose) {
    workerLog("the coordinator misses the results of run " + std::to_string(job_->cfg.runId) +
              "; sending " + std::to_string(again.size()) + " message(s) again");
  }
  for (const Message& m : again) sendFrames(encode(m));
}

void WorkerSession::sendPing() {
  Ping p;
  p.seq = pingSeq_++;
  p.t0Ns = steadyNowNs();
  pingSentAt_ = SteadyClock::now();
  pingOutstanding_ = true;
  send(p);
}

void WorkerSession::flushOutbox(bool force) {
  if (!job_) return;
  RunJob& j = *job_;
  Outbox::Taken t = j.out.take();
  for (const auto& [position, msg] : t.msgs) {
    if (std::holds_alternative<RunDone>(msg) || std::holds_alternative<RunFailed>(msg)) {
      shipTelemetry(j, position);
    }
    if (losses_.lose(typeOf(msg))) continue;
    sendFrames(encode(msg));
    if (opt_.verbose) workerLog("sent " + describe(msg));
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

void WorkerSession::shipTelemetry(RunJob& j, uint64_t upTo) {
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

void WorkerSession::abortJob() {
  if (!job_ || job_->finished.load()) return;
  if (!job_->abortedAt) job_->abortedAt = SteadyClock::now();
  job_->abort();
}

void WorkerSession::checkStuckJob(SteadyClock::time_point now) const {
  if (!job_ || !job_->abortedAt || job_->finished.load()) return;
  if (now - *job_->abortedAt < kStopLimit) return;
  workerLog("the run thread of run " + std::to_string(job_->cfg.runId) + " did not stop within " +
            std::to_string(kStopLimit.count()) + " s of its abort; exiting hard");
  std::_Exit(5);
}

void WorkerSession::retireJob() {
  if (!job_ || !job_->finished.load()) return;
  flushOutbox(true);
  if (!job_->th.joinable()) return;
  job_->th.join();
  // The run's buffers are given back; glibc keeps freed memory for reuse, and its mmap
  // threshold rises with each large buffer freed, so a worker's RSS would stay at the high
  // water mark of the largest run it ever had. An idle worker holds what it needs, no more,
  // and the soak's flat RSS is then what it says (docs/reliability.md).
  ::malloc_trim(0);
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
    workerLog(buf);
  }
}

void WorkerSession::reapJob() {
  retireJob();
  if (!pending_ || (job_ && !job_->finished.load())) return;
  PendingRun p = std::move(*pending_);
  pending_.reset();
  startJob(p.cfg, p.epoch);
  if (p.aborted) abortJob();
}

void WorkerSession::stopJobNow() {
  pending_.reset();
  if (!job_ || !job_->th.joinable()) return;
  abortJob();
  const auto deadline = SteadyClock::now() + kLeaveWait;
  while (!job_->finished.load() && SteadyClock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  if (!job_->finished.load()) {
    workerLog("the run thread did not stop within " + std::to_string(kLeaveWait.count()) +
              " ms; exiting hard");
    std::fflush(stderr);
    std::_Exit(5);
  }
}

std::optional<int> WorkerSession::handle(const std::vector<zmq::message_t>& frames) {
  if (frames.size() != 2) {
    workerLog("ignored a control message of " + std::to_string(frames.size()) +
              " frames from the coordinator");
    return std::nullopt;
  }
  auto env = decode(ByteView(static_cast<const uint8_t*>(frames[0].data()), frames[0].size()),
                    ByteView(static_cast<const uint8_t*>(frames[1].data()), frames[1].size()));
  if (!env) {
    if (env.error().code == DecodeErrc::UnsupportedVersion) return onOtherVersion(frames);
    workerLog("ignored a malformed control message: " + env.error().message());
    return std::nullopt;
  }
  if (opt_.verbose) workerLog("received " + describe(env->message));
  if (losses_.lose(typeOf(env->message))) return std::nullopt;
  const uint64_t epoch = env->epoch();
  return std::visit([&](const auto& m) { return on(m, epoch); }, env->message);
}

// A coordinator of another protocol version: its refusal is read in its own version (protocol.h
// says what never changes between versions) and printed; anything else it says is unreadable,
// so the worker leaves naming both versions rather than wait for what it cannot read.
std::optional<int> WorkerSession::onOtherVersion(const std::vector<zmq::message_t>& frames) {
  const ByteView header(static_cast<const uint8_t*>(frames[0].data()), frames[0].size());
  const ByteView body(static_cast<const uint8_t*>(frames[1].data()), frames[1].size());
  if (auto reason = shutdownReasonAnyVersion(header, body)) {
    workerLog("refused by the coordinator: " + *reason);
  } else {
    workerLog("refused: " + versionMismatch(headerVersion(header).value_or(0), "the coordinator"));
  }
  return 7;
}

std::optional<int> WorkerSession::on(const Welcome& w, uint64_t) {
  if (!welcomed_) {
    // A worker started by hand says where it joined; a coordinator's own child stays quiet
    // so that its lines do not mix into the coordinator's output.
    if (announces()) workerLog("joined " + opt_.connect + " as " + name_);
  } else if (opt_.verbose && (w.rank != rank_ || w.worldSize != world_)) {
    workerLog("now rank " + std::to_string(w.rank) + " of " + std::to_string(w.worldSize));
  }
  welcomed_ = true;
  handshake_.reset();  // the handshake is done: a later reconnect is not a refusal
  rank_ = w.rank;
  world_ = w.worldSize;
  hbInterval_ = milliseconds(w.heartbeatIntervalMs);
  liveness_ = static_cast<int>(w.heartbeatLiveness);
  return std::nullopt;
}

std::optional<int> WorkerSession::on(const Pong& p, uint64_t) {
  const int64_t t3 = steadyNowNs();
  if (!pingOutstanding_ || p.seq + 1 != pingSeq_) return std::nullopt;
  pingOutstanding_ = false;
  samples_.push_back(clockSample(p, t3));
  if (auto offset = clockOffsetNs(samples_)) offsetNs_ = *offset;
  if (samples_.size() < kPings) sendPing();
  return std::nullopt;
}

std::optional<int> WorkerSession::on(const Heartbeat& h, uint64_t) {
  if (h.wantReport) resendResults(h.epoch);
  return std::nullopt;
}

std::optional<int> WorkerSession::on(const RunConfig& c, uint64_t epoch) {
  // The coordinator says a RunConfig again when this worker's heartbeats show it missed
  // it; one that did arrive (running, or held until the old run thread ends) is not run twice.
  if ((job_ && job_->cfg.epoch == epoch) || (pending_ && pending_->epoch == epoch)) {
    return std::nullopt;
  }
  if (pending_ && opt_.verbose) {
    workerLog("run " + std::to_string(pending_->cfg.runId) + " never started: run " +
              std::to_string(c.runId) + " replaces it");
  }
  pending_.reset();
  if (job_ && !job_->finished.load()) {
    if (!job_->reported.load() && !job_->abortedAt) {
      workerLog("RunConfig for run " + std::to_string(c.runId) + " while run " +
                std::to_string(job_->cfg.runId) + " is active: aborting the old run");
    }
    // The old thread may also just be releasing its buffers: the new run starts once it
    // has finished (reapJob), and the loop heartbeats meanwhile.
    abortJob();
    if (opt_.verbose) {
      workerLog("run " + std::to_string(c.runId) + " starts once the thread of run " +
                std::to_string(job_->cfg.runId) + " has finished");
    }
    pending_ = PendingRun{c, epoch, false};
    return std::nullopt;
  }
  retireJob();
  startJob(c, epoch);
  return std::nullopt;
}

std::string WorkerSession::attachRing(RunJob& j) {
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

void WorkerSession::startJob(const RunConfig& c, uint64_t epoch) {
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
  j.dataSecretKey = dataKeys_.secretKey;
  j.recordEveryOther = recordEveryOther_;
  j.flight = &flight_;
  j.faults.corruption = corruption_;
  j.faults.stall = std::exchange(stall_, std::nullopt);
  j.verbose = opt_.verbose;
  j.livenessBound = hbInterval_ * liveness_;
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
  j.launch();
}

std::optional<int> WorkerSession::on(const Start& s, uint64_t epoch) {
  if (!job_ || job_->cfg.epoch != epoch) {
    workerLog("ignored Start for epoch " + std::to_string(epoch) + " (no such run)");
    return std::nullopt;
  }
  job_->start(s.endpoints, s.devices);
  return std::nullopt;
}

std::optional<int> WorkerSession::on(const Abort& a, uint64_t epoch) {
  if (job_ && job_->cfg.epoch == epoch) {
    abortJob();
  } else if (pending_ && pending_->epoch == epoch) {
    pending_->aborted = true;  // it starts aborted, and its RunFailed acknowledges this
  } else if (opt_.verbose) {
    workerLog("ignored Abort for epoch " + std::to_string(epoch) + ": " + a.reason);
  }
  return std::nullopt;
}

std::optional<int> WorkerSession::on(const Shutdown& s, uint64_t) {
  if (announces()) {
    workerLog("shutdown requested" + (s.reason.empty() ? std::string() : ": " + s.reason));
  }
  return 0;
}

std::optional<int> WorkerSession::on(const Log& l, uint64_t) {
  workerLog(std::string("coordinator ") + std::string(toString(l.level)) + ": " + l.text);
  return std::nullopt;
}

std::optional<int> WorkerSession::on(const StoreValue& v, uint64_t epoch) {
  // An answer for an aborted run's thread, or for none, is dropped: that thread asks no more.
  if (job_ && job_->cfg.epoch == epoch) job_->answerStore(v);
  return std::nullopt;
}

template <class M>
std::optional<int> WorkerSession::on(const M& m, uint64_t) {
  workerLog("ignored " + std::string(typeName(typeOf(Message(m)))) + " from the coordinator");
  return std::nullopt;
}

int WorkerSession::leave(int code) {
  stopJobNow();
  retireJob();
  handshake_.reset();
  sock_.close();
  if (opt_.verbose) workerLog("leaving with exit code " + std::to_string(code));
  return code;
}

}  // namespace arl
