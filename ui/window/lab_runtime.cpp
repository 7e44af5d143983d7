#include "window/lab_runtime.h"

#include <QLoggingCategory>
#include <algorithm>
#include <exception>
#include <optional>
#include <string>

#include "backend/registry.h"
#include "base/errors.h"
#include "export/export.h"
#include "export/nccl_tests.h"
#include "export/train_export.h"
#include "transport/zmq/curve_keys.h"

Q_LOGGING_CATEGORY(lcRuntime, "arl.window.runtime")

namespace arl::ui {

namespace {

// Local workers start in well under a second; remote ones are started by hand once the join
// command shows.
constexpr std::chrono::seconds kLocalJoinTimeout{20};
constexpr std::chrono::seconds kRemoteJoinTimeout{300};
// Events taken per drain, so that a flood of telemetry cannot starve the hand-over timer.
constexpr size_t kEventsPerDrain = 4096;

// How the control socket listens, for the setup panel.
QString controlText(const ControlSecurityState& s) {
  if (s.curve) {
    return QStringLiteral("encrypted (CURVE), lab key %1; %2 worker key(s) allowed by %3")
        .arg(QString::fromStdString(keyFingerprint(s.serverKey)))
        .arg(s.allowed)
        .arg(QString::fromStdString(s.allowFile));
  }
  if (s.clearOnNetwork) {
    return QStringLiteral(
        "INSECURE: in the clear on the network (--insecure): anyone who "
        "reaches the port may join and read the data");
  }
  return QStringLiteral("this machine only, in the clear");
}

}  // namespace

void registerRuntimeTypes() {
  qRegisterMetaType<WorkerList>("arl::ui::WorkerList");
  qRegisterMetaType<TelemetryBatches>("arl::ui::TelemetryBatches");
  qRegisterMetaType<SessionEnd>("arl::ui::SessionEnd");
  qRegisterMetaType<RunProgress>("arl::ui::RunProgress");
  qRegisterMetaType<TopologyRun>("arl::ui::TopologyRun");
  qRegisterMetaType<SweepRow>("arl::SweepRow");
  qRegisterMetaType<BenchReport>("arl::BenchReport");
  qRegisterMetaType<TrainRecord>("arl::TrainRecord");
}

LabRuntime::LabRuntime(std::string workerBinary, QObject* parent)
    : QObject(parent),
      workerBinary_(std::move(workerBinary)),
      handOver_(new QTimer(this)),
      poll_(new QTimer(this)) {
  handOver_->setInterval(kHandOverMs);
  connect(handOver_, &QTimer::timeout, this, &LabRuntime::flushTelemetry);
  // The coordinator posts a drain when its queue turns non-empty; the poll also watches the
  // join deadline and catches anything a post raced past.
  poll_->setInterval(100);
  connect(poll_, &QTimer::timeout, this, &LabRuntime::drain);
}

LabRuntime::~LabRuntime() {
  sweep_.reset();
  coord_.reset();
}

void LabRuntime::configure(const WorkerSetup& w) {
  want_ = w;
  if (!sweep_ && !pending_) ensureCoordinator();
}

namespace {

// Why the local workers of `w` cannot run on this host's GPUs (none, or a missing device),
// or nullopt: said before they start, as bench says it.
std::optional<std::string> localDeviceProblem(const WorkerSetup& w) {
  if (w.localWorkers == 0) return std::nullopt;
  return localDevicesProblem(w.backend, w.devices, w.localWorkers);
}

}  // namespace

void LabRuntime::ensureCoordinator() {
  if (coord_ && have_ == want_) return;
  sweep_.reset();
  coord_.reset();  // waits for the old workers to leave
  if (auto why = localDeviceProblem(want_)) {
    coord_.reset();
    poll_->stop();
    emit message(
        QStringLiteral("Could not start the workers: %1").arg(QString::fromStdString(*why)), 2);
    emit workersChanged({}, {}, {}, false);
    return;
  }
  CoordinatorOptions opt;
  opt.localWorkers = want_.localWorkers;
  opt.listen = want_.listen;
  opt.security = want_.security;
  opt.backend = want_.backend;
  opt.localDevices = want_.devices;
  opt.workerBinary = workerBinary_;
  opt.joinTimeout = std::chrono::milliseconds(kLocalJoinTimeout);
  opt.onEventsReady = [this] {
    QMetaObject::invokeMethod(this, &LabRuntime::drain, Qt::QueuedConnection);
  };
  try {
    coord_ = std::make_unique<Coordinator>(std::move(opt));
    have_ = want_;
    poll_->start();
    emitWorkers();
  } catch (const std::exception& e) {
    coord_.reset();
    poll_->stop();
    emit message(
        QStringLiteral("Could not start the workers: %1").arg(QString::fromStdString(e.what())), 2);
    emit workersChanged({}, {}, {}, false);
  }
}

namespace {

std::vector<std::pair<uint64_t, int>> ranksOf(const std::vector<WorkerInfo>& workers) {
  std::vector<std::pair<uint64_t, int>> out;
  for (const WorkerInfo& w : workers) out.emplace_back(w.serial, w.spare ? -1 : w.rank);
  return out;
}

}  // namespace

void LabRuntime::emitWorkers() {
  if (!coord_) return;
  const ControlSecurityState sec = coord_->security();
  const std::vector<WorkerInfo> workers = coord_->workers();
  shownRanks_ = ranksOf(workers);
  emit workersChanged(workers, QString::fromStdString(coord_->joinCommand()), controlText(sec),
                      sec.clearOnNetwork);
}

bool LabRuntime::ranksChanged() const {
  return coord_ && ranksOf(coord_->workers()) != shownRanks_;
}

void LabRuntime::startSession(const SessionRequest& req) {
  if (sweep_ || pending_) {
    emit message(QStringLiteral("A session is already running"), 1);
    return;
  }
  want_.localWorkers = req.setup.localWorkers;
  want_.listen = req.setup.listen;
  want_.backend = req.setup.backend;
  want_.devices = req.setup.localDevices();
  ensureCoordinator();
  if (!coord_) {
    emit sessionFinished({"the coordinator could not start (see the message above)", -1, false});
    return;
  }
  pending_ = req;
  end_ = SessionEnd{};
  const auto timeout = req.setup.remoteWorkers > 0 ? kRemoteJoinTimeout : kLocalJoinTimeout;
  joinDeadline_ = std::chrono::steady_clock::now() + timeout;
  drain();
}

void LabRuntime::stopSession(const QString& reason) {
  if (pending_) {
    pending_.reset();
    emit sessionFinished({reason.toStdString(), -1, true});
    return;
  }
  if (!sweep_) return;
  end_.stoppedByUser = true;
  sweep_->stop(reason.toStdString());
  drain();
}

void LabRuntime::shutdown() {
  if (sweep_) sweep_->stop("the window closed");
  pending_.reset();
  handOver_->stop();
  poll_->stop();
  sweep_.reset();
  coord_.reset();  // shuts every worker down; kills those that do not leave
  emit shutDown();
}

void LabRuntime::loadRecording(const QString& path) {
  try {
    emit recordingLoaded(readSessionFile(path.toStdString()), path);
  } catch (const std::exception& e) {
    emit recordingFailed(QString::fromStdString(e.what()));
  }
}

void LabRuntime::loadTrainRecord(const QString& path) {
  try {
    emit trainRecordLoaded(readTrainFile(path.toStdString()), path);
  } catch (const TrainRecordError& e) {
    emit trainRecordFailed(QString::fromStdString(e.what()));
  }
}

void LabRuntime::drain() {
  if (!coord_) return;
  std::vector<CoordinatorEvent> evs;
  coord_->takeEvents(evs, std::chrono::milliseconds(0), kEventsPerDrain);
  bool workersMoved = false;
  for (CoordinatorEvent& ev : evs) {
    workersMoved |=
        std::holds_alternative<WorkerJoined>(ev) || std::holds_alternative<WorkerLeft>(ev);
    handle(ev);
  }
  if (workersMoved || ranksChanged()) emitWorkers();
  if (pending_) checkJoinDeadline();
  if (evs.size() == kEventsPerDrain) {
    QMetaObject::invokeMethod(this, &LabRuntime::drain, Qt::QueuedConnection);
  }
}

void LabRuntime::handle(CoordinatorEvent& ev) {
  if (const auto* l = std::get_if<LogEvent>(&ev)) {
    // The coordinator's warnings go to the status bar; a run's failure arrives with its result.
    if (l->level >= 1) emit message(QString::fromStdString(l->text), 1);
    return;
  }
  if (const auto* w = std::get_if<WorkerLeft>(&ev); w && !w->joined && pending_) {
    end_.error = w->beforeJoining();
    return;
  }
  if (!sweep_) return;
  if (auto* t = std::get_if<TelemetryBatchEvent>(&ev); t && t->runId == sweep_->currentRunId()) {
    batches_.events += t->events.size();
    if (!t->events.empty()) lastStep_[t->rank] = t->events.back().step;
    batches_.batches.push_back(std::move(*t));  // the sweep keeps none (beginSweep)
    if (!handOver_->isActive()) handOver_->start();
  }
  const bool finished = std::holds_alternative<RunFinished>(ev);
  if (finished) flushTelemetry();  // the run's telemetry reaches the GUI before its row
  sweep_->onEvent(ev);
  if (sweep_->finished()) {
    finishSession();
  } else if (finished) {
    announceRun();
  }
}

void LabRuntime::checkJoinDeadline() {
  const size_t need = static_cast<size_t>(pending_->setup.nranks());
  std::vector<WorkerInfo> ranked;
  for (const WorkerInfo& w : coord_->workers()) {
    if (!w.spare && w.rank >= 0) ranked.push_back(w);
  }
  if (end_.error.empty() && ranked.size() >= need) {
    beginSweep();
    return;
  }
  if (end_.error.empty() && std::chrono::steady_clock::now() < joinDeadline_) return;
  std::string why = end_.error;
  if (why.empty()) {
    why = std::to_string(ranked.size()) + " of " + std::to_string(need) + " workers joined in time";
    if (pending_->setup.remoteWorkers > 0) {
      why += "; start each remote worker with: " + coord_->joinCommand();
    }
  }
  pending_.reset();
  emit sessionFinished({why, -1, false});
}

void LabRuntime::beginSweep() {
  std::vector<WorkerInfo> world;
  for (const WorkerInfo& w : coord_->workers()) {
    if (!w.spare && w.rank >= 0) world.push_back(w);
  }
  world.resize(static_cast<size_t>(pending_->setup.nranks()));
  SweepSpec spec = pending_->spec;
  // A run's events reach the window once, in the batches handed over, and its row is given
  // them there (MainWindow::onRow): the sweep keeps no copy.
  spec.keepTelemetry = false;
  pending_.reset();
  emit sessionStarted(world);
  sweep_ = std::make_unique<Sweep>(*coord_, std::move(spec), world,
                                   [this](const SweepRow& row) { emit rowReady(row); });
  announcedRun_ = 0;
  sweep_->start();
  if (sweep_->finished()) {
    finishSession();
    return;
  }
  announceRun();
}

// Tells the GUI about the run the sweep has just submitted (once per run).
void LabRuntime::announceRun() {
  if (!sweep_ || sweep_->currentRunId() == 0 || sweep_->currentRunId() == announcedRun_) return;
  announcedRun_ = sweep_->currentRunId();
  lastStep_.clear();
  const SweepPoint& p = sweep_->points()[sweep_->index()];
  const auto& world = sweep_->world();
  emit runStarted(topologyRunOf(announcedRun_, sweep_->currentRequest(),
                                static_cast<int>(world.size()), world));
  RunProgress pr;
  pr.runIndex = sweep_->index() + 1;
  pr.runTotal = sweep_->points().size();
  pr.label = p.algorithm + " " + formatSize(p.sizeBytes) + " slice " + formatSize(p.sliceBytes);
  emit progress(pr);
}

void LabRuntime::finishSession() {
  flushTelemetry();
  end_.error = sweep_->error();
  for (const SweepRow& r : sweep_->rows()) {
    if (r.result.state != RunState::Done && r.result.failedRank >= 0)
      end_.failedRank = r.result.failedRank;
  }
  const auto step = lastStep_.find(end_.failedRank);
  if (step != lastStep_.end()) end_.lastStep = static_cast<int>(step->second);
  sweep_.reset();
  emit sessionFinished(end_);
  end_ = SessionEnd{};
  // Workers changed while the session held its coordinator: restart it now.
  ensureCoordinator();
}

void LabRuntime::flushTelemetry() {
  handOver_->stop();
  if (batches_.batches.empty()) return;
  TelemetryBatches out;
  std::swap(out, batches_);
  emit telemetry(out);
}

}  // namespace arl::ui
