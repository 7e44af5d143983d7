#include "topology/run_model.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "base/limits.h"
#include "exec/run_request.h"
#include "runtime/telemetry_collector.h"
#include "schedule/verifier.h"

namespace arl::ui {

// ---- StripState ----

void StripState::reset(int nranks, int cells, bool ownContribution) {
  nranks_ = nranks;
  cells_ = cells;
  own_ = ownContribution;
  masks_.assign(static_cast<size_t>(nranks) * static_cast<size_t>(cells), 0);
  iteration_.assign(static_cast<size_t>(nranks), 0);
  changed_.assign(static_cast<size_t>(nranks), 1);
  for (int r = 0; r < nranks; ++r) resetRank(r);
  cursor_ = 0;
  appliedUntil_ = INT64_MIN;
}

void StripState::resetRank(int rank) {
  const uint64_t bit = own_ && rank < 64 ? uint64_t{1} << rank : 0;
  auto* row = masks_.data() + static_cast<size_t>(rank) * static_cast<size_t>(cells_);
  std::fill(row, row + cells_, bit);
}

void StripState::applyUntil(const std::vector<CellUpdate>& updates, int64_t t) {
  // The cursor must still split `updates` at the time applied so far: a live rebuild can add
  // updates before it (a rank's batch older than another's already drawn) or drop the
  // oldest (the live window), and then the strips start over.
  const bool split = cursor_ <= updates.size() &&
                     (cursor_ == 0 || updates[cursor_ - 1].tNs <= appliedUntil_) &&
                     (cursor_ == updates.size() || updates[cursor_].tNs > appliedUntil_);
  if (t < appliedUntil_ || !split) reset(nranks_, cells_, own_);
  appliedUntil_ = t;
  while (cursor_ < updates.size() && updates[cursor_].tNs <= t) {
    const CellUpdate& u = updates[cursor_++];
    if (u.rank < 0 || u.rank >= nranks_) continue;
    changed_[static_cast<size_t>(u.rank)] = 1;
    if (u.reset) {
      resetRank(u.rank);
      iteration_[static_cast<size_t>(u.rank)] = u.iteration;
      continue;
    }
    auto* row = masks_.data() + static_cast<size_t>(u.rank) * static_cast<size_t>(cells_);
    for (int c = std::max(u.first, 0); c <= std::min(u.last, cells_ - 1); ++c) row[c] |= u.mask;
  }
}

std::vector<char> StripState::takeChanged() {
  std::vector<char> out(changed_.size(), 0);
  out.swap(changed_);
  return out;
}

uint64_t StripState::mask(int rank, int cell) const {
  if (rank < 0 || rank >= nranks_ || cell < 0 || cell >= cells_) return 0;
  return masks_[static_cast<size_t>(rank) * static_cast<size_t>(cells_) +
                static_cast<size_t>(cell)];
}

// ---- RunModel ----

RunModel::RunModel() : timeline_(std::make_unique<Timeline>(std::vector<TelemetryEvent>{})) {}
RunModel::~RunModel() = default;

void RunModel::begin(const TopologyRun& run) {
  run_ = run;
  hasSchedule_ = false;
  planned_ = false;
  stepPhase_.clear();
  scheduleError_.clear();
  schedule_ = Schedule{};
  std::vector<std::string> hosts = run.hosts;
  if (static_cast<int>(hosts.size()) != run.nranks) {
    hosts.assign(static_cast<size_t>(std::max(run.nranks, 0)), "localhost");
  }
  try {
    resolveRunRequest(run.request, hosts, &schedule_);
    annotate(schedule_);
    hasSchedule_ = true;
    for (const auto& ops : schedule_.ranks) {
      for (const Op& op : ops) {
        if (op.sendPeer >= 0) stepPhase_.try_emplace(op.step, static_cast<uint8_t>(op.phase));
      }
    }
  } catch (const std::exception& e) {
    scheduleError_ = e.what();
  }
  bufferElems_ = hasSchedule_ ? std::max<uint64_t>(schedule_.outputElems, 1)
                              : std::max<uint64_t>(run.request.count, 1);
  cells_ = static_cast<int>(
      std::clamp<uint64_t>(bufferElems_, 1, static_cast<uint64_t>(std::clamp(run.nranks, 1, 64))));
  events_.clear();
  events_.shrink_to_fit();
  lastT_.assign(static_cast<size_t>(std::max(run.nranks, 0)), INT64_MIN);
  drawn_ = 0;
  dropped_ = 0;
  outOfOrder_ = 0;
  dirty_ = true;
  rebuild();
}

namespace {

// The events a run of `s` would report for its step `first` (the first that moves data, of
// phase `phase`), one message per sender, receiver and chunk (its slices merged), all in flight
// at the same moment: what the timeline, the step marks and the strips are built from for a
// plan.
std::vector<TelemetryEvent> firstStepEvents(const Schedule& s, uint32_t first, uint8_t phase,
                                            uint64_t runId, DataType dtype, int64_t arrivalNs) {
  std::map<std::tuple<int, int, uint32_t>, TelemetryEvent> messages;
  const uint64_t es = dtypeSize(dtype);
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    for (const Op& op : s.ranks[r]) {
      if (op.sendPeer < 0 || op.step != first) continue;
      TelemetryEvent e;
      e.runId = runId;
      e.kind = EventKind::SendStart;
      e.rank = static_cast<int32_t>(r);
      e.step = op.step;
      e.phase = static_cast<uint8_t>(op.phase);
      e.peer = op.sendPeer;
      e.chunk = op.chunk;
      e.offset = op.src.offset;
      auto [it, fresh] = messages.try_emplace({e.rank, e.peer, e.chunk}, e);
      it->second.offset = std::min(it->second.offset, op.src.offset);
      it->second.bytes += op.count * es;
      it->second.provenance |= op.provenance;
    }
  }
  std::vector<TelemetryEvent> out;
  std::set<int> ranks;
  for (const auto& [key, send] : messages) {
    out.push_back(send);
    TelemetryEvent recv = send;
    recv.kind = EventKind::RecvEnd;
    recv.rank = send.peer;
    recv.peer = send.rank;
    recv.tNs = arrivalNs;
    out.push_back(recv);
    ranks.insert(send.rank);
    ranks.insert(send.peer);
  }
  for (int r : ranks) {
    TelemetryEvent end;
    end.runId = runId;
    end.kind = EventKind::StepEnd;
    end.rank = r;
    end.step = first;
    end.phase = phase;
    end.tNs = arrivalNs;
    out.push_back(end);
  }
  return out;
}

}  // namespace

