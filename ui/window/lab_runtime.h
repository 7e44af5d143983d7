// The window's runtime: the Coordinator and the Sweep, on a thread of their own. A QObject
// moved to a QThread; the GUI calls its slots through queued invocations and hears from it
// through queued signals carrying value types, so the GUI thread never waits on a socket,
// a worker or a future. Telemetry is handed over in batches, at most every kHandOverMs: the one
// way a run's events reach the window (its row comes without them).
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/coordinator.h"
#include "runtime/sweep.h"
#include "window/runtime_types.h"

namespace arl::ui {

class LabRuntime : public QObject {
  Q_OBJECT

 public:
  // Telemetry is coalesced and handed to the GUI at most this often (about 40 per second,
  // faster than the views redraw).
  static constexpr int kHandOverMs = 25;

  // `workerBinary`: the allreduce-worker to start (empty: next to this program).
  explicit LabRuntime(std::string workerBinary, QObject* parent = nullptr);
  ~LabRuntime() override;

  // Slots: call on the runtime's thread (QMetaObject::invokeMethod, queued).
  // (Re)starts the coordinator with these workers when they differ from the running ones;
  // a session in progress keeps its coordinator, which is restarted once it ends.
  void configure(const WorkerSetup& w);
  // Waits for the workers the setup asks for, then runs its sweep.
  void startSession(const SessionRequest& req);
  // Stops the session: the run in progress is aborted, no other is started.
  void stopSession(const QString& reason);
  // Stops any session and shuts every worker down; emits shutDown() when done.
  void shutdown();
  // Reads a recording (.arlrec) off the GUI thread.
  void loadRecording(const QString& path);
  // Reads a training record (allreduce-lab train --json) off the GUI thread.
  void loadTrainRecord(const QString& path);

 signals:
  // `control`: how the control socket listens, one line; `insecure`: in the clear where other
  // machines reach it (--insecure), which the window shows in red.
  void workersChanged(const arl::ui::WorkerList& workers, const QString& joinCommand,
                      const QString& control, bool insecure);
  void sessionStarted(const arl::ui::WorkerList& world);
  void runStarted(const arl::ui::TopologyRun& run);
  void telemetry(const arl::ui::TelemetryBatches& batches);
  void rowReady(const arl::SweepRow& row);
  void progress(const arl::ui::RunProgress& p);
  void sessionFinished(const arl::ui::SessionEnd& end);
  // 0 info, 1 warning (status bar), 2 the workers could not start (banner).
  void message(const QString& text, int level);
  void recordingLoaded(const arl::BenchReport& report, const QString& path);
  void recordingFailed(const QString& error);
  void trainRecordLoaded(const arl::TrainRecord& record, const QString& path);
  void trainRecordFailed(const QString& error);
  void shutDown();

 private:
  void ensureCoordinator();
  void drain();
  void handle(CoordinatorEvent& ev);
  void flushTelemetry();
  void beginSweep();
  void announceRun();
  void finishSession();
  void checkJoinDeadline();
  void emitWorkers();
  // Whether a worker's rank changed since the list was last emitted: the coordinator ranks
  // the spares when a sweep releases the world, and says so in no join or leave.
  bool ranksChanged() const;

  std::string workerBinary_;
  WorkerSetup want_, have_;
  std::unique_ptr<Coordinator> coord_;
  std::optional<SessionRequest> pending_;  // waiting for its workers
  std::chrono::steady_clock::time_point joinDeadline_{};
  std::unique_ptr<Sweep> sweep_;
  SessionEnd end_;
  uint64_t announcedRun_ = 0;
  TelemetryBatches batches_;
  std::vector<std::pair<uint64_t, int>> shownRanks_;  // (serial, rank) as last emitted
  std::map<int, uint32_t> lastStep_;  // per rank, the current run's latest telemetry step
  QTimer* handOver_;
  QTimer* poll_;
};

}  // namespace arl::ui
