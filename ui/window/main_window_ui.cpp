// The main window's chrome: actions and shortcuts, toolbar, menus, docks, status bar, and
// File → Open and File → Export.
#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QLocale>
#include <QMenu>
#include <QMenuBar>
#include <QMimeData>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QStyle>
#include <QTimer>
#include <QToolBar>
#include <QUrl>

#include "charts/charts_panel.h"
#include "export/export_session.h"
#include "export/train_export.h"
#include "lessons/lessons_panel.h"
#include "lessons/play_rank_panel.h"
#include "topology/topology_pane.h"
#include "training/training_view.h"
#include "window/error_banner.h"
#include "window/export_dialog.h"
#include "window/frame_meter.h"
#include "window/main_window.h"
#include "window/setup_fields.h"
#include "window/setup_panel.h"

namespace arl::ui {

namespace {

QLabel* toolLabel(const QString& text, QWidget* parent) {
  auto* l = new QLabel(text, parent);
  l->setContentsMargins(10, 0, 4, 0);
  return l;
}

QLabel* statusField(QWidget* parent, int minChars) {
  auto* l = new QLabel(parent);
  l->setMinimumWidth(l->fontMetrics().averageCharWidth() * minChars);
  l->setContentsMargins(8, 0, 8, 0);
  return l;
}

}  // namespace

void MainWindow::buildActions() {
  runAction_ = new QAction(style()->standardIcon(QStyle::SP_MediaPlay), tr("Run"), this);
  runAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  stopAction_ = new QAction(style()->standardIcon(QStyle::SP_MediaStop), tr("Stop"), this);
  stopAction_->setShortcuts(
      {QKeySequence(Qt::Key_Escape), QKeySequence(Qt::CTRL | Qt::Key_Period)});
  stopAction_->setToolTip(tr("Stop the session (Esc, Ctrl+.)"));
  openAction_ =
      new QAction(style()->standardIcon(QStyle::SP_DialogOpenButton), tr("&Open recording…"), this);
  openAction_->setShortcut(QKeySequence::Open);
  openTrainingAction_ = new QAction(tr("Open &training record…"), this);
  openTrainingAction_->setToolTip(tr("Show the JSON that allreduce-lab train writes"));
  exportAction_ =
      new QAction(style()->standardIcon(QStyle::SP_DialogSaveButton), tr("&Export…"), this);
  exportAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
  quitAction_ = new QAction(tr("&Quit"), this);
  quitAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Q));
  quitAction_->setMenuRole(QAction::QuitRole);
  resetLayoutAction_ = new QAction(tr("Reset layout"), this);
  projectorAction_ = new QAction(tr("&Projector"), this);
  projectorAction_->setCheckable(true);
  projectorAction_->setShortcut(QKeySequence(Qt::Key_F8));
  projectorAction_->setToolTip(tr("Large type and high contrast for a classroom (F8)"));
  projectorAction_->setShortcutContext(Qt::WindowShortcut);
  addAction(projectorAction_);
  connect(projectorAction_, &QAction::toggled, this, &MainWindow::setProjector);
  for (QAction* a : {runAction_, stopAction_, openAction_, exportAction_, quitAction_}) {
    a->setShortcutContext(Qt::WindowShortcut);
    addAction(a);
  }
  connect(runAction_, &QAction::triggered, this, [this] { run(); });
  connect(stopAction_, &QAction::triggered, this, &MainWindow::stop);
  connect(openAction_, &QAction::triggered, this, &MainWindow::chooseRecording);
  connect(openTrainingAction_, &QAction::triggered, this, &MainWindow::chooseTrainingRecord);
  connect(exportAction_, &QAction::triggered, this, &MainWindow::exportSession);
  connect(quitAction_, &QAction::triggered, this, &QWidget::close);
  connect(resetLayoutAction_, &QAction::triggered, this, [this] {
    restoreState(defaultLayout_);
    applyDefaultSizes();
  });
}