void RunModel::plan(const TopologyRun& run) {
  begin(run);
  planned_ = true;
  dirty_ = false;
  // One rank, or a schedule that moves nothing: nothing to draw.
  if (stepPhase_.empty()) return;
  const auto& [first, phase] = *stepPhase_.begin();
  build(firstStepEvents(schedule_, first, phase, run.runId, run.request.dtype, kPlanArrivalNs));
}

bool RunModel::admit(const TelemetryEvent& e) {
  if (drawn_ >= maxEvents_) {
    ++dropped_;
    return false;
  }
  if (e.rank >= 0 && static_cast<size_t>(e.rank) < lastT_.size()) {
    int64_t& last = lastT_[static_cast<size_t>(e.rank)];
    if (e.tNs < last) ++outOfOrder_;
    last = std::max(last, e.tNs);
  }
  ++drawn_;
  return true;
}

void RunModel::append(const std::vector<TelemetryEvent>& events) {
  for (const TelemetryEvent& e : events) {
    if (e.runId != run_.runId) continue;
    dirty_ |= admit(e);
    events_.push_back(e);  // past the bound too: the run's row keeps every event (takeEvents)
  }
}

void RunModel::show(const std::vector<TelemetryEvent>& events) {
  bool whole = true;  // every event drawn: built from `events` itself, no copy
  for (const TelemetryEvent& e : events) whole &= e.runId == run_.runId && admit(e);
  dirty_ = false;
  windowed_ = false;
  if (whole) {
    build(events);
    return;
  }
  std::vector<TelemetryEvent> drawn;
  drawn.reserve(drawn_);
  for (const TelemetryEvent& e : events) {
    if (e.runId == run_.runId && drawn.size() < drawn_) drawn.push_back(e);
  }
  build(drawn);
}

