#include "topology/topology_pane.h"

#include <QFrame>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QStringList>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <tuple>

#include "base/clock.h"
#include "playback/playback_bar.h"
#include "playback/playback_clock.h"
#include "topology/explain_panel.h"
#include "topology/run_model.h"
#include "topology/topology_view.h"

namespace arl::ui {

namespace {
constexpr int kFrameMs = 16;          // about 60 frames a second
constexpr int kMinRebuildMs = 33;     // the timeline is rebuilt at most 30 times a second
constexpr double kStepSeconds = 1.0;  // the default slow motion: a median step lasts a second
}  // namespace

TopologyPane::TopologyPane(QWidget* parent)
    : QWidget(parent),
      model_(std::make_unique<RunModel>()),
      clock_(std::make_unique<PlaybackClock>()),
      view_(new TopologyView(this)),
      explain_(new ExplainPanel(this)),
      bar_(new PlaybackBar(this)),
      frameTimer_(new QTimer(this)),
      rebuildTimer_(new QTimer(this)) {
  auto* top = new QHBoxLayout;
  top->setContentsMargins(0, 0, 0, 0);
  top->setSpacing(0);
  top->addWidget(view_, 1);
  // Scrolled, so that a long explanation (many ranks, projector type) never makes the window
  // taller than the screen.
  explainScroll_ = new QScrollArea(this);
  explainScroll_->setFrameShape(QFrame::NoFrame);
  explainScroll_->setWidgetResizable(true);
  explainScroll_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  explainScroll_->setWidget(explain_);
  fitExplainScroll();
  top->addWidget(explainScroll_);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->setSpacing(0);
  lay->addLayout(top, 1);
  // A lesson's question under the view (the view shrinks to make room, so that no rank is
  // hidden behind it), with the button that goes on.
  pauseBox_ = new QFrame(this);
  pauseBox_->setObjectName(QStringLiteral("pauseBox"));
  auto* boxLay = new QHBoxLayout(pauseBox_);
  boxLay->setContentsMargins(14, 10, 14, 10);
  pauseText_ = new QLabel(pauseBox_);
  pauseText_->setWordWrap(true);
  pauseText_->setTextFormat(Qt::RichText);
  QFont pf = pauseText_->font();
  pf.setPixelSize(std::max(18, pf.pixelSize()));
  pauseText_->setFont(pf);
  boxLay->addWidget(pauseText_, 1);
  auto* goOn = new QPushButton(tr("Go on ▶"), pauseBox_);
  goOn->setToolTip(tr("Show the answer and play on"));
  connect(goOn, &QPushButton::clicked, this, &TopologyPane::play);
  boxLay->addWidget(goOn, 0, Qt::AlignVCenter);
  pauseBox_->hide();
  lay->addWidget(pauseBox_);
  lay->addWidget(bar_);
  frameTimer_->setInterval(kFrameMs);
  frameTimer_->setTimerType(Qt::PreciseTimer);
  connect(frameTimer_, &QTimer::timeout, this, &TopologyPane::onFrame);
  rebuildTimer_->setSingleShot(true);
  connect(rebuildTimer_, &QTimer::timeout, this, &TopologyPane::rebuildNow);
  connect(bar_, &PlaybackBar::liveRequested, this, &TopologyPane::goLive);
  connect(bar_, &PlaybackBar::playPauseRequested, this, [this] { playing() ? pause() : play(); });
  connect(bar_, &PlaybackBar::stepForwardRequested, this, &TopologyPane::stepForward);
  connect(bar_, &PlaybackBar::stepBackRequested, this, &TopologyPane::stepBack);
  connect(bar_, &PlaybackBar::speedRequested, this, &TopologyPane::setSpeed);
  connect(bar_, &PlaybackBar::seekRequested, this, &TopologyPane::seek);
  wall_.start();
  TopologyRun none;
  model_->begin(none);
  view_->setRun(*model_);
  explain_->setRun(*model_);
  render();
}

TopologyPane::~TopologyPane() = default;

void TopologyPane::setProjector(bool on) {
  view_->setProjector(on);
  explain_->setProjector(on);
  fitExplainScroll();
  view_->setRun(*model_);
  explain_->setRun(*model_);
  render();
}

void TopologyPane::fitExplainScroll() {
  const int bar = explainScroll_->verticalScrollBar()->sizeHint().width();
  explainScroll_->setMinimumWidth(explain_->minimumWidth() + bar);
  explainScroll_->setMaximumWidth(explain_->maximumWidth() + bar);
}

bool TopologyPane::projector() const { return view_->projector(); }

int TopologyPane::captionPx(bool title) const { return view_->captionPx(title); }

void TopologyPane::beginRun(const TopologyRun& run) {
  nothingToDraw_ = false;
  rebuildTimer_->stop();
  setPauses({});
  model_->begin(run);
  *clock_ = PlaybackClock{};
  clock_->goLive();
  active_ = true;
  stepMode_ = false;
  planNote_.clear();
  setupProblem_.clear();
  explainScroll_->show();
  bar_->setEnabled(true);
  view_->setRun(*model_);
  explain_->setRun(*model_);
  rebuildNow();
}

void TopologyPane::showPlan(const TopologyRun& run, const QString& note) {
  nothingToDraw_ = false;
  planNote_ = note;
  setupProblem_.clear();
  explainScroll_->show();
  enterPlan(run);
}

void TopologyPane::showSetupProblem(const QString& problem) {
  showNothingToDraw(QStringLiteral("No plan: the setup cannot run"), problem);
  nothingToDraw_ = false;
}

void TopologyPane::showNothingToDraw(const QString& title, const QString& detail) {
  nothingToDraw_ = true;
  planNote_.clear();
  setupProblem_ = detail;
  problemTitle_ = title;
  // An explanation of no run would only say so: the caption carries the problem.
  explainScroll_->hide();
  enterPlan(TopologyRun{});
}

// A plan has no time of its own: the clock stays at zero, the playback bar idle.
void TopologyPane::enterPlan(const TopologyRun& run) {
  rebuildTimer_->stop();
  setPauses({});
  model_->plan(run);
  *clock_ = PlaybackClock{};
  clock_->pause();
  active_ = false;
  stepMode_ = false;
  bar_->setEnabled(false);
  view_->setRun(*model_);
  explain_->setRun(*model_);
  rebuildNow();
}

bool TopologyPane::showsPlan() const { return model_->planned() && !nothingToDraw_; }

void TopologyPane::appendEvents(int, const std::vector<TelemetryEvent>& events) {
  if (!active_) return;
  model_->append(events);
  scheduleRebuild();
}

void TopologyPane::endRun() {
  if (!active_) return;
  active_ = false;
  rebuildNow();
  if (clock_->mode() == PlaybackClock::Mode::Live) startReplay();
}

std::vector<TelemetryEvent> TopologyPane::takeEvents() {
  if (active_) return {};
  return model_->takeEvents();
}

void TopologyPane::showRun(const TopologyRun& run, const std::vector<TelemetryEvent>& events) {
  beginRun(run);
  model_->show(events);
  active_ = false;
  rebuildNow();
  startReplay();
}

// Plays the run again from its first message, at the speed where a step lasts about a second.
void TopologyPane::startReplay() {
  clock_->setSpeed(clock_->speedForStepSeconds(kStepSeconds));
  const auto& transfers = model_->timeline().transfers();
  clock_->seek(transfers.empty() ? model_->startNs() : transfers.front().sendStartNs);
  clock_->play();
  stepMode_ = false;
  syncTimer();
  render();
}

void TopologyPane::scheduleRebuild() {
  if (rebuildTimer_->isActive()) return;
  // Coalesce: at most 30 rebuilds a second, and never more than a fifth of the GUI thread's
  // time on them when a rebuild gets slow (large runs).
  rebuildTimer_->start(std::max(kMinRebuildMs, 4 * lastRebuildMs_));
}

void TopologyPane::rebuildNow() {
  rebuildTimer_->stop();
  QElapsedTimer took;
  took.start();
  model_->rebuild(active_);
  lastRebuildMs_ = static_cast<int>(took.elapsed());
  // A plan's times only place its messages on their links: nothing to scrub.
  const bool plan = model_->planned();
  const std::vector<int64_t> boundaries = plan ? std::vector<int64_t>{} : model_->boundaries();
  clock_->setRange(plan ? 0 : model_->startNs(), plan ? 0 : model_->endNs());
  if (!plan) clock_->followLive(steadyNowNs());
  clock_->setBoundaries(boundaries);
  std::vector<uint8_t> phases;
  if (!plan) {
    for (const StepMark& m : model_->steps()) phases.push_back(m.phase);
  }
  bar_->setSteps(boundaries, phases);
  explain_->setTelemetryStatus(model_->held(), model_->dropped(), model_->maxEvents());
  shownMark_ = nullptr;
  shownStrips_ = SIZE_MAX;
  shownStripTime_ = INT64_MIN;
  syncTimer();
  render();
}

void TopologyPane::flushEvents() { rebuildNow(); }

namespace {

// How well the tokens in flight at t show the algorithm (see pauseAtBusiestMoment): distinct
// partial sums first, then their colours, then links in use, then tokens mid-way.
int64_t momentScore(const Timeline& tl, int64_t t, uint64_t all) {
  std::set<std::tuple<int, int, uint64_t>> partial;
  std::set<std::pair<int, int>> links;
  int64_t midway = 0;
  for (size_t i : tl.inFlightAt(t)) {
    const Transfer& x = tl.transfers()[i];
    const int k = std::popcount(x.provenance & all);
    if (k >= 2 && (x.provenance & all) != all) partial.insert({x.sender, x.receiver, x.provenance});
    links.insert({x.sender, x.receiver});
    const double f = Timeline::progress(x, t);
    midway += f > 0.2 && f < 0.8;
  }
  int64_t colours = 0;  // segments drawn on the partial sums' tokens
  for (const auto& p : partial) colours += std::popcount(std::get<2>(p));
  return static_cast<int64_t>(partial.size()) * 1'000'000'000 + colours * 1'000'000 +
         static_cast<int64_t>(links.size()) * 1'000 + midway;
}

}  // namespace

bool TopologyPane::pauseAtBusiestMoment() {
  if (model_->dirty()) rebuildNow();
  const Timeline& tl = model_->timeline();
  const auto& transfers = tl.transfers();
  if (transfers.empty()) return false;
  // Candidates: the middle of every message, and just after its start (on a busy machine
  // ranks drift apart, and messages overlap most as a new one leaves).
  std::vector<int64_t> candidates;
  candidates.reserve(2 * transfers.size());
  for (const Transfer& x : transfers) {
    candidates.push_back(x.sendStartNs + (x.recvEndNs - x.sendStartNs) / 2);
    candidates.push_back(x.sendStartNs + (x.recvEndNs - x.sendStartNs) / 10);
  }
  // A large run: an even sample of the candidates is as good a search.
  constexpr size_t kMaxCandidates = 8000;
  const size_t stride = std::max<size_t>(1, candidates.size() / kMaxCandidates);
  const uint64_t all = allRanksMask(model_->nranks());
  int64_t best = candidates.front();
  int64_t bestScore = -1;
  for (size_t i = 0; i < candidates.size(); i += stride) {
    const int64_t score = momentScore(tl, candidates[i], all);
    if (score > bestScore) {
      bestScore = score;
      best = candidates[i];
    }
  }
  clock_->pause();
  clock_->seek(best);
  stepMode_ = false;
  syncTimer();
  render();
  return true;
}

void TopologyPane::syncTimer() {
  const bool needed = clock_->running() || (clock_->mode() == PlaybackClock::Mode::Live && active_);
  if (needed && !frameTimer_->isActive()) {
    lastFrameNs_ = wall_.nsecsElapsed();
    frameTimer_->start();
  } else if (!needed) {
    frameTimer_->stop();
  }
}

void TopologyPane::onFrame() {
  const int64_t now = wall_.nsecsElapsed();
  advanceFrame(now - lastFrameNs_);
  lastFrameNs_ = now;
}

void TopologyPane::advanceFrame(int64_t wallNs) {
  const int64_t before = clock_->time();
  const bool moving = clock_->running();
  clock_->advance(wallNs);
  clock_->followLive(steadyNowNs());
  if (moving && nextPause_ < static_cast<int>(pauses_.size())) {
    const PlaybackPause& p = pauses_[static_cast<size_t>(nextPause_)];
    const int64_t at = pauseTime(p);
    if (at != INT64_MIN && before <= at && clock_->time() >= at) {
      clock_->seek(at);  // and pauses there
      ++nextPause_;
      atQuestion_ = true;
      answerShown_ = false;
      showPauseBox(QStringLiteral("<b>Stop and think.</b> %1").arg(p.question.toHtmlEscaped()),
                   true);
      emit pausedAtQuestion(p.question);
    }
  }
  render();
  syncTimer();
}

// The time the pause stops at: the end of its step's predecessor in the first iteration the
// run shows; INT64_MIN when the run has no such step.
int64_t TopologyPane::pauseTime(const PlaybackPause& p) const {
  const auto& transfers = model_->timeline().transfers();
  if (transfers.empty()) return INT64_MIN;
  const uint32_t first = transfers.front().iteration;
  if (p.step == 0) return transfers.front().sendStartNs;
  const StepMark* m = model_->markOf(first, p.step - 1);
  return m ? m->endNs : INT64_MIN;
}

void TopologyPane::showPauseBox(const QString& html, bool question) {
  pauseText_->setText(html);
  pauseBox_->setStyleSheet(
      question ? QStringLiteral("#pauseBox{background:#fff4d6;border:2px solid #c98a00;}")
               : QStringLiteral("#pauseBox{background:#e3f4e6;border:2px solid #2f8a3c;}"));
  pauseBox_->findChild<QPushButton*>()->setVisible(question);
  pauseBox_->show();
}

void TopologyPane::setPauses(std::vector<PlaybackPause> pauses) {
  std::stable_sort(pauses.begin(), pauses.end(),
                   [](const PlaybackPause& a, const PlaybackPause& b) { return a.step < b.step; });
  pauses_ = std::move(pauses);
  nextPause_ = 0;
  atQuestion_ = false;
  answerShown_ = false;
  pauseBox_->hide();
}

QString TopologyPane::pauseQuestion() const {
  return atQuestion_ ? pauses_[static_cast<size_t>(nextPause_ - 1)].question : QString();
}

QString TopologyPane::pauseAnswer() const {
  return answerShown_ ? pauses_[static_cast<size_t>(nextPause_ - 1)].answer : QString();
}

void TopologyPane::render() {
  const int64_t t = model_->planned() ? RunModel::planTimeNs() : clock_->time();
  const int64_t stripTime = stepMode_ ? clock_->boundaryAtOrBefore(t) : t;
  view_->showAt(*model_, t, stripTime);
  const StepMark* mark =
      stepMode_ ? model_->stepAt(std::max(t, clock_->startNs())) : captionMark(t);
  const size_t strips = view_->strips().applied();
  if (mark != shownMark_ || strips != shownStrips_ || stripTime != shownStripTime_) {
    if (mark != shownMark_ || strips != shownStrips_) explain_->showAt(*model_, mark, stripTime);
    shownMark_ = mark;
    shownStrips_ = strips;
    shownStripTime_ = stripTime;
  }
  if (model_->planned()) {
    captionPlan(mark);
  } else {
    captionRun(mark, t);
  }
  view_->setCaption(caption_, detail_);
  bar_->showClock(*clock_);
}

void TopologyPane::captionRun(const StepMark* mark, int64_t t) {
  caption_ = mark ? QStringLiteral("%1 · step %2 of %3")
                        .arg(QString::fromUtf8(toString(static_cast<Phase>(mark->phase)).data()))
                        .arg(mark->phaseIndex)
                        .arg(mark->phaseSteps)
                  : (model_->held() == 0 ? QString() : QStringLiteral("starting"));
  // A replay says so first, where a narrow view cannot cut it off.
  const bool live = clock_->mode() == PlaybackClock::Mode::Live;
  QString detail = live ? QString() : QStringLiteral("replay of measured telemetry · ");
  if (mark && model_->iterations() > 0) {
    detail +=
        QStringLiteral("iteration %1 of %2 · ").arg(mark->iteration + 1).arg(model_->iterations());
  }
  detail += QStringLiteral("%1 in flight · ").arg(view_->tokenTransfers().size());
  detail += live ? liveText(t) : PlaybackBar::speedText(clock_->speed());
  detail_ = detail;
}

// The plan says it is one, first in the caption, and what Run will do: step 1 of the schedule's
// steps, its messages, and that nothing has been measured yet.
void TopologyPane::captionPlan(const StepMark* mark) {
  if (!setupProblem_.isEmpty()) {
    caption_ = problemTitle_;
    detail_ = setupProblem_;
    return;
  }
  const RunRequest& q = model_->run().request;
  const Schedule* s = model_->schedule();
  QString title = QStringLiteral("%1 %2 · the plan")
                      .arg(QString::fromStdString(q.algorithm),
                           QString::fromUtf8(toString(q.collective).data()));
  QStringList detail;
  if (mark != nullptr && s != nullptr) {
    title += QStringLiteral(" · step 1 of %1").arg(model_->movingSteps());
    const size_t messages = view_->tokenTransfers().size();
    detail << QStringLiteral("press Run to measure")
           << QStringLiteral("%1 %2 from the schedule, not measured")
                  .arg(messages)
                  .arg(messages == 1 ? QStringLiteral("message") : QStringLiteral("messages"));
  } else {
    detail << QStringLiteral("press Run to measure")
           << (s != nullptr ? QStringLiteral("one rank: nothing moves")
                            : QString::fromStdString(model_->scheduleError()));
  }
  if (!planNote_.isEmpty()) detail << planNote_;
  caption_ = title;
  detail_ = detail.join(QStringLiteral(" · "));
}

// Live, the view trails the ranks (PlaybackClock::kLiveDelayNs, more while telemetry is late):
// it says by how much, on the telemetry's clock, which is the coordinator's and so this
// process's steady clock.
QString TopologyPane::liveText(int64_t t) const {
  QString text = model_->windowed()
                     ? QStringLiteral("live (the newest %1 events)").arg(RunModel::kLiveWindow)
                     : QStringLiteral("live");
  if (!active_ || model_->held() == 0) return text;
  const double behind = static_cast<double>(std::max<int64_t>(steadyNowNs() - t, 0)) * 1e-9;
  return text + QStringLiteral(" · %1 s behind").arg(behind, 0, 'f', 1);
}

// While playing, the caption names what the view shows: the step most messages in flight
// belong to (ranks drift apart, and a sender's step ends when its send does, before the
// message lands), also while no rank has ended it yet (live). With nothing in flight, the step
// whose span holds t.
const StepMark* TopologyPane::captionMark(int64_t t) const {
  std::map<std::pair<uint32_t, uint32_t>, int> count;
  const auto& transfers = model_->timeline().transfers();
  for (size_t i : view_->tokenTransfers()) count[{transfers[i].iteration, transfers[i].step}]++;
  const auto best = std::max_element(
      count.begin(), count.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  if (best != count.end()) {
    const auto [iteration, step] = best->first;
    if (const StepMark* m = model_->markOf(iteration, step)) return m;
    if (const StepMark* m = model_->markUnderWay(iteration, step)) return m;
  }
  return model_->stepAt(t);
}

void TopologyPane::goLive() {
  if (model_->planned()) return;  // nothing measured to play
  if (!active_) {
    // A finished run has no live edge: play it again from the start instead.
    startReplay();
    return;
  }
  clock_->goLive();
  clock_->followLive(steadyNowNs());
  stepMode_ = false;
  syncTimer();
  render();
}

void TopologyPane::play() {
  if (model_->planned()) return;
  if (atQuestion_) {
    // Going on reveals the answer on the canvas while the step plays out.
    atQuestion_ = false;
    answerShown_ = true;
    const PlaybackPause& p = pauses_[static_cast<size_t>(nextPause_ - 1)];
    showPauseBox(QStringLiteral("<b>Answer.</b> %1").arg(p.answer.toHtmlEscaped()), false);
  } else if (answerShown_) {
    answerShown_ = false;
    pauseBox_->hide();
  }
  clock_->play();
  stepMode_ = false;
  lastFrameNs_ = wall_.nsecsElapsed();
  syncTimer();
  render();
}

void TopologyPane::pause() {
  clock_->pause();
  syncTimer();
  render();
}

void TopologyPane::stepForward() {
  if (clock_->mode() == PlaybackClock::Mode::Live) clock_->pause();
  clock_->stepForward();
  stepMode_ = true;
  lastFrameNs_ = wall_.nsecsElapsed();
  syncTimer();
  render();
}

void TopologyPane::stepBack() {
  if (clock_->mode() == PlaybackClock::Mode::Live) clock_->pause();
  clock_->stepBack();
  stepMode_ = true;
  syncTimer();
  render();
}

void TopologyPane::seek(int64_t tNs) {
  if (clock_->mode() == PlaybackClock::Mode::Live) clock_->pause();
  clock_->seek(tNs);
  stepMode_ = false;
  syncTimer();
  render();
}

void TopologyPane::setSpeed(double factor) {
  clock_->setSpeed(factor);
  render();
}

double TopologyPane::speed() const { return clock_->speed(); }
bool TopologyPane::playing() const { return clock_->running(); }
int64_t TopologyPane::playbackTimeNs() const { return clock_->time(); }
uint64_t TopologyPane::eventsHeld() const { return model_->held(); }
uint64_t TopologyPane::eventsDropped() const { return model_->dropped(); }
uint64_t TopologyPane::maxEventsHeld() const { return model_->maxEvents(); }
void TopologyPane::setMaxEventsHeld(uint64_t n) { model_->setMaxEvents(n); }
uint64_t TopologyPane::eventsOutOfOrder() const { return model_->outOfOrder(); }
QString TopologyPane::captionText() const { return caption_; }
QString TopologyPane::captionDetail() const { return detail_; }
uint64_t TopologyPane::framesPainted() const { return view_->framesPainted(); }

}  // namespace arl::ui
