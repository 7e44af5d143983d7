// The window's Lessons panel, offscreen: it lists the checkout's lessons in course order, runs
// nothing before the student answers, and after a real run (allreduce-lab lesson run, on real
// workers) reveals the measurement, scores the answer and asks for a replay with the lesson's
// pauses; a lesson of training runs hands their record to the window's Training view instead. The
// topology pane stops at a pause's step with its question and shows the answer when it goes on.
#include <gtest/gtest.h>

#include <QApplication>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QSignalSpy>

#include "lessons/lessons_panel.h"
#include "topology/run_model.h"
#include "topology/topology_pane.h"
#include "topology_local_run.h"
#include "training/training_view.h"
#include "window/main_window.h"

namespace arl::ui {
namespace {

const QString kLessons = QStringLiteral(ARL_SOURCE_DIR "/resources/lessons");

TEST(LessonsPanel, ListsTheLessonsInCourseOrder) {
  LessonsPanel panel(nullptr, kLessons);
  EXPECT_TRUE(panel.loadError().isEmpty()) << panel.loadError().toStdString();
  ASSERT_GE(panel.lessonCount(), 10);
  ASSERT_NE(panel.current(), nullptr);
  EXPECT_EQ(panel.current()->name, "what-is-allreduce");
  EXPECT_TRUE(panel.selectLesson(QStringLiteral("ring-two-phases")));
  EXPECT_EQ(panel.current()->name, "ring-two-phases");
  EXPECT_FALSE(panel.selectLesson(QStringLiteral("no-such-lesson")));
  EXPECT_EQ(panel.current()->name, "ring-two-phases");
}

TEST(LessonsPanel, NothingRunsBeforeTheStudentAnswers) {
  LessonsPanel panel(nullptr, kLessons);
  ASSERT_TRUE(panel.selectLesson(QStringLiteral("what-is-allreduce")));
  EXPECT_FALSE(panel.runLesson());
  EXPECT_FALSE(panel.running());
  EXPECT_FALSE(panel.choose(QStringLiteral("not-an-option")));
  EXPECT_FALSE(panel.runLesson());
  EXPECT_TRUE(panel.revealText().isEmpty());
}

TEST(LessonsPanel, ARealRunRevealsScoresAndAsksForAReplay) {
  LessonsPanel panel(nullptr, kLessons);
  panel.setProgram(QStringLiteral(ARL_LAB_BINARY));
  ASSERT_TRUE(panel.selectLesson(QStringLiteral("what-is-allreduce")));
  ASSERT_TRUE(panel.choose(QStringLiteral("every")));
  panel.setGuess(QStringLiteral("0"));
  QSignalSpy revealed(&panel, &LessonsPanel::revealed);
  QSignalSpy replay(&panel, &LessonsPanel::replayRequested);
  ASSERT_TRUE(panel.runLesson());
  EXPECT_TRUE(panel.running());
  EXPECT_FALSE(panel.runLesson());  // one at a time
  QElapsedTimer t;
  t.start();
  while (revealed.isEmpty() && panel.running() && t.elapsed() < 120'000) revealed.wait(500);
  ASSERT_EQ(revealed.size(), 1) << panel.revealText().toStdString();
  EXPECT_TRUE(revealed.at(0).at(0).toBool());
  EXPECT_EQ(panel.answered(), 1);
  EXPECT_EQ(panel.score(), 1);
  EXPECT_TRUE(panel.revealText().contains(QStringLiteral("They agree")));
  ASSERT_EQ(replay.size(), 1);
  const QString path = replay.at(0).at(0).toString();
  EXPECT_TRUE(path.endsWith(QStringLiteral(".arlrec"))) << path.toStdString();
  EXPECT_FALSE(replay.at(0).at(2).toBool());  // a run made now, not the bundled recording
  const auto pauses = replay.at(0).at(1).value<std::vector<PlaybackPause>>();
  ASSERT_EQ(pauses.size(), panel.current()->pauses.size());
  EXPECT_EQ(pauses.front().step, panel.current()->pauses.front().step);
}

TEST(LessonsPanel, AProgramThatCannotRunFallsBackToTheBundledRecording) {
  LessonsPanel panel(nullptr, kLessons);
  panel.setProgram(QStringLiteral("/nonexistent/allreduce-lab"));
  ASSERT_TRUE(panel.selectLesson(QStringLiteral("ring-two-phases")));
  ASSERT_FALSE(panel.current()->options.empty());
  ASSERT_TRUE(panel.choose(QString::fromStdString(panel.current()->options.front().id)));
  QSignalSpy replay(&panel, &LessonsPanel::replayRequested);
  ASSERT_TRUE(panel.runLesson());
  QElapsedTimer t;
  t.start();
  while (replay.isEmpty() && t.elapsed() < 20'000) replay.wait(200);
  ASSERT_EQ(replay.size(), 1);
  EXPECT_TRUE(replay.at(0).at(2).toBool());  // bundled
  EXPECT_TRUE(QFileInfo::exists(replay.at(0).at(0).toString()));
  EXPECT_EQ(panel.answered(), 0);  // nothing measured, nothing scored
}

// The replicas lesson trains for real (train children of lesson run); the window shows the
// lesson's two runs in the Training view and the reveal counts the identical steps.
TEST(LessonsPanel, ATrainingLessonShowsItsRunsInTheTrainingView) {
  WindowOptions o;
  o.workerBinary = ARL_WORKER_BINARY;
  o.persistSettings = false;
  SessionSetup s;
  s.localWorkers = 0;
  s.remoteWorkers = 4;
  o.setup = s;
  MainWindow w(o);
  w.show();
  ASSERT_TRUE(w.openLesson(QStringLiteral("synchronous-keeps-replicas-identical")));
  LessonsPanel* panel = w.lessonsPanel();
  panel->setProgram(QStringLiteral(ARL_LAB_BINARY));
  ASSERT_TRUE(panel->choose(QStringLiteral("allreduce")));
  QSignalSpy ready(panel, &LessonsPanel::trainingRecordReady);
  QSignalSpy replay(panel, &LessonsPanel::replayRequested);
  QSignalSpy shown(&w, &MainWindow::trainingRecordShown);
  ASSERT_TRUE(panel->runLesson());
  QElapsedTimer t;
  t.start();
  while (shown.isEmpty() && t.elapsed() < 120'000) shown.wait(500);
  ASSERT_EQ(ready.size(), 1) << panel->revealText().toStdString();
  ASSERT_EQ(shown.size(), 1);
  EXPECT_EQ(shown.at(0).at(0).toString(), ready.at(0).at(0).toString());
  EXPECT_TRUE(QFileInfo::exists(ready.at(0).at(0).toString()));
  EXPECT_TRUE(replay.isEmpty());  // no recording to replay: the charts show the runs
  EXPECT_EQ(panel->score(), 1);
  EXPECT_TRUE(panel->revealText().contains(QStringLiteral("20 of 20 steps identical")))
      << panel->revealText().toStdString();
  const TrainRecord& record = w.trainingView()->record();
  ASSERT_EQ(record.runs.size(), 2u);
  EXPECT_EQ(record.runs[0].cfg.sync, SyncMode::AllReduce);
  EXPECT_EQ(record.runs[1].cfg.sync, SyncMode::PsAsync);
  EXPECT_TRUE(w.findChild<QDockWidget*>(QStringLiteral("trainingDock"))->isVisible());
}

TEST(TopologyPane, StopsAtALessonsPauseAndShowsTheAnswerOnGoingOn) {
  const testing::LocalRecording rec = testing::recordLocal("ring", 4, 64);
  TopologyPane pane;
  pane.showRun(rec.run, rec.events);
  pane.setPauses({{1, QStringLiteral("which rank?"), QStringLiteral("rank 1")}});
  pane.seek(pane.model().startNs());
  pane.setSpeed(1.0);
  pane.play();
  QSignalSpy asked(&pane, &TopologyPane::pausedAtQuestion);
  for (int i = 0; i < 100000 && pane.playing(); ++i) pane.advanceFrame(1'000);
  EXPECT_FALSE(pane.playing());
  ASSERT_EQ(asked.size(), 1);
  EXPECT_EQ(pane.pauseQuestion(), QStringLiteral("which rank?"));
  EXPECT_TRUE(pane.pauseAnswer().isEmpty());
  EXPECT_EQ(pane.pausesReached(), 1);
  // Stopped where step 1 ends (the first step's boundary).
  EXPECT_EQ(pane.playbackTimeNs(), pane.model().boundaries().front());
  pane.play();
  EXPECT_EQ(pane.pauseAnswer(), QStringLiteral("rank 1"));
  for (int i = 0; i < 100000 && pane.playing(); ++i) pane.advanceFrame(1'000'000);
  EXPECT_EQ(asked.size(), 1);  // each pause once
}

}  // namespace
}  // namespace arl::ui