std::vector<TelemetryEvent> RunModel::takeEvents() {
  rebuild();
  std::vector<size_t> perRank;
  for (const TelemetryEvent& e : events_) {
    if (e.rank < 0 || e.rank >= kMaxRanks) {
      perRank.clear();
      break;
    }
    if (static_cast<size_t>(e.rank) >= perRank.size()) perRank.resize(e.rank + 1);
    ++perRank[static_cast<size_t>(e.rank)];
  }
  std::vector<TelemetryEvent> out;
  if (perRank.empty()) {  // no events, or one of no rank (none that a coordinator hands over)
    out = std::move(events_);
    std::stable_sort(out.begin(), out.end(), [](const TelemetryEvent& a, const TelemetryEvent& b) {
      return a.tNs != b.tNs ? a.tNs < b.tNs : a.rank < b.rank;
    });
  } else {
    // Each rank's events in the order they came, merged as a client of the coordinator keeps
    // a run's telemetry (TelemetryCollector: by time, the lower rank first on a tie).
    std::vector<std::vector<TelemetryEvent>> byRank(perRank.size());
    for (size_t r = 0; r < perRank.size(); ++r) byRank[r].reserve(perRank[r]);
    for (const TelemetryEvent& e : events_) byRank[static_cast<size_t>(e.rank)].push_back(e);
    events_ = {};
    TelemetryCollector merge;
    for (size_t r = 0; r < byRank.size(); ++r) merge.add(static_cast<int>(r), std::move(byRank[r]));
    out = merge.take();
  }
  events_.clear();
  return out;
}

void RunModel::rebuild(bool newestOnly) {
  // The events were handed on (takeEvents) or held by the caller (show): what was built stays.
  if (events_.size() < drawn_) return;
  const bool window = newestOnly && drawn_ > kLiveWindow;
  if (!dirty_ && window == windowed_) return;  // built from these events already
  dirty_ = false;
  windowed_ = window;
  const auto end = events_.begin() + static_cast<long>(drawn_);
  std::vector<TelemetryEvent> part;
  if (windowed_) {
    part.assign(end - static_cast<long>(kLiveWindow), end);
  } else if (drawn_ < events_.size()) {
    part.assign(events_.begin(), end);
  }
  build(windowed_ || drawn_ < events_.size() ? part : events_);
}

void RunModel::build(const std::vector<TelemetryEvent>& src) {
  timeline_ = std::make_unique<Timeline>(src);
  startNs_ = 0;
  endNs_ = 0;
  iterations_ = 0;
  if (!src.empty()) {
    const auto [lo, hi] = std::minmax_element(
        src.begin(), src.end(),
        [](const TelemetryEvent& a, const TelemetryEvent& b) { return a.tNs < b.tNs; });
    startNs_ = lo->tNs;
    endNs_ = hi->tNs;
    for (const TelemetryEvent& e : src) iterations_ = std::max(iterations_, e.iteration + 1);
  }
  buildSteps(src);
  buildUpdates(src);
}

