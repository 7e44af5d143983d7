// What the topology pane knows of one run, without Qt widgets: the live run's telemetry until
// its row takes it (a replay's stays with its row), the timeline built from it (bounded), the
// step boundaries, and the buffer-strip updates (which cells of which rank's buffer gained
// which contributions, when). The view and the explanation panel read it at the playback
// clock's time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/timeline.h"
#include "schedule/schedule.h"
#include "topology/topology_run.h"

namespace arl::ui {

// The mask of a complete result: every one of n ranks' contributions.
inline uint64_t allRanksMask(int n) {
  return n >= 64 ? ~uint64_t{0} : (n <= 0 ? 0 : (uint64_t{1} << n) - 1);
}

// Does every cell of a rank's buffer start with its own contribution (a reducing collective)?
inline bool startsWithOwnInput(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
}

// The end of one step of one iteration: the last rank's StepEnd for it.
struct StepMark {
  int64_t endNs = 0;
  uint32_t iteration = 0;
  uint32_t step = 0;
  uint8_t phase = 0;    // arl::Phase
  int phaseIndex = 0;   // 1-based position of the step within its phase
  int phaseSteps = 0;   // steps of that phase in the schedule
  int ranksEnded = 0;   // StepEnds of the step held
  int deviceTimed = 0;  // of them, timed by a device's clock (ClockSource::Device)
};

// A change to one rank's buffer strip: cells [first, last] now hold `mask`'s contributions
// (a reduction landed, or a copy arrived); or, with reset, the rank starts a new iteration.
struct CellUpdate {
  int64_t tNs = 0;
  int rank = 0;
  uint32_t iteration = 0;
  uint32_t step = 0;
  uint8_t phase = 0;
  bool reset = false;
  bool reduce = false;  // a reduction (else a copy)
  int peer = -1;        // who sent the data
  int first = 0;
  int last = -1;
  uint64_t offset = 0;  // elements
  uint64_t elems = 0;
  uint64_t mask = 0;
};

// Every rank's strip at one time: cell -> rank mask of contributions it holds.
class StripState {
 public:
  void reset(int nranks, int cells, bool ownContribution);
  // Applies `updates` (sorted by time) up to and including time t; moving back in time, or
  // updates changed before the time applied so far, starts over from the beginning.
  void applyUntil(const std::vector<CellUpdate>& updates, int64_t t);
  uint64_t mask(int rank, int cell) const;
  int nranks() const { return nranks_; }
  int cells() const { return cells_; }
  size_t applied() const { return cursor_; }
  // Whether rank's strip changed since the last takeChanged(); clears the marks.
  std::vector<char> takeChanged();

 private:
  void resetRank(int rank);
  int nranks_ = 0;
  int cells_ = 0;
  bool own_ = true;
  int64_t appliedUntil_ = INT64_MIN;
  size_t cursor_ = 0;
  std::vector<uint64_t> masks_;
  std::vector<uint32_t> iteration_;
  std::vector<char> changed_;
};

class RunModel {
 public:
  // The most telemetry events the pane draws for one run (the timeline built from them takes
  // about 64 bytes an event). Events past it are counted as dropped: the pane draws a prefix
  // of the run, as the coordinator keeps one.
  static constexpr uint64_t kMaxEvents = 1'000'000;

  RunModel();
  ~RunModel();

  // Lowers the bound (tests); kMaxEvents by default.
  void setMaxEvents(uint64_t n) { maxEvents_ = n; }
  uint64_t maxEvents() const { return maxEvents_; }

  // A new run: generates its schedule (for the phases, steps and strips). No events yet.
  void begin(const TopologyRun& run);
  // The plan of `run` before it runs: its schedule's first step that moves data, every
  // message of it (the slices of one chunk as one) on its link at planTimeNs(), the strips as
  // they start. Nothing of it is measured: planned() says so, held() stays 0, and begin()
  // ends it.
  void plan(const TopologyRun& run);
  bool planned() const { return planned_; }
  // How many of the schedule's steps move data (a plan's "step 1 of N"); 0 without a schedule.
  int movingSteps() const { return static_cast<int>(stepPhase_.size()); }
  // The time a plan is drawn at: its messages leave at 0 and arrive at kPlanArrivalNs, so that
  // each is drawn a third of the way from its sender (the link's arrow stays in sight).
  static constexpr int64_t kPlanArrivalNs = 900;
  static constexpr int64_t planTimeNs() { return kPlanArrivalNs / 3; }
  // Appends one rank's batch of the live run (events of other runs are ignored), to draw and
  // to keep until takeEvents(). Marks the model dirty.
  void append(const std::vector<TelemetryEvent>& events);
  // A whole run at once, its events kept by the caller (a recorded row): after begin(), draws
  // them as append() would and keeps none.
  void show(const std::vector<TelemetryEvent>& events);
  // The live run's events, every one appended, in time order (by time, the lower rank first
  // on a tie, as TelemetryCollector::take() hands them): for the run's row, which keeps them
  // from then on. The model keeps what it built from them (rebuilt whole first) and no event.
  std::vector<TelemetryEvent> takeEvents();
  // While a run is live, the timeline is rebuilt from its newest events only (the live view
  // shows the newest moment, and a rebuild of a million events takes the GUI thread for
  // seconds); the whole run is rebuilt when it ends.
  static constexpr uint64_t kLiveWindow = 100'000;

