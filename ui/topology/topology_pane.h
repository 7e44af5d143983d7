// The lab's centre: the topology view (ranks laid out to suit the algorithm, links drawn with
// their shaping, chunk tokens moving at the times the telemetry recorded, each rank's buffer
// strip filling as reductions land), the explanation beside it (phase, step, the rule at work,
// the arithmetic at small counts) and the playback bar under it (live, pause, step, speed,
// scrubbable timeline). Everything drawn of a run comes from measured telemetry events; before
// one, the pane shows the plan (the schedule's first step, captioned as the plan).
#pragma once

#include <QElapsedTimer>
#include <QString>
#include <QWidget>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/telemetry.h"
#include "topology/topology_run.h"

class QLabel;
class QScrollArea;
class QTimer;

namespace arl::ui {

class ExplainPanel;
class PlaybackBar;
class PlaybackClock;
class RunModel;
struct StepMark;
class TopologyView;

// A stop in the playback with a question (a lesson's pause): once `step` algorithm steps of
// the first iteration shown have ended (0: before the first).
struct PlaybackPause {
  uint32_t step = 0;
  QString question;
  QString answer;
};

class TopologyPane : public QWidget {
  Q_OBJECT

 public:
  explicit TopologyPane(QWidget* parent = nullptr);
  ~TopologyPane() override;

  // A new run: the layout follows its algorithm; no events yet. Playback goes live.
  void beginRun(const TopologyRun& run);
  // Before a run: the plan of `run` (RunModel::plan), its first step's messages still on their
  // links, captioned "ring allreduce · the plan · step 1 of 6" with "press Run to measure"
  // and `note` (what the plan was made from) under it. Nothing plays until a run begins.
  void showPlan(const TopologyRun& run, const QString& note);
  // Before a run, a setup that cannot run: nothing drawn, no explanation, and the caption says
  // `problem` (the setup's own rule, one line).
  void showSetupProblem(const QString& problem);
  // Nothing to draw or animate, and why: `title` as the caption, `detail` under it (a
  // session imported from nccl-tests holds no chunk telemetry).
  void showNothingToDraw(const QString& title, const QString& detail);
  // Whether the pane shows a plan or a setup's problem (not a run).
  bool showsPlan() const;
  // Projector mode for a classroom (large type, high contrast, thicker links, fewer labels):
  // the view and the explanation redraw at once.
  void setProjector(bool on);
  bool projector() const;
  // The caption's font sizes on screen now (title, detail), in pixels.
  int captionPx(bool title) const;
  // Live telemetry of the current run, as the coordinator hands it over (one rank's batch,
  // in time order within the batch). Batches of another run are ignored.
  void appendEvents(int rank, const std::vector<TelemetryEvent>& events);
  // The run ended (its result has arrived); playback may now replay it.
  void endRun();
  // The events of the run that ended, every one handed over, in time order, for its row to
  // keep (RunModel::takeEvents): the pane keeps what it drew. Empty while a run is live.
  std::vector<TelemetryEvent> takeEvents();
  // A finished run at once (a recording), ready to play from its start. The pane draws
  // `events` and keeps none of them (they stay with the row they came from).
  void showRun(const TopologyRun& run, const std::vector<TelemetryEvent>& events);

  // Telemetry events the pane draws for the current run, and how many past its bound it does
  // not draw (dropped).
  uint64_t eventsHeld() const;
  uint64_t eventsDropped() const;
  // The bound on events drawn per run (RunModel::kMaxEvents, 1,000,000, unless lowered); past
  // it events are dropped and counted.
  uint64_t maxEventsHeld() const;
  void setMaxEventsHeld(uint64_t n);
  // Events that arrived earlier than their rank's previous event (0: every rank in order).
  uint64_t eventsOutOfOrder() const;

  // Playback, as the bar's buttons do it (the window's shortcuts and the tests call these).
  void goLive();
  void play();
  void pause();
  void stepForward();
  void stepBack();
  void seek(int64_t tNs);
  void setSpeed(double factor);
  double speed() const;
  bool playing() const;
  int64_t playbackTimeNs() const;
  // Moves the clock on by `wallNs` of wall time and draws the frame, as the frame timer does;
  // live, the clock shows the present less PlaybackClock::kLiveDelayNs instead.
  void advanceFrame(int64_t wallNs);
  // Rebuilds the timeline from the events held now, rather than on the coalescing timer.
  void flushEvents();
  // Pauses at the moment of the run that shows the algorithm at work best:
  // the most partial sums in flight (tokens carrying two or more ranks' contributions, not
  // all) on distinct links, then the most tokens, then tokens mid-way. A still picture for
  // screenshots and handouts. False (and nothing changes) when the run has no messages.
  bool pauseAtBusiestMoment();

  // Stops in the playback of the run shown now, in step order (a new run clears them). Playing
  // across one pauses there and shows its question over the view; going on (play, or the
  // question's button) shows the answer while the step plays out.
  void setPauses(std::vector<PlaybackPause> pauses);
  // The question shown now ("" when none), and the answer revealed now ("" when none).
  QString pauseQuestion() const;
  QString pauseAnswer() const;
  // Pauses set, and passed so far.
  int pauseCount() const { return static_cast<int>(pauses_.size()); }
  int pausesReached() const { return nextPause_; }

  // The caption over the view ("reduce-scatter · step 2 of 3") and its detail line.
  QString captionText() const;
  QString captionDetail() const;
  // Frames the view has painted since the pane was made.
  uint64_t framesPainted() const;

  TopologyView* view() const { return view_; }
  ExplainPanel* explanation() const { return explain_; }
  PlaybackBar* playbackBar() const { return bar_; }
  const RunModel& model() const { return *model_; }

 signals:
  // Playback stopped at a pause; its question is shown.
  void pausedAtQuestion(const QString& question);

 private:
  void scheduleRebuild();
  void rebuildNow();
  void onFrame();
  void render();
  void startReplay();
  void syncTimer();
  void fitExplainScroll();
  const StepMark* captionMark(int64_t t) const;
  QString liveText(int64_t t) const;
  int64_t pauseTime(const PlaybackPause& p) const;
  void showPauseBox(const QString& html, bool question);
  void enterPlan(const TopologyRun& run);
  void captionRun(const StepMark* mark, int64_t t);
  void captionPlan(const StepMark* mark);

  std::unique_ptr<RunModel> model_;
  std::unique_ptr<PlaybackClock> clock_;
  TopologyView* view_;
  ExplainPanel* explain_;
  QScrollArea* explainScroll_ = nullptr;
  PlaybackBar* bar_;
  QTimer* frameTimer_;
  QTimer* rebuildTimer_;
  QElapsedTimer wall_;
  int64_t lastFrameNs_ = 0;
  int lastRebuildMs_ = 0;
  bool active_ = false;
  bool stepMode_ = false;
  const void* shownMark_ = nullptr;
  size_t shownStrips_ = SIZE_MAX;
  int64_t shownStripTime_ = INT64_MIN;
  QString caption_;
  QString detail_;
  QString planNote_;            // under a plan's caption
  QString setupProblem_;        // the setup's problem, shown instead of a plan
  QString problemTitle_;        // the caption over it
  bool nothingToDraw_ = false;  // showNothingToDraw's message is shown: it is no plan
  std::vector<PlaybackPause> pauses_;
  int nextPause_ = 0;
  bool atQuestion_ = false;
  bool answerShown_ = false;
  QWidget* pauseBox_ = nullptr;
  QLabel* pauseText_ = nullptr;
};

}  // namespace arl::ui