void RunModel::buildSteps(const std::vector<TelemetryEvent>& src) {
  // Steps of each phase in the schedule (from the events when there is none).
  std::map<uint8_t, std::set<uint32_t>> phaseSteps;
  if (hasSchedule_) {
    for (const auto& ops : schedule_.ranks) {
      for (const Op& op : ops) {
        if (op.phase != Phase::Local) phaseSteps[static_cast<uint8_t>(op.phase)].insert(op.step);
      }
    }
  }
  // A step's boundary is the median of its ranks' StepEnds, not the last: under skew (many
  // ranks on few cores) one late rank would otherwise put a step's end after later steps.
  using Key = std::pair<uint32_t, uint32_t>;  // (iteration, step)
  std::map<Key, std::vector<int64_t>> ends;
  std::map<Key, uint8_t> phaseOf;
  std::map<Key, int> deviceTimed;
  std::map<Key, uint8_t> started;  // steps whose messages started, with the first one's phase
  for (const TelemetryEvent& e : src) {
    if (e.kind == EventKind::SendStart) started.try_emplace({e.iteration, e.step}, e.phase);
    if (e.kind != EventKind::StepEnd) continue;
    if (!hasSchedule_) phaseSteps[e.phase].insert(e.step);
    ends[{e.iteration, e.step}].push_back(e.tNs);
    phaseOf[{e.iteration, e.step}] = e.phase;
    if (e.clock == ClockSource::Device) ++deviceTimed[{e.iteration, e.step}];
  }
  phaseSteps_.clear();
  for (const auto& [phase, set] : phaseSteps) phaseSteps_[phase].assign(set.begin(), set.end());
  // A mark of (iteration, step) in `phase`, placed among the phase's steps.
  const auto markOfStep = [&](Key key, uint8_t phase) {
    StepMark m;
    m.iteration = key.first;
    m.step = key.second;
    m.phase = phase;
    const auto it = phaseSteps_.find(phase);
    if (it != phaseSteps_.end()) {
      m.phaseSteps = static_cast<int>(it->second.size());
      m.phaseIndex = phaseIndex(phase, m.step);
    } else {
      m.phaseIndex = 1;
    }
    return m;
  };
  steps_.clear();
  markIndex_.clear();
  int64_t floor = INT64_MIN;
  for (auto& [key, times] : ends) {
    std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2),
                     times.end());
    StepMark m = markOfStep(key, phaseOf[key]);
    m.ranksEnded = static_cast<int>(times.size());
    m.deviceTimed = deviceTimed[key];
    // In (iteration, step) order, boundaries never go back in time.
    m.endNs = std::max(times[times.size() / 2], floor);
    floor = m.endNs;
    markIndex_[key] = steps_.size();
    steps_.push_back(m);
  }
  underWay_.clear();
  for (const auto& [key, phase] : started) {
    if (markIndex_.count(key) != 0) continue;
    StepMark m = markOfStep(key, phase);
    m.endNs = INT64_MAX;
    underWay_.emplace(key, m);
  }
}

void RunModel::cellRange(uint64_t offset, uint64_t elems, int& first, int& last) const {
  first = 0;
  last = -1;
  if (elems == 0 || offset >= bufferElems_) return;
  const uint64_t end = std::min(offset + elems, bufferElems_);
  for (int c = 0; c < cells_; ++c) {
    const uint64_t b = cellBegin(c);
    const uint64_t e = cellBegin(c + 1);
    const uint64_t overlap =
        std::min(e, end) > std::max(b, offset) ? std::min(e, end) - std::max(b, offset) : 0;
    // A cell counts when the update covers half of it, or half of the update lies in it (a
    // slice smaller than a cell), so cell edges that differ from the schedule's chunk edges
    // by an element never light a neighbour.
    if (overlap > 0 && 2 * overlap >= std::min(e - b, end - offset)) {
      if (last < 0) first = c;
      last = c;
    }
  }
}

uint64_t RunModel::cellBegin(int cell) const {
  return bufferElems_ * static_cast<uint64_t>(cell) / static_cast<uint64_t>(cells_);
}