  // Rebuilds the timeline, step marks and strip updates from the events drawn: all of them,
  // or with newestOnly the newest kLiveWindow. Nothing to do when it has built from them so
  // already, or no longer keeps them (takeEvents, show).
  void rebuild(bool newestOnly = false);
  // Whether the last rebuild used the newest events only.
  bool windowed() const { return windowed_; }
  bool dirty() const { return dirty_; }

  const TopologyRun& run() const { return run_; }
  int nranks() const { return run_.nranks; }
  const Schedule* schedule() const { return hasSchedule_ ? &schedule_ : nullptr; }
  const std::string& scheduleError() const { return scheduleError_; }
  int cells() const { return cells_; }
  uint64_t bufferElems() const { return bufferElems_; }
  // The cells [first, last] that elements [offset, offset + elems) touch.
  void cellRange(uint64_t offset, uint64_t elems, int& first, int& last) const;
  uint64_t cellBegin(int cell) const;

  // The live run's events it keeps (every one appended, in the order they came); none after
  // takeEvents() or show().
  const std::vector<TelemetryEvent>& events() const { return events_; }
  // Events drawn (at most maxEvents()), and those past the bound, not drawn.
  uint64_t held() const { return drawn_; }
  // Bytes of the events, timeline, step marks and strip updates held (capacities).
  uint64_t bytesHeld() const;
  uint64_t dropped() const { return dropped_; }
  // Events that arrived earlier in time than their rank's previous event (0 when every rank's
  // telemetry came in order).
  uint64_t outOfOrder() const { return outOfOrder_; }

  const Timeline& timeline() const { return *timeline_; }
  const std::vector<StepMark>& steps() const { return steps_; }
  const std::vector<CellUpdate>& updates() const { return updates_; }
  int64_t startNs() const { return startNs_; }
  int64_t endNs() const { return endNs_; }
  uint32_t iterations() const { return iterations_; }
  // The step whose span holds t: the first whose end is at or after t (the last one past the
  // end; null without steps).
  const StepMark* stepAt(int64_t t) const;
  std::vector<int64_t> boundaries() const;
  // The mark of (iteration, step), null when the telemetry has none.
  const StepMark* markOf(uint32_t iteration, uint32_t step) const;
  // A step no rank has ended yet, whose messages have started (a live run's newest steps:
  // with several slices a step ends with its last slice): a mark with no end (endNs INT64_MAX,
  // ranksEnded 0) for the caption and the explanation, never a boundary. Null otherwise.
  const StepMark* markUnderWay(uint32_t iteration, uint32_t step) const;
  // The 1-based place of `step` among the steps of `phase` (as the caption numbers it).
  int phaseIndex(uint8_t phase, uint32_t step) const;

 private:
  // Counts `e` against the bound and its rank's order: true when it is drawn.
  bool admit(const TelemetryEvent& e);
  void build(const std::vector<TelemetryEvent>& src);
  void buildSteps(const std::vector<TelemetryEvent>& src);
  void buildUpdates(const std::vector<TelemetryEvent>& src);

  TopologyRun run_;
  Schedule schedule_;
  bool hasSchedule_ = false;
  bool planned_ = false;
  std::string scheduleError_;
  int cells_ = 1;
  uint64_t bufferElems_ = 1;
  std::vector<TelemetryEvent> events_;
  std::vector<int64_t> lastT_;  // per rank, the time of its latest event
  uint64_t maxEvents_ = kMaxEvents;
  uint64_t drawn_ = 0;  // the first drawn_ of events_ (while it keeps them)
  uint64_t dropped_ = 0;
  uint64_t outOfOrder_ = 0;
  bool dirty_ = false;
  bool windowed_ = false;
  std::unique_ptr<Timeline> timeline_;
  std::vector<StepMark> steps_;
  std::map<uint8_t, std::vector<uint32_t>> phaseSteps_;
  std::map<std::pair<uint32_t, uint32_t>, size_t> markIndex_;   // (iteration, step) -> steps_
  std::map<std::pair<uint32_t, uint32_t>, StepMark> underWay_;  // steps not ended yet
  std::map<uint32_t, uint8_t> stepPhase_;  // step -> the phase of the schedule's sends at it
  std::vector<CellUpdate> updates_;
  int64_t startNs_ = 0;
  int64_t endNs_ = 0;
  uint32_t iterations_ = 0;
};

}  // namespace arl::ui