void MainWindow::buildDocks() {
  panel_ = new SetupPanel(this);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(panel_);
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setMinimumWidth(panel_->sizeHint().width() + 24);
  setupDock_ = new QDockWidget(tr("Setup"), this);
  setupDock_->setObjectName(QStringLiteral("setupDock"));
  setupDock_->setWidget(scroll);
  addDockWidget(Qt::LeftDockWidgetArea, setupDock_);

  charts_ = new ChartsPanel(this);
  charts_->setModel(options_.model, options_.modelSource);
  chartsDock_ = new QDockWidget(tr("Charts"), this);
  chartsDock_->setObjectName(QStringLiteral("chartsDock"));
  chartsDock_->setWidget(charts_);
  addDockWidget(Qt::BottomDockWidgetArea, chartsDock_);
  buildTrainingDock();
  buildLessonsDock();
  play_ = new PlayRankPanel(this);
  playDock_ = new QDockWidget(tr("Play a rank"), this);
  playDock_->setObjectName(QStringLiteral("playDock"));
  auto* playScroll = new QScrollArea(this);
  playScroll->setWidget(play_);
  playScroll->setWidgetResizable(true);
  playScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  playScroll->setFrameShape(QFrame::NoFrame);
  playDock_->setWidget(playScroll);
  playDock_->setMinimumWidth(360);
  addDockWidget(Qt::LeftDockWidgetArea, playDock_);
  tabifyDockWidget(setupDock_, playDock_);
  setupDock_->raise();
  playDock_->hide();  // View -> Play a rank (Ctrl+P)
  connect(playDock_->toggleViewAction(), &QAction::triggered, this, [this](bool on) {
    if (on) {
      openPlayRank();
    } else if (chartsStepAside_) {
      chartsDock_->show();
      chartsStepAside_ = false;
    }
  });
  connect(play_, &PlayRankPanel::replayRequested, this,
          [this](const QString& path, const QString& label) {
            if (running_) return;
            pendingPauses_ = std::vector<PlaybackPause>{};  // not a recent file; no pauses
            lessonReplayLabel_ = label;
            openRecording(path);
          });
  // The teacher's layout: the topology large in the centre, the setup beside it, the charts
  // across the whole width under both.
  setCorner(Qt::BottomLeftCorner, Qt::BottomDockWidgetArea);
  setCorner(Qt::BottomRightCorner, Qt::BottomDockWidgetArea);
}

// In the setup's place, as a tab beside it: a lesson sets up its own runs, and the topology
// keeps its width.
void MainWindow::buildLessonsDock() {
  lessons_ = new LessonsPanel(this);
  auto* lessonsScroll = new QScrollArea(this);
  lessonsScroll->setWidget(lessons_);
  lessonsScroll->setWidgetResizable(true);
  lessonsScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  lessonsScroll->setFrameShape(QFrame::NoFrame);
  lessonsDock_ = new QDockWidget(tr("Lessons"), this);
  lessonsDock_->setObjectName(QStringLiteral("lessonsDock"));
  lessonsDock_->setWidget(lessonsScroll);
  lessonsDock_->setMinimumWidth(360);
  addDockWidget(Qt::LeftDockWidgetArea, lessonsDock_);
  tabifyDockWidget(setupDock_, lessonsDock_);
  setupDock_->raise();
  lessonsDock_->hide();  // View -> Lessons, or the toolbar's button
  connect(lessons_, &LessonsPanel::replayRequested, this, &MainWindow::replayLesson);
  connect(lessons_, &LessonsPanel::runningChanged, this, [this](bool on) {
    runAction_->setEnabled(!on && !running_ && problems_.empty());
    openAction_->setEnabled(!on && !running_);
    // Off: a replay or a training record that follows says what the window shows.
    setMode(on ? tr("◉ lesson running on real workers") : tr("idle"),
            on ? QStringLiteral("#a15c00") : QStringLiteral("#555555"));
  });
  connect(lessons_, &LessonsPanel::trainingRecordReady, this, [this](const QString& path) {
    pendingTrainingMode_ = tr("✓ lesson · its training runs");
    openTrainingRecord(path);
  });
}

