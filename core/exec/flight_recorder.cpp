#include "exec/flight_recorder.h"

#include <algorithm>
#include <bit>
#include <tuple>

namespace arl {

const char* toString(CollectiveState s) {
  switch (s) {
    case CollectiveState::InFlight: return "in flight";
    case CollectiveState::Completed: return "completed";
    case CollectiveState::Failed: return "failed";
    case CollectiveState::Aborted: return "aborted";
  }
  return "?";
}

const char* toString(IterationPlace::Kind k) {
  switch (k) {
    case IterationPlace::Kind::Warmup: return "warm-up";
    case IterationPlace::Kind::Timed: return "timed";
    case IterationPlace::Kind::Checked: return "checked";
  }
  return "?";
}

std::vector<int> ranksOf(uint64_t mask) {
  std::vector<int> out;
  while (mask != 0) {
    const int r = std::countr_zero(mask);
    out.push_back(r);
    mask &= mask - 1;
  }
  return out;
}

FlightRecorder::FlightRecorder() {
  for (CollectiveRecord& r : slots_) r.run.algorithm.reserve(kMaxFlightNameBytes);
}

void FlightRecorder::setRun(const FlightRun& run) {
  run_ = run;
  if (run_.algorithm.size() > kMaxFlightNameBytes) run_.algorithm.resize(kMaxFlightNameBytes);
}

void FlightRecorder::begin(IterationPlace place, int64_t nowNs) noexcept {
  CollectiveRecord& r = slots_[recorded_ % kFlightRecords];
  // Within the capacity reserved in the constructor: assign() copies, it does not allocate.
  r.run.algorithm.assign(run_.algorithm);
  r.run.runId = run_.runId;
  r.run.collective = run_.collective;
  r.run.dtype = run_.dtype;
  r.run.count = run_.count;
  r.run.nranks = run_.nranks;
  r.run.sliceBytes = run_.sliceBytes;
  r.run.nsteps = run_.nsteps;
  r.seq = recorded_;
  r.place = place;
  r.startNs = nowNs;
  r.endNs = 0;
  r.lastStep = -1;
  r.waitedOn = 0;
  r.state = CollectiveState::InFlight;
  current_ = &r;
  ++recorded_;
}

void FlightRecorder::stepDone(uint32_t step) noexcept {
  if (current_ != nullptr)
    current_->lastStep = std::max(current_->lastStep, static_cast<int32_t>(step));
}

void FlightRecorder::waitedOn(uint64_t ranks) noexcept {
  if (current_ != nullptr) current_->waitedOn |= ranks;
}

void FlightRecorder::end(CollectiveState state, int64_t nowNs) noexcept {
  if (current_ == nullptr) return;
  current_->state = state;
  current_->endNs = std::max(nowNs, current_->startNs);
  if (state == CollectiveState::Completed) current_->waitedOn = 0;
  current_ = nullptr;
}

std::vector<CollectiveRecord> FlightRecorder::records() const {
  const uint64_t held = std::min<uint64_t>(recorded_, kFlightRecords);
  std::vector<CollectiveRecord> out;
  out.reserve(held);
  for (uint64_t k = recorded_ - held; k < recorded_; ++k) out.push_back(slots_[k % kFlightRecords]);
  return out;
}

// ---- Analysis --------------------------------------------------------------------------------

namespace {

// Iteration order within a run: the warm-up ones, the timed ones, then the checked ones.
auto order(const IterationPlace& p) { return std::make_tuple(static_cast<int>(p.kind), p.index); }

const CollectiveRecord* recordAt(const RankFlight& f, uint64_t runId, const IterationPlace& p) {
  for (const CollectiveRecord& r : f.records) {
    if (r.run.runId == runId && order(r.place) == order(p)) return &r;
  }
  return nullptr;
}

const CollectiveRecord* lastOfRun(const RankFlight& f, uint64_t runId) {
  const CollectiveRecord* last = nullptr;
  for (const CollectiveRecord& r : f.records) {
    if (r.run.runId == runId) last = &r;
  }
  return last;
}

// The earliest collective of the run that some rank did not complete.
std::optional<CollectiveRecord> failingCollective(const std::vector<RankFlight>& flight,
                                                  uint64_t runId) {
  std::optional<CollectiveRecord> first;
  for (const RankFlight& f : flight) {
    for (const CollectiveRecord& r : f.records) {
      if (r.run.runId != runId || r.state == CollectiveState::Completed) continue;
      if (!first || order(r.place) < order(first->place)) first = r;
    }
  }
  return first;
}

std::string rankLineNote(const RankFlight& f, const FlightRankLine& line, uint64_t runId) {
  if (!f.received) return "no record, " + f.missing;
  if (line.record) return {};
  const CollectiveRecord* last = lastOfRun(f, runId);
  if (last == nullptr) return "no collective of this run recorded";
  return "never started it; its last: " + placeText(last->place) + ", " + toString(last->state);
}

}  // namespace

FlightAnalysis analyzeFlight(const std::vector<RankFlight>& flight, uint64_t runId) {
  FlightAnalysis a;
  a.runId = runId;
  const std::optional<CollectiveRecord> failing = failingCollective(flight, runId);
  if (!failing) {
    // No collective of the run was left unfinished (it failed while its ranks were being
    // configured, or after their last collective): each rank's line says what it has.
    for (const RankFlight& f : flight) {
      FlightRankLine line;
      line.rank = f.rank;
      const CollectiveRecord* last = f.received ? lastOfRun(f, runId) : nullptr;
      line.note = !f.received ? "no record, " + f.missing
                  : last ? "its last collective of this run: " + placeText(last->place) + ", " +
                               toString(last->state)
                         : "no collective of this run started";
      a.ranks.push_back(std::move(line));
    }
    return a;
  }
  a.found = true;
  a.place = failing->place;
  a.nsteps = failing->run.nsteps;
  a.failingStep = failing->lastStep + 1;
  for (const RankFlight& f : flight) {
    const CollectiveRecord* r = recordAt(f, runId, a.place);
    if (r != nullptr && r->state != CollectiveState::Completed) {
      a.failingStep = std::min(a.failingStep, r->lastStep + 1);
    }
  }
  for (const RankFlight& f : flight) {
    FlightRankLine line;
    line.rank = f.rank;
    if (const CollectiveRecord* r = recordAt(f, runId, a.place)) line.record = *r;
    line.reachedStep = line.record && line.record->lastStep + 1 >= a.failingStep;
    line.note = rankLineNote(f, line, runId);
    if (!line.reachedStep) a.neverReached.push_back(f.rank);
    a.ranks.push_back(std::move(line));
  }
  return a;
}

std::string placeText(const IterationPlace& p) {
  switch (p.kind) {
    case IterationPlace::Kind::Warmup: return "warm-up iteration " + std::to_string(p.index);
    case IterationPlace::Kind::Timed: return "iteration " + std::to_string(p.index) + " (timed)";
    case IterationPlace::Kind::Checked: return "checked iteration " + std::to_string(p.index);
  }
  return "?";
}

namespace {

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

std::string rankLineText(const FlightRankLine& l) {
  std::string s = "  rank " + std::to_string(l.rank) + ": ";
  if (!l.record) return s + l.note;
  const CollectiveRecord& r = *l.record;
  s += toString(r.state);
  s += r.lastStep < 0 ? ", no step completed" : ", last step " + std::to_string(r.lastStep);
  if (r.waitedOn != 0) s += ", waited on rank " + rankList(ranksOf(r.waitedOn));
  return s;
}

}  // namespace

std::string flightSummaryText(const std::vector<RankFlight>& flight, uint64_t runId) {
  if (flight.empty()) return {};
  const FlightAnalysis a = analyzeFlight(flight, runId);
  std::string s = "Flight record of run " + std::to_string(runId) + ":\n";
  if (!a.found) {
    s += "  no rank recorded an unfinished collective of this run\n";
    for (const FlightRankLine& l : a.ranks) s += rankLineText(l) + "\n";
    return s;
  }
  s += "  failed in " + placeText(a.place) + " at step " + std::to_string(a.failingStep);
  if (a.nsteps > 0) s += " of " + std::to_string(a.nsteps) + " (numbered from 0)";
  s += "\n";
  for (const FlightRankLine& l : a.ranks) s += rankLineText(l) + "\n";
  if (a.neverReached.empty()) {
    s += "  every rank reached step " + std::to_string(a.failingStep) + "\n";
  } else {
    s += "  ranks that never reached step " + std::to_string(a.failingStep) + ": " +
         rankList(a.neverReached) + "\n";
  }
  return s;
}

}  // namespace arl
