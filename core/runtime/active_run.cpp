// One run's state machine (active_run.h).
#include "runtime/active_run.h"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <utility>

namespace arl {

ActiveRun::ActiveRun(uint64_t runId, RunRequest req, RunPlan plan, std::vector<WorkerInfo> workers,
                     std::chrono::milliseconds stallTimeout, RunLink& link, EventQueue& events)
    : link_(link),
      events_(events),
      runId_(runId),
      epoch_(runId),
      req_(std::move(req)),
      effective_(std::move(plan.run)),
      cfg_(std::move(plan.cfg)),
      n_(static_cast<int>(plan.ids.size())),
      ids_(std::move(plan.ids)),
      workers_(std::move(workers)),
      stall_(stallTimeout),
      sent_(n_) {
  cfg_.runId = runId_;
  cfg_.epoch = epoch_;
  const auto n = static_cast<size_t>(n_);
  ready_.assign(n, false);
  done_.assign(n, false);
  acked_.assign(n, false);
  gone_.assign(n, false);
  endpoints_.assign(n, "");
  devices_.assign(n, PeerDeviceInfo{});
  workerDropped_.assign(n, 0);
  wrongTotal_.assign(n, 0);
  nextBatchSeq_.assign(n, 0);
  iterNs_.assign(req_.iterations, std::vector<int64_t>(n, -1));
  iterWrong_.assign(req_.iterations, std::vector<uint64_t>(n, 0));
  seen_.assign(n, RankSeen{});
  for (RankSeen& s : seen_) s.configSentAt = SteadyClock::now();
}

int ActiveRun::rankOf(const std::string& id) const {
  for (int r = 0; r < n_; ++r)
    if (ids_[static_cast<size_t>(r)] == id) return r;
  return -1;
}

void ActiveRun::configure() {
  events_.push(StateEvent{runId_, RunState::Configuring,
                          "run " + std::to_string(runId_) + ": " + cfg_.algorithm + " " +
                              std::string(toString(cfg_.collective)) + " on " + std::to_string(n_) +
                              " ranks"});
  for (int r = 0; r < n_; ++r) {
    RunConfig c = cfg_;
    // bench --mismatch-rank: this rank disagrees about the message (RunRequest::mismatchRank).
    if (r == req_.mismatchRank) c.count *= 2;
    const Delivery d = send(r, c);
    if (handedOver(d)) continue;
    // The ranks after r were never configured: there is nothing for them to abort.
    for (int later = r + 1; later < n_; ++later) acked_[static_cast<size_t>(later)] = true;
    failUndelivered(r, d);
    return;
  }
}

void ActiveRun::failUndelivered(int r, Delivery d) {
  const WorkerInfo& w = workers_[static_cast<size_t>(r)];
  fail(FailKind::Unreachable, r,
       "rank " + std::to_string(r) + " (" + w.name + ", pid " + std::to_string(w.pid) + ") " +
           (d == Delivery::QueueFull
                ? "does not read its control messages (its queue is full)"
                : "cannot be reached: its control connection is closed (the worker ended, or "
                  "its host or the network is down)"));
}

void ActiveRun::onReady(const Ready& m, int r) {
  const auto k = static_cast<size_t>(r);
  if (failing()) return;
  if (state_ == RunState::Running) {
    // A second Ready: this rank never got the Start (lost on the way); say it again.
    if (ready_[k]) {
      link_.logLimited(
          1, "rank " + std::to_string(r) + " is still waiting for Start; sending it again");
      send(r, startMessage());
    }
    return;
  }
  if (m.dataEndpoint.empty()) {
    fail(FailKind::Protocol, r,
         "rank " + std::to_string(r) + " reported no data-plane endpoint in Ready");
    return;
  }
  ready_[k] = true;
  endpoints_[k] = m.dataEndpoint;
  devices_[k] = m.device;
  workers_[k].dataEndpoint = m.dataEndpoint;
  workers_[k].clockOffsetNs = m.clockOffsetNs;
  if (!std::all_of(ready_.begin(), ready_.end(), [](bool b) { return b; })) return;
  const Start s = startMessage();
  for (int rank = 0; rank < n_; ++rank) {
    if (const Delivery d = send(rank, s); !handedOver(d)) {
      failUndelivered(rank, d);
      return;
    }
  }
  state_ = RunState::Running;
  events_.push(StateEvent{runId_, RunState::Running,
                          "run " + std::to_string(runId_) + ": every rank is ready; started"});
}

Abort ActiveRun::abortMessage() const {
  Abort ab;
  ab.epoch = epoch_;
  ab.runId = runId_;
  ab.reason = failText_;
  return ab;
}

Start ActiveRun::startMessage() const {
  Start s;
  s.epoch = epoch_;
  s.runId = runId_;
  s.endpoints = endpoints_;
  // Only when some rank has device memory to share: a Start stays small otherwise.
  if (std::any_of(devices_.begin(), devices_.end(),
                  [](const PeerDeviceInfo& d) { return !d.id.empty(); })) {
    s.devices = devices_;
  }
  return s;
}

// Records the iterations of `m` and hands the client an IterationEvent for each, queued
// together: one wake-up of the client per message, not per iteration.
void ActiveRun::onIteration(const IterationResult& m, int r) {
  std::vector<CoordinatorEvent> out;
  out.reserve(m.count());
  for (size_t k = 0; k < m.count(); ++k) {
    const uint64_t wrong = k + 1 == m.count() ? m.wrong : 0;
    const auto iteration = static_cast<uint32_t>(m.iteration + k);
    if (recordIteration(r, iteration, m.timeOf(k), wrong)) {
      if (m.train) perRank_.back().train = m.train;
      out.emplace_back(IterationEvent{runId_, perRank_.back()});
    }
  }
  iterationEventsDropped_ += out.size() - events_.tryPushAll(out, 1);
}

// Records rank r's time in a timed iteration; false when it was known already or is not an
// iteration of the run.
bool ActiveRun::recordIteration(int r, uint32_t iteration, uint64_t timeNs, uint64_t wrong) {
  const auto k = static_cast<size_t>(r);
  if (iteration < iterNs_.size() && iterNs_[iteration][k] >= 0) {
    return false;  // said again after a loss: already counted
  }
  if (iteration >= iterNs_.size()) {
    link_.logLimited(1, "rank " + std::to_string(r) + " reported iteration " +
                            std::to_string(iteration) + " of a run with " +
                            std::to_string(iterNs_.size()) + " iterations; ignored");
    return false;
  }
  iterNs_[iteration][k] = static_cast<int64_t>(timeNs);
  iterWrong_[iteration][k] = wrong;
  perRank_.push_back(RankIteration{r, iteration, static_cast<int64_t>(timeNs), wrong});
  return true;
}

// The last step rank r reported: a heartbeat says where it is now; telemetry, which a worker
// ships late (at the end of a short run), only moves that forward, never back. The check's
// iterations after the timed ones (checkIteration > 0) come after every timed one.
void ActiveRun::noteStep(int r, uint32_t iteration, uint32_t checkIteration, uint32_t step,
                         bool forwardOnly) {
  RankSeen& s = seen_[static_cast<size_t>(r)];
  const bool older = s.stepKnown && std::tie(checkIteration, iteration, step) <=
                                        std::tie(s.checkIteration, s.iteration, s.step);
  if (forwardOnly && older) return;
  s.stepKnown = true;
  s.iteration = iteration;
  s.checkIteration = checkIteration;
  s.step = step;
}

void ActiveRun::onTelemetry(TelemetryBatch& m, int r) {
  const auto k = static_cast<size_t>(r);
  if (m.seq != nextBatchSeq_[k]) {
    link_.logLimited(1, "rank " + std::to_string(r) + ": telemetry batch " + std::to_string(m.seq) +
                            " arrived, expected " + std::to_string(nextBatchSeq_[k]));
  }
  nextBatchSeq_[k] = m.seq + 1;
  workerDropped_[k] = std::max(workerDropped_[k], m.dropped);
  // Progress: the newest event that belongs to a step (IterationEnd carries no real step,
  // NCCL's events none of the lab's, compute spans none of a schedule's).
  const auto stepEvent = std::find_if(m.events.rbegin(), m.events.rend(), [](const auto& e) {
    return e.kind != EventKind::IterationEnd && !isNcclKind(e.kind) && !isComputeKind(e.kind);
  });
  if (stepEvent != m.events.rend()) noteStep(r, stepEvent->iteration, 0, stepEvent->step, true);
  // The bytes each rank reports sending are counted before any bound drops an event; then the
  // batch goes to the client, moved, and nothing else of it stays here.
  sent_.add(r, m.events);
  TelemetryCounts& t = telemetry_;
  t.produced += m.events.size();
  const uint64_t forwarded = t.delivered + t.droppedSlowClient;
  const uint64_t room = req_.maxEvents > forwarded ? req_.maxEvents - forwarded : 0;
  if (m.events.size() > room) {
    t.droppedOverLimit += m.events.size() - room;
    m.events.resize(room);
  }
  const size_t count = m.events.size();
  if (count == 0) return;
  CoordinatorEvent ev = TelemetryBatchEvent{runId_, r, std::move(m.events)};
  if (events_.tryPush(ev, count)) {
    t.delivered += count;
  } else {
    t.droppedSlowClient += count;
  }
}

void ActiveRun::onDone(const RunDone& m, int r) {
  const auto k = static_cast<size_t>(r);
  if (!failing()) {
    // An iteration report lost on the way (a reset connection): the rank is asked for its
    // results again (heartbeatFor) instead of finishing the run with a hole in it.
    const bool missing = std::any_of(iterNs_.begin(), iterNs_.end(),
                                     [&](const std::vector<int64_t>& it) { return it[k] < 0; });
    seen_[k].missingResults = missing;
    if (missing) return;
  }
  done_[k] = true;
  acked_[k] = true;
  workerDropped_[k] = std::max(workerDropped_[k], m.eventsDropped);
  wrongTotal_[k] = m.wrongTotal;
  if (m.outputDigest) {
    digests_.resize(static_cast<size_t>(n_));
    samples_.resize(static_cast<size_t>(n_));
    digests_[k] = *m.outputDigest;
    samples_[k] = m.outputSample;
  }
  if (failing()) return;
  if (std::all_of(done_.begin(), done_.end(), [](bool b) { return b; })) {
    link_.log(0, "run " + std::to_string(runId_) + " done");
    end(RunState::Done, "");
  }
}

void ActiveRun::onFailed(const RunFailed& m, int r) {
  acked_[static_cast<size_t>(r)] = true;
  if (!failing()) {
    fail(FailKind::Reported, r, m.message());
    return;
  }
  if (failedRank_ >= 0 && m.peer == failedRank_ && m.step >= 0 && !waitingPeer_) {
    waitingPeer_ = m;
  }
}

void ActiveRun::onFlightRecord(FlightRecord& m, int r) {
  flight_.resize(static_cast<size_t>(n_));
  flight_[static_cast<size_t>(r)] = std::move(m);
}

std::vector<RankFlight> ActiveRun::flightOfRanks() const {
  std::vector<RankFlight> out(static_cast<size_t>(n_));
  for (int r = 0; r < n_; ++r) {
    const auto k = static_cast<size_t>(r);
    RankFlight& f = out[k];
    f.rank = r;
    if (k < flight_.size() && flight_[k]) {
      f.received = true;
      f.recorded = flight_[k]->recorded;
      f.records = flight_[k]->records;
    } else if (r == failedRank_ && kind_ == FailKind::Silent) {
      f.missing = "the process stopped responding";
    } else if ((r == failedRank_ && kind_ == FailKind::Died) || gone_[k]) {
      f.missing = "the process is gone";
    } else if (r == failedRank_ && kind_ == FailKind::Unreachable) {
      f.missing = "it could not be reached";
    } else if (done_[k]) {
      f.missing = "it had completed the run";
    } else {
      f.missing = "none arrived within " + std::to_string(kAckWait.count()) + " ms of the abort";
    }
  }
  return out;
}

void ActiveRun::fail(FailKind kind, int rank, const std::string& text) {
  if (failing()) return;
  kind_ = kind;
  failedRank_ = rank;
  failText_ = text;
  // A rank that died, went silent or cannot be reached acknowledges nothing.
  if (rank >= 0 &&
      (kind == FailKind::Unreachable || kind == FailKind::Died || kind == FailKind::Silent)) {
    acked_[static_cast<size_t>(rank)] = true;
  }
  ackDeadline_ = SteadyClock::now() + kAckWait;
  const Abort ab = abortMessage();
  for (int r = 0; r < n_; ++r) {
    const auto k = static_cast<size_t>(r);
    if (r == rank && kind != FailKind::Reported && kind != FailKind::Protocol) continue;
    if (done_[k] || gone_[k] || acked_[k]) continue;
    // A rank that cannot be told has nothing to acknowledge: the run ends without it.
    if (!handedOver(send(r, ab))) acked_[k] = true;
  }
  link_.log(kind == FailKind::Aborted ? 1 : 2, "run " + std::to_string(runId_) + ": " + text);
}

void ActiveRun::poll() {
  if (ended_) return;
  const auto now = SteadyClock::now();
  if (!failing()) {
    if (stall_.expired(now)) fail(FailKind::Stalled, -1, stallText(now));
    return;
  }
  bool all = true;
  for (size_t k = 0; k < static_cast<size_t>(n_); ++k) {
    if (!acked_[k] && !gone_[k]) all = false;
  }
  if (!all && now < ackDeadline_) return;
  end(kind_ == FailKind::Aborted ? RunState::Aborted : RunState::Failed, failureWithStep());
}

// The error of a failed run: a rank that died or went silent is named with the step it was
// at, from its own reports, else from a rank that waited for it.
std::string ActiveRun::failureWithStep() const {
  std::string error = failText_;
  if (kind_ != FailKind::Died && kind_ != FailKind::Silent) return error;
  const RankSeen* failed = failedRank_ >= 0 ? &seen_[static_cast<size_t>(failedRank_)] : nullptr;
  if (req_.train && failed != nullptr && failed->stepKnown) {
    // A training run's iterations are its steps; a collective's step means nothing there.
    error += " at training step " + std::to_string(failed->iteration);
  } else if (req_.train && waitingPeer_ && waitingPeer_->iteration >= 0) {
    error += " at training step " + std::to_string(waitingPeer_->iteration) + " (rank " +
             std::to_string(waitingPeer_->rank) + " was waiting for its data)";
  } else if (failed != nullptr && failed->stepKnown) {
    error += " at step " + std::to_string(failed->step) + " (" +
             iterationText(failed->iteration, failed->checkIteration, cfg_.check) + ")";
  } else if (waitingPeer_) {
    const RunFailed& w = *waitingPeer_;
    error += " at step " + std::to_string(w.step) + " (rank " + std::to_string(w.rank) +
             " was waiting for its data";
    if (w.checkIteration > 0 || w.iteration >= 0) {
      error += " in " + iterationText(static_cast<uint32_t>(std::max<int64_t>(w.iteration, 0)),
                                      w.checkIteration, w.checkIterations);
    }
    error += ")";
  } else if (state_ == RunState::Configuring) {
    error += " before its first step (the run was still being configured)";
  } else {
    error += " before reporting any step";
  }
  return error;
}

// "no rank made progress for 20.3 s (stall timeout 20.0 s): rank 0 waits for data from rank 1
// for step 5 (iteration 2); rank 1 waits for Start; ..." from the ranks' heartbeats.
std::string ActiveRun::stallText(SteadyClock::time_point now) const {
  std::string text = stallHeadline(stall_.quietFor(now), stall_.timeout());
  for (int r = 0; r < n_; ++r) {
    const auto k = static_cast<size_t>(r);
    std::string what;
    if (done_[k]) {
      what = "is done";
    } else if (!seen_[k].inRun) {
      what = "has not shown that it received the run";
    } else {
      what = describe(seen_[k].progress);
    }
    text += (r == 0 ? ": " : "; ") + std::string("rank ") + std::to_string(r) + " " + what;
  }
  return text;
}

void ActiveRun::onHeartbeat(const Heartbeat& hb, int r) {
  RankSeen& s = seen_[static_cast<size_t>(r)];
  const auto now = SteadyClock::now();
  if (hb.inRun) noteStep(r, hb.iteration, hb.checkIteration, hb.step, false);
  const bool inRun = hb.epoch == epoch_;
  if (inRun) {
    if (!s.inRun || hb.progress != s.progress.ticks || hb.phase != s.progress.phase) {
      stall_.progressed(now);
    }
    s.progress.ticks = hb.progress;
    s.progress.phase = hb.phase;
    s.progress.wait = hb.wait;
    s.progress.peer = hb.waitPeer;
    s.progress.step = hb.waitStep;
    s.progress.iteration = hb.iteration;
    s.progress.checkIteration = hb.checkIteration;
    s.progress.checkIterations = cfg_.check;
    s.reportedBeats = hb.phase == RunPhase::Reported ? s.reportedBeats + 1 : 0;
  }
  s.inRun = inRun;
  resendMissed(hb, r, now);
}

// What rank r's heartbeat shows it missed is said again, at most once per kResendAfter: its
// RunConfig while the run is healthy, the Abort while it winds down.
void ActiveRun::resendMissed(const Heartbeat& hb, int r, SteadyClock::time_point now) {
  const auto k = static_cast<size_t>(r);
  RankSeen& s = seen_[k];
  if (now - s.lastResend < kResendAfter) return;
  if (!failing() && !s.inRun && now - s.configSentAt > kResendAfter) {
    s.lastResend = now;
    s.configSentAt = now;
    link_.logLimited(1, "rank " + std::to_string(r) + " shows no sign of run " +
                            std::to_string(runId_) + "; sending its configuration again");
    send(r, cfg_);
  } else if (failing() && s.inRun && !acked_[k] && !gone_[k] && hb.phase != RunPhase::Reported) {
    s.lastResend = now;
    send(r, abortMessage());
  }
}

// Two heartbeats in a row that say the result was sent, so that a result still on its way
// is not asked for.
Heartbeat ActiveRun::heartbeatFor(int r) const {
  const auto k = static_cast<size_t>(r);
  Heartbeat hb;
  hb.epoch = epoch_;
  hb.wantReport = !failing() && !done_[k] && seen_[k].inRun &&
                  (seen_[k].reportedBeats >= 2 || seen_[k].missingResults);
  return hb;
}

void ActiveRun::onStoreSet(const StoreSet& m, int r) {
  if (failing()) return;
  const auto it = store_.find(m.key);
  if (it == store_.end() && store_.size() >= kMaxStoreKeys) {
    fail(FailKind::Protocol, r,
         "rank " + std::to_string(r) + " set store key '" + m.key + "' beyond the run's " +
             std::to_string(kMaxStoreKeys) + " keys");
    return;
  }
  if (it != store_.end()) {
    it->second = m.value;
  } else {
    store_.emplace(m.key, m.value);
  }
}

StoreValue ActiveRun::onStoreGet(const StoreGet& m) const {
  StoreValue v;
  v.epoch = epoch_;
  v.seq = m.seq;
  if (const auto it = store_.find(m.key); it != store_.end()) {
    v.found = true;
    v.value = it->second;
  }
  return v;
}

bool ActiveRun::awaitingReady(int r) const {
  return !failing() && state_ == RunState::Configuring && !ready_[static_cast<size_t>(r)];
}

RunResult ActiveRun::result() const {
  const End e = ended_.value_or(End{RunState::Aborted, failText_});
  RunResult res;
  res.runId = runId_;
  res.request = req_;
  res.effective = effective_;
  res.nranks = n_;
  res.workers = workers_;
  res.state = e.state;
  res.error = e.error;
  res.failedRank = e.state == RunState::Done ? -1 : failedRank_;
  if (e.state != RunState::Done && kind_ != FailKind::None) res.flight = flightOfRanks();
  res.perRank = perRank_;
  for (const auto& ns : iterNs_) {
    if (ns.empty() || std::any_of(ns.begin(), ns.end(), [](int64_t t) { return t < 0; })) {
      continue;
    }
    res.iterationUs.push_back(static_cast<double>(*std::max_element(ns.begin(), ns.end())) / 1e3);
  }
  if (!res.iterationUs.empty()) {
    res.timeUs = std::accumulate(res.iterationUs.begin(), res.iterationUs.end(), 0.0) /
                 static_cast<double>(res.iterationUs.size());
  }
  // A rank's RunDone counts every iteration checked; without it, its last timed one's report.
  for (size_t k = 0; k < static_cast<size_t>(n_); ++k) {
    res.wrong += done_[k] ? wrongTotal_[k] : iterWrong_.empty() ? 0 : iterWrong_.back()[k];
  }
  res.outputDigests = digests_;
  res.outputSamples = samples_;
  res.sent = sent_.ranks();
  res.telemetry = telemetry_;
  res.telemetry.droppedByRanks =
      std::accumulate(workerDropped_.begin(), workerDropped_.end(), uint64_t{0});
  res.telemetry.produced += res.telemetry.droppedByRanks;
  res.eventsDropped = res.telemetry.droppedByRanks + res.telemetry.droppedOverLimit +
                      res.telemetry.droppedSlowClient;
  res.iterationEventsDropped = iterationEventsDropped_;
  return res;
}

}  // namespace arl