// A tab beside the charts: a training record is another kind of session's measurements.
void MainWindow::buildTrainingDock() {
  training_ = new TrainingView(this);
  trainingDock_ = new QDockWidget(tr("Training"), this);
  trainingDock_->setObjectName(QStringLiteral("trainingDock"));
  trainingDock_->setWidget(training_);
  addDockWidget(Qt::BottomDockWidgetArea, trainingDock_);
  tabifyDockWidget(chartsDock_, trainingDock_);
  chartsDock_->raise();
  trainingDock_->hide();  // File -> Open training record, or View -> Training
}

// The default split, once the window has its size: the charts a third of the height (enough
// for a plot with its axis titles), the setup as narrow as its fields allow.
void MainWindow::applyDefaultSizes() {
  resizeDocks({chartsDock_}, {std::max(300, height() * 36 / 100)}, Qt::Vertical);
  resizeDocks({setupDock_}, {setupDock_->widget()->minimumWidth()}, Qt::Horizontal);
}

void MainWindow::buildToolBar() {
  auto* bar = addToolBar(tr("Run"));
  bar->setObjectName(QStringLiteral("runToolBar"));
  bar->setMovable(false);
  bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  const int icon = style()->pixelMetric(QStyle::PM_ToolBarIconSize);
  bar->setIconSize(QSize(icon * 3 / 2, icon * 3 / 2));
  QFont big = bar->font();
  big.setPointSizeF(big.pointSizeF() * 1.15);
  bar->setFont(big);
  bar->addAction(runAction_);
  bar->addAction(stopAction_);
  bar->addSeparator();
  toolAlgorithm_ = new QComboBox(bar);
  toolAlgorithm_->setModel(panel_->algorithmBox()->model());
  toolCollective_ = new QComboBox(bar);
  toolCollective_->setModel(panel_->collectiveBox()->model());
  toolSize_ = new SizeEdit(1024, uint64_t{1} << 30, bar);
  toolSlice_ = new SizeEdit(1024, uint64_t{64} << 20, bar);
  toolSize_->setMinimumContentsLength(10);
  bar->addWidget(toolLabel(tr("Algorithm"), bar));
  bar->addWidget(toolAlgorithm_);
  bar->addWidget(toolLabel(tr("Collective"), bar));
  bar->addWidget(toolCollective_);
  bar->addWidget(toolLabel(tr("Size"), bar));
  bar->addWidget(toolSize_);
  bar->addWidget(toolLabel(tr("Slice"), bar));
  bar->addWidget(toolSlice_);
  bar->addSeparator();
  QAction* setupToggle = setupDock_->toggleViewAction();
  setupToggle->setText(tr("⚙ Setup"));
  bar->addAction(setupToggle);
  QAction* lessonsToggle = lessonsDock_->toggleViewAction();
  lessonsToggle->setText(tr("Lessons"));
  lessonsToggle->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
  bar->addAction(lessonsToggle);
  auto* spacer = new QWidget(bar);
  spacer->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
  bar->addWidget(spacer);
  modeLabel_ = new QLabel(bar);
  modeLabel_->setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Fixed);
  bar->addWidget(modeLabel_);
  bar->addWidget(toolLabel(QString(), bar));
  setMode(tr("idle"), QStringLiteral("#555555"));

  connect(toolAlgorithm_, &QComboBox::currentIndexChanged, panel_->algorithmBox(),
          &QComboBox::setCurrentIndex);
  connect(toolCollective_, &QComboBox::currentIndexChanged, panel_->collectiveBox(),
          &QComboBox::setCurrentIndex);
  connect(toolSize_, &SizeEdit::edited, this, [this] {
    if (!panel_->sizeField()->sweeping())
      panel_->sizeField()->singleEdit()->setCurrentText(toolSize_->currentText());
  });
  connect(toolSlice_, &SizeEdit::edited, this, [this] {
    if (!panel_->sliceField()->sweeping())
      panel_->sliceField()->singleEdit()->setCurrentText(toolSlice_->currentText());
  });
}