void RunModel::buildUpdates(const std::vector<TelemetryEvent>& src) {
  updates_.clear();
  const size_t esize = dtypeSize(run_.request.dtype);
  std::map<std::pair<int, uint32_t>, int64_t> firstOfIteration;  // (rank, iteration) -> t
  // A receive that a reduction consumes (RecvReduceSend, RecvReduceCopySend, ...) is not a
  // copy: the ReduceEnd that follows it on its rank (same iteration, chunk, offset and peer)
  // tells what landed, at the step of the message it received.
  std::map<std::tuple<int, uint32_t, uint32_t, uint64_t, int>, size_t> pendingRecv;
  std::vector<char> consumed(src.size(), 0);
  std::vector<uint32_t> recvStep(src.size(), UINT32_MAX);
  for (size_t i = 0; i < src.size(); ++i) {
    const TelemetryEvent& e = src[i];
    const auto key = std::make_tuple(e.rank, e.iteration, e.chunk, e.offset, e.peer);
    if (e.kind == EventKind::RecvEnd) pendingRecv[key] = i;
    if (e.kind != EventKind::ReduceEnd) continue;
    if (const auto it = pendingRecv.find(key); it != pendingRecv.end()) {
      consumed[it->second] = 1;
      recvStep[i] = src[it->second].step;
      pendingRecv.erase(it);
    }
  }
  for (size_t i = 0; i < src.size(); ++i) {
    const TelemetryEvent& e = src[i];
    auto [it, fresh] = firstOfIteration.try_emplace({e.rank, e.iteration}, e.tNs);
    if (!fresh) it->second = std::min(it->second, e.tNs);
    const auto phase = static_cast<Phase>(e.phase);
    const bool copy = e.kind == EventKind::RecvEnd && !consumed[i] &&
                      (phase == Phase::AllGather || phase == Phase::Broadcast);
    if (e.kind != EventKind::ReduceEnd && !copy) continue;
    CellUpdate u;
    u.tNs = e.tNs;
    u.rank = e.rank;
    u.iteration = e.iteration;
    // Labelled by the message that landed: its step, and the phase of the sends of that step.
    u.step = recvStep[i] != UINT32_MAX ? recvStep[i] : e.step;
    const auto sp = stepPhase_.find(u.step);
    u.phase = sp != stepPhase_.end() ? sp->second : e.phase;
    u.reduce = e.kind == EventKind::ReduceEnd;
    u.peer = e.peer;
    u.offset = e.offset;
    u.elems = esize ? e.bytes / esize : 0;
    u.mask = e.provenance;
    cellRange(u.offset, u.elems, u.first, u.last);
    if (u.last >= u.first) updates_.push_back(u);
  }
  for (const auto& [key, t] : firstOfIteration) {
    if (key.second == 0) continue;
    CellUpdate u;
    u.tNs = t;
    u.rank = key.first;
    u.iteration = key.second;
    u.reset = true;
    updates_.push_back(u);
  }
  // Resets sort before the updates of the same instant (they open the rank's iteration).
  std::stable_sort(updates_.begin(), updates_.end(), [](const CellUpdate& a, const CellUpdate& b) {
    return a.tNs != b.tNs ? a.tNs < b.tNs : a.reset > b.reset;
  });
}

const StepMark* RunModel::markOf(uint32_t iteration, uint32_t step) const {
  const auto it = markIndex_.find({iteration, step});
  return it == markIndex_.end() ? nullptr : &steps_[it->second];
}

const StepMark* RunModel::markUnderWay(uint32_t iteration, uint32_t step) const {
  const auto it = underWay_.find({iteration, step});
  return it == underWay_.end() ? nullptr : &it->second;
}

int RunModel::phaseIndex(uint8_t phase, uint32_t step) const {
  const auto it = phaseSteps_.find(phase);
  if (it == phaseSteps_.end()) return static_cast<int>(step) + 1;
  return static_cast<int>(std::lower_bound(it->second.begin(), it->second.end(), step) -
                          it->second.begin()) +
         1;
}

uint64_t RunModel::bytesHeld() const {
  return events_.capacity() * sizeof(TelemetryEvent) +
         timeline_->transfers().capacity() * sizeof(Transfer) +
         timeline_->intervals().capacity() * sizeof(Interval) +
         steps_.capacity() * sizeof(StepMark) + updates_.capacity() * sizeof(CellUpdate);
}

const StepMark* RunModel::stepAt(int64_t t) const {
  if (steps_.empty()) return nullptr;
  const auto it = std::lower_bound(steps_.begin(), steps_.end(), t,
                                   [](const StepMark& m, int64_t v) { return m.endNs < v; });
  return it == steps_.end() ? &steps_.back() : &*it;
}

std::vector<int64_t> RunModel::boundaries() const {
  std::vector<int64_t> b;
  b.reserve(steps_.size());
  for (const StepMark& m : steps_) b.push_back(m.endNs);
  return b;
}

}  // namespace arl::ui
