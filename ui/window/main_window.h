// The lab's main window: the topology pane in the centre, the setup panel in a dock on the
// left, the charts in a dock at the bottom, a toolbar (Run, Stop, algorithm, collective, size,
// slice, live/replay) and a status bar (run, events, drops, frames per second). The runtime
// (coordinator and sweep) lives on its own thread (LabRuntime); errors it reports show in a
// banner that names the rank and the step. Closing the window stops a run and every worker.
#pragma once

#include <QFont>
#include <QMainWindow>
#include <QThread>
#include <optional>
#include <vector>

#include <string>
#include "topology/topology_pane.h"

#include "export/export.h"
#include "window/runtime_types.h"

class QAction;
class QComboBox;
class QDockWidget;
class QLabel;
class QMenu;
class QDragEnterEvent;
class QDropEvent;
class QTimer;

namespace arl::ui {

class LessonsPanel;
class PlayRankPanel;

class ChartsPanel;
class ErrorBanner;
class FlightRecordDialog;
class FrameMeter;
class LabRuntime;
class SetupPanel;
class SizeEdit;
class TopologyPane;
class TrainingView;

struct WindowOptions {
  std::string workerBinary;  // allreduce-worker to start; empty: next to this program
  // Read the setup and the layout from QSettings at start, write them back on close.
  bool persistSettings = true;
  // Start from this setup instead of the saved one (scripted use).
  std::optional<SessionSetup> setup;
  // The cost model's parameters every run is predicted with, and where they came from (the
  // calibration `allreduce-lab calibrate` saved, as bench and plan take it: app/model_choice.h).
  ModelParams model;
  std::string modelSource = kDefaultModelSource;
  // The control socket's keys when the window listens (docs/security.md).
  ControlSecurity security;
};

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(WindowOptions options = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  // Starts a session with the panel's setup; false (and nothing starts) when a session runs
  // or a field has a problem.
  bool run();
  // Stops the session: the run in progress is aborted, the next is not started.
  void stop();
  // Shows a recording (read off the GUI thread); recordingShown() or a banner follows.
  void openRecording(const QString& path);
  // Shows a training record (allreduce-lab train's JSON, read off the GUI thread) in the
  // Training view and brings the view forward: trainingRecordShown() follows, or
  // trainingRecordRefused() with the reader's error (naming the file and the field) in the
  // banner.
  void openTrainingRecord(const QString& path);
  // Brings the Training view forward (View -> Training).
  void showTraining();
  // Replays a lesson's run (or, `bundled`, its bundled recording) with the lesson's pauses.
  void replayLesson(const QString& path, const std::vector<PlaybackPause>& pauses, bool bundled);
  // View -> Projector (F8): large type, high contrast, thicker links, fewer labels, for the
  // back of a classroom at 1920x1080; the window fills the screen, the setup and charts docks
  // step aside (View brings them back).
  void setProjector(bool on);
  bool projector() const;
  bool isRunning() const { return running_; }
  // Shows a finished run of the session (report().rows[index]) in the topology pane and the
  // per-run charts, ready to replay. False when there is no such run or a session is running.
  bool showRow(size_t index);

  // The session so far (the live one, or the recording shown).
  const BenchReport& report() const { return report_; }
  const std::vector<WorkerInfo>& workers() const { return workers_; }
  std::vector<SetupProblem> problems() const { return problems_; }

  SetupPanel* setupPanel() const { return panel_; }
  TopologyPane* topologyPane() const { return topology_; }
  ChartsPanel* chartsPanel() const { return charts_; }
  TrainingView* trainingView() const { return training_; }
  LessonsPanel* lessonsPanel() const { return lessons_; }
  // Shows the Lessons dock (View -> Lessons) at the lesson called `name`; false when none.
  bool openLesson(const QString& name);
  PlayRankPanel* playRankPanel() const { return play_; }
  // Shows the Play a rank dock (View -> Play a rank) with the keyboard on it.
  void openPlayRank();
  ErrorBanner* banner() const { return banner_; }
  // The failed run's flight record (the banner's "Flight record"), opened; null when the last
  // failure left none.
  FlightRecordDialog* showFlightRecord();
  QAction* runAction() const { return runAction_; }
  QAction* stopAction() const { return stopAction_; }

 signals:
  // What the window handed to its views, in order (for scripted use and tests).
  void runShown(const arl::ui::TopologyRun& run);
  void telemetryShown(const arl::ui::TelemetryBatches& batches);
  void rowShown(const arl::SweepRow& row);
  void sessionEnded(const arl::ui::SessionEnd& end);
  void workersUpdated(const arl::ui::WorkerList& workers);
  void recordingShown(const QString& path);
  // A recording could not be opened: the reader's message (the line and the reason).
  void recordingRefused(const QString& error);
  void trainingRecordShown(const QString& path);
  // A training record could not be read: the reader's message (the file and the field).
  void trainingRecordRefused(const QString& error);
  // The runtime has shut every worker down (after a close).
  void runtimeStopped();

 protected:
  void closeEvent(QCloseEvent* event) override;
  // A recording (.arlrec) dropped on the window opens as File -> Open would.
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void buildActions();
  void buildToolBar();
  void buildMenus();
  // File -> Open recent: the recordings opened last, newest first (QSettings "recent/files").
  void rebuildRecent();
  void rememberRecent(const QString& path);
  void buildDocks();
  void buildTrainingDock();
  void buildLessonsDock();
  void applyDefaultSizes();
  void setInitialGeometry();
  void buildStatusBar();
  void connectRuntime();
  void mirrorToolBar();
  void setupEdited();
  void validateNow();
  void updatePlan(const SessionSetup& s);
  void setRunning(bool running);
  void onWorkers(const WorkerList& workers, const QString& joinCommand, const QString& control,
                 bool insecure);
  void onSessionStarted(const WorkerList& world);
  void onRunStarted(const TopologyRun& run);
  void onTelemetry(const TelemetryBatches& batches);
  void onRow(const SweepRow& row);
  void onSessionFinished(const SessionEnd& end);
  void onRecording(const BenchReport& report, const QString& path);
  // An imported file's results (nccl-tests, NCCL Inspector): charted beside the runs shown.
  void onImported(const BenchReport& imported, const QString& path);
  // The row in the topology pane, or, without telemetry, the pane says so.
  void showInPane(const SweepRow& row);
  void onTrainRecord(const TrainRecord& record, const QString& path);
  void onTrainRecordFailed(const QString& error);
  void onRuntimeMessage(const QString& text, int level);
  void onShutDown();
  void exportSession();
  void chooseRecording();
  void chooseTrainingRecord();
  void updateStatus();
  void setMode(const QString& text, const QString& colour);
  void restoreLayout();
  void saveSettings();
  void stopRuntimeNow();

  WindowOptions options_;
  SetupPanel* panel_ = nullptr;
  TopologyPane* topology_ = nullptr;
  ChartsPanel* charts_ = nullptr;
  ErrorBanner* banner_ = nullptr;
  FlightRecordDialog* flightDialog_ = nullptr;
  QDockWidget* setupDock_ = nullptr;
  QDockWidget* chartsDock_ = nullptr;
  TrainingView* training_ = nullptr;
  QDockWidget* trainingDock_ = nullptr;
  QDockWidget* lessonsDock_ = nullptr;
  LessonsPanel* lessons_ = nullptr;
  QDockWidget* playDock_ = nullptr;
  PlayRankPanel* play_ = nullptr;
  bool chartsStepAside_ = false;  // the charts were hidden for the game
  // A lesson's pauses for the recording being opened (set on recordingShown).
  std::optional<std::vector<PlaybackPause>> pendingPauses_;
  // The training record being read is a lesson's: the mode it shows once read.
  std::optional<QString> pendingTrainingMode_;
  QString lessonReplayLabel_;
  QAction* runAction_ = nullptr;
  QAction* stopAction_ = nullptr;
  QAction* openAction_ = nullptr;
  QAction* openTrainingAction_ = nullptr;
  QMenu* recentMenu_ = nullptr;
  QAction* projectorAction_ = nullptr;
  QFont normalFont_;
  QRect normalGeometry_;
  bool chartsWereShown_ = true;  // where the window was before projector mode
  QAction* exportAction_ = nullptr;
  QAction* quitAction_ = nullptr;
  QAction* resetLayoutAction_ = nullptr;
  QComboBox* toolAlgorithm_ = nullptr;
  QComboBox* toolCollective_ = nullptr;
  SizeEdit* toolSize_ = nullptr;
  SizeEdit* toolSlice_ = nullptr;
  QLabel* modeLabel_ = nullptr;
  QLabel* progressLabel_ = nullptr;
  QLabel* eventsLabel_ = nullptr;
  QLabel* dropsLabel_ = nullptr;
  QLabel* fpsLabel_ = nullptr;
  QTimer* validate_ = nullptr;
  QTimer* status_ = nullptr;
  FrameMeter* frames_ = nullptr;
  QByteArray defaultLayout_;

  QThread runtimeThread_;
  LabRuntime* runtime_ = nullptr;
  bool running_ = false;
  bool closing_ = false;
  bool runtimeDown_ = false;

  BenchReport report_;
  std::vector<WorkerInfo> workers_;
  std::vector<SetupProblem> problems_;
  // The setup the topology pane's plan was last made from (a run shown keeps its place until
  // the setup changes what a run would be).
  std::optional<SessionSetup> planFrom_;
  RunProgress progress_;
  uint64_t eventsShown_ = 0;
  uint64_t eventsDropped_ = 0;
};

}  // namespace arl::ui