// Shows the panel's values in the toolbar; a swept value shows its range and is edited in
// the panel.
void MainWindow::mirrorToolBar() {
  if (!toolAlgorithm_) return;
  const QSignalBlocker b1(toolAlgorithm_), b2(toolCollective_), b3(toolSize_), b4(toolSlice_);
  toolAlgorithm_->setCurrentIndex(panel_->algorithmBox()->currentIndex());
  toolCollective_->setCurrentIndex(panel_->collectiveBox()->currentIndex());
  const SessionSetup s = panel_->setup();
  auto mirror = [](SizeEdit* tool, RangeField* field, const SweepRange& r) {
    tool->setEnabled(!field->sweeping());
    const QString text =
        field->sweeping() ? QStringLiteral("%1 … %2").arg(QString::fromStdString(formatSize(r.min)),
                                                          QString::fromStdString(formatSize(r.max)))
                          : field->singleEdit()->currentText();
    if (tool->currentText() != text) tool->setEditText(text);
    tool->setToolTip(field->sweeping() ? tr("Swept: change the range in the setup panel")
                                       : QString());
  };
  mirror(toolSize_, panel_->sizeField(), s.size);
  mirror(toolSlice_, panel_->sliceField(), s.slice);
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(openAction_);
  file->addAction(openTrainingAction_);
  recentMenu_ = file->addMenu(tr("Open &recent"));
  rebuildRecent();
  file->addAction(exportAction_);
  file->addSeparator();
  file->addAction(quitAction_);
  QMenu* runMenu = menuBar()->addMenu(tr("&Run"));
  runMenu->addAction(runAction_);
  runMenu->addAction(stopAction_);
  QMenu* view = menuBar()->addMenu(tr("&View"));
  view->addAction(setupDock_->toggleViewAction());
  view->addAction(chartsDock_->toggleViewAction());
  view->addAction(trainingDock_->toggleViewAction());
  view->addAction(lessonsDock_->toggleViewAction());
  QAction* playToggle = playDock_->toggleViewAction();
  playToggle->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_P));
  view->addAction(playToggle);
  view->addSeparator();
  view->addAction(projectorAction_);
  view->addAction(resetLayoutAction_);
}

void MainWindow::buildStatusBar() {
  progressLabel_ = statusField(this, 36);
  eventsLabel_ = statusField(this, 30);
  dropsLabel_ = statusField(this, 16);
  fpsLabel_ = statusField(this, 9);
  statusBar()->addPermanentWidget(progressLabel_, 1);
  statusBar()->addPermanentWidget(eventsLabel_);
  statusBar()->addPermanentWidget(dropsLabel_);
  statusBar()->addPermanentWidget(fpsLabel_);
  status_ = new QTimer(this);
  status_->setInterval(500);
  connect(status_, &QTimer::timeout, this, &MainWindow::updateStatus);
  status_->start();
  updateStatus();
}

void MainWindow::updateStatus() {
  const QLocale loc;
  progressLabel_->setText(progress_.runTotal == 0
                              ? QString()
                              : tr("run %1 of %2 · %3")
                                    .arg(progress_.runIndex)
                                    .arg(progress_.runTotal)
                                    .arg(QString::fromStdString(progress_.label)));
  eventsLabel_->setText(tr("events %1 · held %2")
                            .arg(loc.toString(static_cast<qulonglong>(eventsShown_)),
                                 loc.toString(static_cast<qulonglong>(topology_->eventsHeld()))));
  const uint64_t dropped = eventsDropped_ + topology_->eventsDropped();
  dropsLabel_->setText(tr("dropped %1").arg(loc.toString(static_cast<qulonglong>(dropped))));
  dropsLabel_->setStyleSheet(dropped ? QStringLiteral("color: #9a6700; font-weight: 600;")
                                     : QString());
  dropsLabel_->setToolTip(
      tr("Telemetry events dropped: by the ranks' buffers, past the per-run limit, "
         "or decimated by the view past its bound"));
  fpsLabel_->setText(tr("%1 fps").arg(frames_->takeFps(), 0, 'f', 0));
}

