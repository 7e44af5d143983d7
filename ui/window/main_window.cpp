#include "window/main_window.h"

#include <QAction>
#include <QCloseEvent>
#include <QComboBox>
#include <QDockWidget>
#include <QFileInfo>
#include <QLabel>
#include <QLoggingCategory>
#include <QScreen>
#include <QSettings>
#include <QStatusBar>
#include <QStringList>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <utility>

#include "charts/charts_panel.h"
#include "export/nccl_tests.h"
#include "runtime/sweep.h"
#include "topology/explain_panel.h"
#include "topology/run_explanation.h"
#include "topology/run_model.h"
#include "topology/topology_pane.h"
#include "topology/topology_run.h"
#include "window/error_banner.h"
#include "window/flight_record_view.h"
#include "window/frame_meter.h"
#include "window/lab_runtime.h"
#include "window/setup_fields.h"
#include "window/setup_panel.h"
#include "window/setup_settings.h"

Q_LOGGING_CATEGORY(lcWindow, "arl.window")

namespace arl::ui {

namespace {

// The model the session's runs were predicted with, for the explanation beside them.
ModelContext modelContextOf(const BenchReport& r) {
  const DataPlaneUse plane = dataPlaneUse(r.config.dataPlane, r.workers);
  return {r.model, readModelSource(r.modelSource),
          runsOverSharedMemory(r.config.dataPlane, r.workers),
          plane.hosts > 1 ? plane.text : std::string()};
}

}  // namespace

MainWindow::MainWindow(WindowOptions options, QWidget* parent)
    : QMainWindow(parent), options_(std::move(options)) {
  registerRuntimeTypes();
  setWindowTitle(tr("allreduce-lab"));
  setObjectName(QStringLiteral("allreduceLabWindow"));
  setDockOptions(QMainWindow::AnimatedDocks | QMainWindow::AllowTabbedDocks);
  banner_ = new ErrorBanner(this);
  connect(banner_, &ErrorBanner::flightRecordRequested, this, [this] { showFlightRecord(); });
  topology_ = new TopologyPane(this);
  auto* centre = new QWidget(this);
  auto* col = new QVBoxLayout(centre);
  col->setContentsMargins(0, 0, 0, 0);
  col->setSpacing(0);
  col->addWidget(banner_);
  col->addWidget(topology_, 1);
  setCentralWidget(centre);
  frames_ = new FrameMeter(this);
  frames_->watch(topology_);

  buildActions();
  buildDocks();
  buildToolBar();
  buildMenus();
  setAcceptDrops(true);
  buildStatusBar();

  SessionSetup setup;
  if (options_.setup) {
    setup = *options_.setup;
  } else if (options_.persistSettings) {
    QSettings st;
    setup = loadSetup(st);
  }
  panel_->setSetup(setup);
  mirrorToolBar();
  charts_->showSetup(benchConfigOf(setup));
  setInitialGeometry();
  applyDefaultSizes();
  defaultLayout_ = saveState();
  restoreLayout();

  validate_ = new QTimer(this);
  validate_->setSingleShot(true);
  validate_->setInterval(120);
  connect(validate_, &QTimer::timeout, this, &MainWindow::validateNow);
  connect(panel_, &SetupPanel::changed, this, &MainWindow::setupEdited);

  runtime_ = new LabRuntime(options_.workerBinary);
  runtime_->moveToThread(&runtimeThread_);
  runtimeThread_.setObjectName(QStringLiteral("arl-runtime"));
  connectRuntime();
  runtimeThread_.start();
  const WorkerSetup ws{setup.localWorkers, setup.listen, setup.backend, setup.localDevices(),
                       options_.security};
  QMetaObject::invokeMethod(
      runtime_, [r = runtime_, ws] { r->configure(ws); }, Qt::QueuedConnection);
  validateNow();
  setRunning(false);
}

MainWindow::~MainWindow() { stopRuntimeNow(); }

// The first size, before any saved one: the screen's available area up to 1920x1200, where it
// is at least the 1280x800 the window is laid out for; else (a small or virtual screen, as
// offscreen) 1600x1000.
void MainWindow::setInitialGeometry() {
  const QSize fallback(1600, 1000);
  const QScreen* s = screen();
  const QRect avail = s != nullptr ? s->availableGeometry() : QRect();
  if (avail.width() < 1280 || avail.height() < 800) {
    resize(fallback);
    return;
  }
  resize(avail.size().boundedTo(QSize(1920, 1200)));
  move(avail.topLeft());
}

// Stops the runtime and waits for it: only when the window is destroyed without having been
// closed (the close path does the same without blocking the GUI thread).
void MainWindow::stopRuntimeNow() {
  if (!runtime_) return;
  if (runtimeThread_.isRunning()) {
    if (!runtimeDown_) {
      QMetaObject::invokeMethod(
          runtime_, [r = runtime_] { r->shutdown(); }, Qt::BlockingQueuedConnection);
    }
    runtimeThread_.quit();
    runtimeThread_.wait();
  }
  delete runtime_;
  runtime_ = nullptr;
}

void MainWindow::connectRuntime() {
  connect(runtime_, &LabRuntime::workersChanged, this, &MainWindow::onWorkers);
  connect(runtime_, &LabRuntime::sessionStarted, this, &MainWindow::onSessionStarted);
  connect(runtime_, &LabRuntime::runStarted, this, &MainWindow::onRunStarted);
  connect(runtime_, &LabRuntime::telemetry, this, &MainWindow::onTelemetry);
  connect(runtime_, &LabRuntime::rowReady, this, &MainWindow::onRow);
  connect(runtime_, &LabRuntime::progress, this, [this](const RunProgress& p) { progress_ = p; });
  connect(runtime_, &LabRuntime::sessionFinished, this, &MainWindow::onSessionFinished);
  connect(runtime_, &LabRuntime::message, this, &MainWindow::onRuntimeMessage);
  connect(runtime_, &LabRuntime::recordingLoaded, this, &MainWindow::onRecording);
  connect(runtime_, &LabRuntime::recordingFailed, this, [this](const QString& e) {
    banner_->showProblem(tr("Could not open the recording"), e);
    setMode(tr("no recording"), QStringLiteral("#555555"));
    emit recordingRefused(e);
  });
  connect(runtime_, &LabRuntime::trainRecordLoaded, this, &MainWindow::onTrainRecord);
  connect(runtime_, &LabRuntime::trainRecordFailed, this, &MainWindow::onTrainRecordFailed);
  connect(runtime_, &LabRuntime::shutDown, this, &MainWindow::onShutDown);
}

void MainWindow::setupEdited() {
  mirrorToolBar();
  charts_->showSetup(benchConfigOf(panel_->setup()));
  validate_->start();
  if (!running_) {
    const SessionSetup s = panel_->setup();
    const WorkerSetup ws{s.localWorkers, s.listen, s.backend, s.localDevices(), options_.security};
    QMetaObject::invokeMethod(
        runtime_, [r = runtime_, ws] { r->configure(ws); }, Qt::QueuedConnection);
  }
}

// Checks the setup as core will (on the hosts of the workers present when they make the
// world) and marks the fields it would refuse.
void MainWindow::validateNow() {
  std::vector<SetupProblem> problems;
  const SessionSetup s = panel_->setup(&problems);
  std::vector<std::string> hosts;
  if (static_cast<int>(workers_.size()) >= s.nranks()) {
    for (size_t i = 0; i < static_cast<size_t>(s.nranks()); ++i) hosts.push_back(workers_[i].host);
  }
  for (SetupProblem& p : checkSetup(s, hosts)) {
    const bool seen = std::any_of(problems.begin(), problems.end(),
                                  [&](const SetupProblem& q) { return q.field == p.field; });
    if (!seen) problems.push_back(std::move(p));
  }
  problems_ = problems;
  panel_->showProblems(problems_);
  setRunning(running_);
  updatePlan(s);
}

namespace {

// Whether two setups make the same runs to draw (iterations, warm-up and the endpoint do not
// change what the pane shows).
bool samePlan(SessionSetup a, SessionSetup b) {
  for (SessionSetup* s : {&a, &b}) {
    s->iterations = 0;
    s->warmup = 0;
    s->listen.clear();
  }
  return a == b;
}

// What the plan was made from, where the setup asks for more than one run: the first size of
// a sweep, the first algorithm of a comparison, the first slice size.
QString planNote(const SessionSetup& s) {
  const auto text = [](uint64_t b) { return QString::fromStdString(formatSize(b)); };
  QStringList parts;
  const std::vector<uint64_t> sizes = s.size.values();
  if (sizes.size() > 1) {
    parts << QObject::tr("%1, the first of the sweep's %2 sizes")
                 .arg(text(sizes.front()))
                 .arg(sizes.size());
  } else if (!sizes.empty()) {
    parts << QObject::tr("%1 message").arg(text(sizes.front()));
  }
  const std::vector<std::string> algos = s.algorithms();
  if (algos.size() > 1) {
    parts << QObject::tr("%1, the first of %2 algorithms")
                 .arg(QString::fromStdString(algos.front()))
                 .arg(algos.size());
  }
  const std::vector<uint64_t> slices = s.slice.values();
  if (slices.size() > 1) {
    parts << QObject::tr("slice %1, the first of %2").arg(text(slices.front())).arg(slices.size());
  }
  return parts.join(QStringLiteral(" · "));
}

}  // namespace

// Before a run, and after one once the setup changes what a run would be: the plan of the
// setup's first run in the topology pane, or the setup's problem. A run or a replay shown
// keeps its place until then; a live session keeps it always.
void MainWindow::updatePlan(const SessionSetup& s) {
  if (running_ || closing_) return;
  if (planFrom_ && samePlan(*planFrom_, s) && !topology_->showsPlan()) return;
  planFrom_ = s;
  if (!problems_.empty()) {
    const SetupProblem& p = problems_.front();
    topology_->showSetupProblem(
        tr("%1: %2").arg(panel_->fieldName(p.field), QString::fromStdString(p.rule)));
    return;
  }
  std::vector<WorkerInfo> world;
  if (static_cast<int>(workers_.size()) >= s.nranks()) {
    world.assign(workers_.begin(), workers_.begin() + s.nranks());
  }
  topology_->showPlan(firstRunOf(sweepSpecOf(s), s.nranks(), world), planNote(s));
}

bool MainWindow::run() {
  validate_->stop();
  validateNow();
  if (running_ || closing_ || !problems_.empty()) return false;
  const SessionSetup setup = panel_->setup();
  SessionRequest req{setup, sweepSpecOf(setup)};
  BenchReport fresh;
  fresh.config = benchConfigOf(setup);
  fresh.model = options_.model;
  fresh.modelSource = options_.modelSource;
  report_ = std::move(fresh);
  req.spec.model = report_.model;
  eventsShown_ = 0;
  eventsDropped_ = 0;
  progress_ = RunProgress{};
  banner_->hide();
  banner_->setFlightRecordAvailable(false);  // the last failure's record leaves with its banner
  setRunning(true);
  setMode(tr("● waiting for workers"), QStringLiteral("#9a6700"));
  if (options_.persistSettings) saveSettings();
  QMetaObject::invokeMethod(
      runtime_, [r = runtime_, req] { r->startSession(req); }, Qt::QueuedConnection);
  return true;
}

void MainWindow::stop() {
  if (!running_) return;
  QMetaObject::invokeMethod(
      runtime_, [r = runtime_] { r->stopSession(QStringLiteral("stopped by the user")); },
      Qt::QueuedConnection);
}

void MainWindow::replayLesson(const QString& path, const std::vector<PlaybackPause>& pauses,
                              bool bundled) {
  if (running_) return;
  pendingPauses_ = pauses;
  lessonReplayLabel_ = bundled ? tr("⟲ REPLAY · bundled %1").arg(QFileInfo(path).fileName())
                               : tr("⟲ REPLAY · lesson, run just now");
  openRecording(path);
}

void MainWindow::openRecording(const QString& path) {
  if (running_) return;
  setMode(tr("⟲ opening…"), QStringLiteral("#555555"));
  QMetaObject::invokeMethod(
      runtime_, [r = runtime_, path] { r->loadRecording(path); }, Qt::QueuedConnection);
}

void MainWindow::openTrainingRecord(const QString& path) {
  QMetaObject::invokeMethod(
      runtime_, [r = runtime_, path] { r->loadTrainRecord(path); }, Qt::QueuedConnection);
}

void MainWindow::setRunning(bool running) {
  running_ = running;
  runAction_->setEnabled(!running && problems_.empty() && !closing_);
  runAction_->setToolTip(problems_.empty() ? tr("Run the setup (Ctrl+R)")
                                           : tr("Fix the fields marked in red first"));
  stopAction_->setEnabled(running);
  openAction_->setEnabled(!running);
  panel_->setRunning(running);
}

void MainWindow::onWorkers(const WorkerList& workers, const QString& joinCommand,
                           const QString& control, bool insecure) {
  workers_ = workers;
  panel_->setWorkers(workers, joinCommand);
  panel_->setControlSecurity(control, insecure);
  validate_->start();
  emit workersUpdated(workers);
}

void MainWindow::onSessionStarted(const WorkerList& world) {
  report_.workers = world;
  charts_->beginSession(report_.config, world, report_.modelSource);
  setMode(tr("● LIVE"), QStringLiteral("#1a7f37"));
}

void MainWindow::onRunStarted(const TopologyRun& run) {
  topology_->beginRun(run);
  frames_->watch(topology_);
  emit runShown(run);
}

void MainWindow::onTelemetry(const TelemetryBatches& batches) {
  for (const TelemetryBatchEvent& b : batches.batches) topology_->appendEvents(b.rank, b.events);
  eventsShown_ += batches.events;
  emit telemetryShown(batches);
}

void MainWindow::onRow(const SweepRow& row) {
  topology_->endRun();
  report_.rows.push_back(row);
  SweepRow& kept = report_.rows.back();
  // The run's events came in its batches, and the pane holds them: from now on the row keeps
  // them (for the charts, exports, recordings and replays), the pane what it drew.
  if (topology_->model().run().runId == kept.result.runId) {
    kept.result.events = topology_->takeEvents();
  }
  eventsDropped_ += kept.result.eventsDropped;
  if (kept.result.state == RunState::Done) {
    charts_->addRow(kept);
    charts_->showRun(kept);
    if (topology_->model().run().runId == kept.result.runId) {
      topology_->explanation()->setResult(kept, modelContextOf(report_));
    }
  }
  emit rowShown(kept);
}

void MainWindow::onSessionFinished(const SessionEnd& end) {
  report_.error = end.error;
  setRunning(false);
  const bool ok = end.error.empty() && !end.stoppedByUser;
  setMode(ok ? tr("✓ done · %1 runs").arg(report_.rows.size()) : tr("idle"),
          ok ? QStringLiteral("#2f6f3e") : QStringLiteral("#555555"));
  progress_ = RunProgress{};
  if (end.stoppedByUser) {
    statusBar()->showMessage(tr("Stopped: %1 runs completed").arg(report_.rows.size()), 8000);
  } else if (!end.error.empty()) {
    banner_->showError(QString::fromStdString(end.error), end.failedRank, end.lastStep);
    banner_->setFlightRecordAvailable(!report_.rows.empty() &&
                                      !report_.rows.back().result.flight.empty());
  } else {
    statusBar()->showMessage(tr("Finished: %1 runs").arg(report_.rows.size()), 8000);
  }
  emit sessionEnded(end);
}

FlightRecordDialog* MainWindow::showFlightRecord() {
  if (report_.rows.empty() || report_.rows.back().result.flight.empty()) return nullptr;
  const RunResult& failed = report_.rows.back().result;
  if (flightDialog_ == nullptr) flightDialog_ = new FlightRecordDialog(this);
  flightDialog_->setFlightRecord(failed.flight, failed.runId);
  flightDialog_->show();
  flightDialog_->raise();
  return flightDialog_;
}

void MainWindow::onRecording(const BenchReport& report, const QString& path) {
  if (!report.source.empty() && !pendingPauses_) {
    onImported(report, path);
    return;
  }
  report_ = report;
  charts_->setReport(report_);
  const SweepRow* shown = nullptr;
  for (const SweepRow& r : report_.rows) {
    if (r.result.state == RunState::Done) shown = &r;
  }
  if (shown) showInPane(*shown);
  frames_->watch(topology_);
  if (pendingPauses_) {
    // A lesson's run (made just now, in a temporary folder) or its bundled recording.
    setMode(lessonReplayLabel_, QStringLiteral("#0b5cad"));
    topology_->setPauses(std::move(*pendingPauses_));
    pendingPauses_.reset();
  } else {
    // A training run's recording says so: its iterations are training steps.
    const bool training = std::any_of(report_.rows.begin(), report_.rows.end(),
                                      [](const SweepRow& r) { return r.result.request.train; });
    setMode((training ? tr("⟲ REPLAY · TRAINING · %1") : tr("⟲ REPLAY · %1"))
                .arg(QFileInfo(path).fileName()),
            QStringLiteral("#0b5cad"));
    rememberRecent(path);
  }
  emit recordingShown(path);
}

bool MainWindow::showRow(size_t index) {
  if (running_ || index >= report_.rows.size()) return false;
  const SweepRow& row = report_.rows[index];
  if (row.result.state != RunState::Done) return false;
  showInPane(row);
  frames_->watch(topology_);
  return true;
}

void MainWindow::showInPane(const SweepRow& row) {
  charts_->showRun(row);
  const RunResult& r = row.result;
  if (!r.events.empty() || r.request.telemetry != TelemetryLevel::Off) {
    topology_->showRun(topologyRunOf(report_, row), r.events);
    topology_->explanation()->setResult(row, modelContextOf(report_));
    return;
  }
  const bool imported = isImportedLabel(r.request.algorithm);
  topology_->showNothingToDraw(
      tr("%1: no chunk telemetry").arg(QString::fromStdString(r.request.algorithm)),
      imported ? tr("The file holds each size's time and bandwidth, not the chunks that moved, "
                    "so nothing is animated: its results are in the charts.")
               : tr("The run was made with telemetry off: its results are in the charts."));
}

void MainWindow::onImported(const BenchReport& imported, const QString& path) {
  // Beside the session shown (the lab's runs or an earlier file), or alone.
  const bool beside = !running_ && !report_.rows.empty();
  if (beside) {
    uint64_t nextId = 0;
    for (const SweepRow& r : report_.rows) nextId = std::max(nextId, r.result.runId);
    for (SweepRow r : imported.rows) {
      r.result.runId = ++nextId;
      report_.rows.push_back(std::move(r));
    }
  } else {
    report_ = imported;
  }
  charts_->setReport(report_);
  showInPane(imported.rows.back());
  setMode(tr("IMPORTED · %1").arg(QFileInfo(path).fileName()), QStringLiteral("#6a3d9a"));
  statusBar()->showMessage(QString::fromStdString(imported.source), 30000);
  rememberRecent(path);
  emit recordingShown(path);
}

void MainWindow::onRuntimeMessage(const QString& text, int level) {
  qCInfo(lcWindow).noquote() << text;
  if (level >= 2) banner_->showProblem(tr("The workers could not start"), text);
  statusBar()->showMessage(text, 10000);
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (runtimeDown_ || !runtime_) {
    event->accept();
    return;
  }
  // Stop the run and the workers on the runtime's thread; close once it says they are gone.
  event->ignore();
  if (closing_) return;
  closing_ = true;
  if (options_.persistSettings) saveSettings();
  setEnabled(false);
  statusBar()->showMessage(tr("Stopping the workers…"));
  QMetaObject::invokeMethod(
      runtime_, [r = runtime_] { r->shutdown(); }, Qt::QueuedConnection);
}

void MainWindow::onShutDown() {
  runtimeDown_ = true;
  runtimeThread_.quit();
  runtimeThread_.wait();  // its event loop ends at once: the work is done
  emit runtimeStopped();
  if (closing_) close();
}

void MainWindow::saveSettings() {
  QSettings st;
  saveSetup(st, panel_->setup());
  st.setValue(QStringLiteral("window/geometry"), saveGeometry());
  st.setValue(QStringLiteral("window/setupSections"), panel_->openSections());
  st.setValue(QStringLiteral("window/state"), saveState());
}

void MainWindow::restoreLayout() {
  if (!options_.persistSettings) return;
  QSettings st;
  restoreGeometry(st.value(QStringLiteral("window/geometry")).toByteArray());
  restoreState(st.value(QStringLiteral("window/state")).toByteArray());
  panel_->setOpenSections(st.value(QStringLiteral("window/setupSections")).toStringList());
}

}  // namespace arl::ui