void MainWindow::setMode(const QString& text, const QString& colour) {
  modeLabel_->setText(text);
  modeLabel_->setStyleSheet(
      QStringLiteral("QLabel { color: white; background: %1; border-radius: 4px; "
                     "padding: 3px 10px; font-weight: 700; }")
          .arg(colour));
}

namespace {

constexpr int kRecentFiles = 8;
const QString kRecentKey = QStringLiteral("recent/files");

// Recordings, and the nccl-tests and Inspector files the window imports.
bool isRecordingUrl(const QUrl& u) {
  if (!u.isLocalFile()) return false;
  const QString f = u.toLocalFile();
  for (const char* ext : {".arlrec", ".json", ".jsonl", ".txt", ".log"}) {
    if (f.endsWith(QLatin1String(ext), Qt::CaseInsensitive)) return true;
  }
  return false;
}

}  // namespace

void MainWindow::rebuildRecent() {
  recentMenu_->clear();
  const QStringList files = QSettings().value(kRecentKey).toStringList();
  for (const QString& f : files) {
    QAction* a = recentMenu_->addAction(QFileInfo(f).fileName());
    a->setToolTip(f);
    connect(a, &QAction::triggered, this, [this, f] { openRecording(f); });
  }
  recentMenu_->setEnabled(!files.isEmpty());
}

void MainWindow::rememberRecent(const QString& path) {
  if (!options_.persistSettings) return;
  QSettings settings;
  QStringList files = settings.value(kRecentKey).toStringList();
  const QString abs = QFileInfo(path).absoluteFilePath();
  files.removeAll(abs);
  files.prepend(abs);
  while (files.size() > kRecentFiles) files.removeLast();
  settings.setValue(kRecentKey, files);
  rebuildRecent();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  const QList<QUrl> urls = event->mimeData()->urls();
  if (!running_ && urls.size() == 1 && isRecordingUrl(urls.front())) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  const QList<QUrl> urls = event->mimeData()->urls();
  if (urls.size() != 1 || !isRecordingUrl(urls.front())) return;
  event->acceptProposedAction();
  openRecording(urls.front().toLocalFile());
}

void MainWindow::setProjector(bool on) {
  if (projectorAction_->isChecked() != on) {
    projectorAction_->setChecked(on);  // toggled() comes back here
    return;
  }
  if (on) {
    normalFont_ = QApplication::font();
    normalGeometry_ = geometry();
    QFont big = normalFont_;
    big.setPixelSize(22);
    QApplication::setFont(big);
    chartsWereShown_ = chartsDock_->isVisible();
    setupDock_->hide();
    chartsDock_->hide();
  } else {
    QApplication::setFont(normalFont_);
    setupDock_->show();
    chartsDock_->setVisible(chartsWereShown_);
  }
  topology_->setProjector(on);
  training_->setProjector(on);
  // The whole screen for the class, for the topology; View brings the docks back.
  if (on && screen() != nullptr) {
    setGeometry(screen()->availableGeometry());
    if (trainingDock_->isVisible()) showTraining();
  } else if (!on && normalGeometry_.isValid()) {
    setGeometry(normalGeometry_);
    applyDefaultSizes();
  }
}

void MainWindow::openPlayRank() {
  // The game takes the height the charts had (they are empty until a run); closing the game
  // brings them back.
  if (chartsDock_->isVisible()) {
    chartsDock_->hide();
    chartsStepAside_ = true;
  }
  playDock_->show();
  playDock_->raise();
  play_->setFocus();
}

bool MainWindow::openLesson(const QString& name) {
  lessonsDock_->show();
  lessonsDock_->raise();
  return lessons_->selectLesson(name);
}

bool MainWindow::projector() const { return projectorAction_->isChecked(); }

void MainWindow::chooseRecording() {
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Open a recording"), QString(),
                                   tr("Recordings and nccl-tests or NCCL Inspector output "
                                      "(*.arlrec *.json *.jsonl *.txt *.log);;All files (*)"));
  if (!path.isEmpty()) openRecording(path);
}

void MainWindow::chooseTrainingRecord() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open a training record"), QString(),
                                                    tr("Training records (*.json);;All files (*)"));
  if (!path.isEmpty()) openTrainingRecord(path);
}

namespace {
const char* const kTrainingRefused =
    QT_TRANSLATE_NOOP("MainWindow", "Could not open the training record");
}  // namespace

void MainWindow::onTrainRecord(const TrainRecord& record, const QString& path) {
  if (banner_->headline() == tr(kTrainingRefused)) banner_->hide();  // a run's failure stays
  training_->setRecord(record, path);
  showTraining();
  if (pendingTrainingMode_) {
    // Less than the view takes when opened alone: the lesson's verdict stays in sight above.
    resizeDocks({trainingDock_}, {std::max(420, height() * 64 / 100)}, Qt::Vertical);
    setMode(*pendingTrainingMode_, QStringLiteral("#0b5cad"));
    pendingTrainingMode_.reset();
  }
  emit trainingRecordShown(path);
}

void MainWindow::onTrainRecordFailed(const QString& error) {
  pendingTrainingMode_.reset();
  banner_->showProblem(tr(kTrainingRefused), error);
  emit trainingRecordRefused(error);
}

// The Training view in front, with most of the height: its five charts need it more than the
// topology, which a training record does not use.
void MainWindow::showTraining() {
  trainingDock_->show();
  trainingDock_->raise();
  resizeDocks({trainingDock_}, {std::max(420, height() * 72 / 100)}, Qt::Vertical);
}

void MainWindow::exportSession() {
  if (report_.rows.empty()) {
    statusBar()->showMessage(tr("Nothing to export yet: run a session or open a recording"), 6000);
    return;
  }
  ExportDialog dialog(this);
  QSettings settings;
  ExportOptions last;
  last.directory = settings.value(QStringLiteral("export/directory")).toString().toStdString();
  last.image.width = settings.value(QStringLiteral("export/width"), last.image.width).toInt();
  last.image.height = settings.value(QStringLiteral("export/height"), last.image.height).toInt();
  last.image.scale = settings.value(QStringLiteral("export/scale"), last.image.scale).toDouble();
  dialog.setOptions(last);
  if (dialog.exec() != QDialog::Accepted) return;
  ExportOptions chosen = dialog.options();
  chosen.bandwidthOf = charts_->bandwidthOf();  // the charts as the window shows them
  settings.setValue(QStringLiteral("export/directory"), QString::fromStdString(chosen.directory));
  settings.setValue(QStringLiteral("export/width"), chosen.image.width);
  settings.setValue(QStringLiteral("export/height"), chosen.image.height);
  settings.setValue(QStringLiteral("export/scale"), chosen.image.scale);
  try {
    const std::vector<std::string> files = arl::ui::exportSession(report_, chosen);
    statusBar()->showMessage(tr("Exported %1 files to %2")
                                 .arg(files.size())
                                 .arg(QString::fromStdString(chosen.directory)),
                             10000);
  } catch (const std::exception& e) {
    banner_->showProblem(tr("Export failed"), QString::fromStdString(e.what()));
  }
}

}  // namespace arl::ui
