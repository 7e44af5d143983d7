// The Training view: what its charts hold for a made-up record of two runs on 4 ranks (the
// loss and spread lines, the step split's bars, the sample step's lanes, the sweep and its
// best bucket), the message in the sweep's place when a record has none, and a bad record
// file refused in the window's banner, naming the file and the field.
#include <gtest/gtest.h>

#include <QDockWidget>
#include <QImage>
#include <QProcess>
#include <QSet>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>

#include "../train_record_fixture.h"
#include "export/train_export.h"
#include "training/training_charts.h"
#include "training/training_paint.h"
#include "training/training_view.h"
#include "window/error_banner.h"
#include "window/main_window.h"

namespace arl::ui {
namespace {

using arl::test::fixtureTrainRecord;
using arl::test::kFixtureRanks;
using arl::test::kFixtureSteps;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(TrainingCharts, LossAndSpreadHaveOneLinePerRun) {
  const TrainingCharts c = trainingCharts(fixtureTrainRecord());
  ASSERT_EQ(c.loss.series.size(), 2u);
  EXPECT_EQ(c.loss.series[0].name, "overlap on");
  EXPECT_EQ(c.loss.series[1].name, "ps-async");
  EXPECT_EQ(c.loss.series[0].points.size(), kFixtureSteps);
  EXPECT_EQ(c.loss.series[0].points[3].x, 3);
  EXPECT_LE(c.loss.x.min, 0);
  EXPECT_GE(c.loss.x.max, kFixtureSteps - 1);
  EXPECT_FALSE(c.loss.x.log2Bytes);
  ASSERT_EQ(c.spread.series.size(), 2u);
  EXPECT_EQ(c.spread.series[0].name, "overlap on \u2713") << "every step bitwise identical";
  EXPECT_EQ(c.spread.series[1].name, "ps-async");
  for (const ChartPoint& p : c.spread.series[0].points) EXPECT_EQ(p.y, 0) << "all-reduce is flat";
  EXPECT_GT(c.spread.series[1].points.back().y, c.spread.series[1].points[1].y);
  EXPECT_TRUE(contains(c.identicalCaption,
                       "\u2713 overlap on: every step bitwise identical on all 4 ranks"));
  EXPECT_TRUE(contains(c.identicalCaption,
                       "\u2717 ps-async: 1 of 12 steps bitwise identical; the first that was "
                       "not: step 1"));
  for (const XYChartData* d : {&c.loss, &c.spread}) {
    EXPECT_TRUE(contains(d->subtitle, "measured on 4 workers")) << d->subtitle;
    EXPECT_TRUE(contains(d->subtitle, "unshaped network / network ports 1 GB/s")) << d->subtitle;
  }
}

TEST(TrainingCharts, StepSplitStacksToTheStepTime) {
  const StepSplitData d = stepSplit(fixtureTrainRecord());
  ASSERT_EQ(d.bars.size(), 2u);
  const StepSplitBar& b = d.bars[0];
  EXPECT_EQ(b.label, "overlap on");
  EXPECT_EQ(b.firstStep, 1u) << "the first step's warm-up is left out";
  EXPECT_EQ(b.lastStep, kFixtureSteps - 1);
  EXPECT_DOUBLE_EQ(b.hiddenUs, 2700 - 900);
  EXPECT_DOUBLE_EQ(b.exposedUs, 900);
  EXPECT_DOUBLE_EQ(b.computeAloneUs, 6000 - 1800);
  EXPECT_DOUBLE_EQ(b.stepUs, 6900);
  for (const StepSplitBar& x : d.bars) {
    EXPECT_NEAR(x.computeAloneUs + x.hiddenUs + x.exposedUs, x.stepUs, 1e-9);
  }
  EXPECT_GE(d.y.max, d.bars[1].stepUs);
}

TEST(TrainingCharts, TheTimelineHasAComputeAndACommLanePerRank) {
  const TrainRecord r = fixtureTrainRecord();
  const TrainTimelineData d = sampleStepTimeline(r.runs[0]);
  EXPECT_EQ(d.nranks, kFixtureRanks);
  ASSERT_EQ(d.lanes.size(), 2u * kFixtureRanks);
  EXPECT_EQ(d.lanes[0], "rank 0 compute");
  EXPECT_EQ(d.lanes[7], "rank 3 comm");
  EXPECT_EQ(d.spans.size(), 4u * 10) << "3 forward, 3 backward, 3 buckets, the optimizer";
  for (const TrainLaneSpan& s : d.spans) {
    EXPECT_EQ(s.lane, 2 * s.rank + (isCompute(s.kind) ? 0 : 1));
    EXPECT_LE(s.endUs, d.endUs);
  }
  EXPECT_EQ(d.spans[0].label, "L0");
  EXPECT_EQ(d.spans[4].kind, TrainSpan::Kind::Reduce);
  EXPECT_EQ(d.spans[4].label, "b0");
  EXPECT_DOUBLE_EQ(d.endUs, static_cast<double>(r.runs[0].sampleStep[3].stepNs) / 1e3);
  EXPECT_TRUE(contains(d.subtitle, "overlap on")) << d.subtitle;
  EXPECT_TRUE(contains(d.subtitle, "reduced during the backward pass")) << d.subtitle;
  const TrainTimelineData ps = sampleStepTimeline(r.runs[1]);
  EXPECT_TRUE(ps.psAsync);
  EXPECT_TRUE(std::any_of(ps.spans.begin(), ps.spans.end(),
                          [](const auto& s) { return s.kind == TrainSpan::Kind::Pull; }));
}

TEST(TrainingCharts, TheSweepNamesItsBestBucketOrSaysThereIsNone) {
  const TrainingCharts c = trainingCharts(fixtureTrainRecord());
  EXPECT_TRUE(c.sweepMessage.empty());
  ASSERT_EQ(c.sweep.series.size(), 3u);  // step time, exposed, the best bucket's mark
  EXPECT_EQ(c.sweep.series[0].points.size(), 6u);
  EXPECT_TRUE(c.sweep.x.log2Bytes);
  EXPECT_LE(c.sweep.x.min, 16) << "64K";
  EXPECT_GE(c.sweep.x.max, 26) << "64M";
  EXPECT_TRUE(contains(c.sweep.subtitle, "best: 4M buckets")) << c.sweep.subtitle;
  EXPECT_EQ(c.sweep.series[2].points[0].x, 22);
  const TrainingCharts none = trainingCharts(fixtureTrainRecord(false));
  EXPECT_EQ(none.sweepMessage,
            "No bucket sweep in this record: allreduce-lab train --sweep-buckets");
  EXPECT_TRUE(none.sweep.series.empty());
}

TEST(TrainingCharts, OddRecordsDrawWithoutFailing) {
  TrainRecord r = fixtureTrainRecord(false);
  r.runs[0].steps.clear();
  r.runs[0].sampleStep.clear();
  r.runs[1].steps[2].loss = std::nan("");
  r.runs[1].cfg.slowComputeRank = 2;
  r.runs[1].cfg.slowComputeFactor = 3;
  const TrainingCharts c = trainingCharts(r, 0);
  EXPECT_TRUE(contains(c.timeline.title, "ps-async")) << "the first run with a sample step";
  EXPECT_EQ(c.loss.series[1].points.size(), kFixtureSteps - 1);
  EXPECT_TRUE(contains(c.loss.note, "not finite"));
  EXPECT_TRUE(contains(c.loss.subtitle, "rank 2 computes 3\u00D7 slower")) << c.loss.subtitle;
  QImage img(900, 500, QImage::Format_ARGB32);
  QPainter p(&img);
  QWidget screen;
  for (const FigureStyle& s : {FigureStyle::paper(), FigureStyle::fromWidget(&screen)}) {
    paintStepSplit(p, QRectF(0, 0, 900, 500), c.split, s);
    paintTrainTimeline(p, QRectF(0, 0, 900, 500), c.timeline, s);
    paintTrainTimeline(p, QRectF(0, 0, 900, 500), TrainTimelineData{}, s);
    paintChartMessage(p, QRectF(0, 0, 40, 30), "t", "s", kNoSweepMessage, s);
  }
}

TEST(TrainingView, DrawsTheRecordsCharts) {
  TrainingView view;
  view.resize(1400, 700);
  EXPECT_FALSE(view.hasRecord());
  view.setRecord(fixtureTrainRecord(), QStringLiteral("/tmp/run.json"));
  view.show();
  EXPECT_EQ(view.lossSeriesCount(), 2);
  EXPECT_EQ(view.spreadSeriesCount(), 2);
  EXPECT_EQ(view.sweepSeriesCount(), 3);
  EXPECT_FALSE(view.sweepMessageShown());
  EXPECT_TRUE(view.identicalCaptionText().contains(QStringLiteral("overlap on: every step")));
  EXPECT_EQ(view.charts().timeline.spans.size(), 40u);
  view.showTimelineRun(1);
  EXPECT_TRUE(view.charts().timeline.psAsync);
  // Another record replaces the runs' lines rather than adding to them.
  TrainRecord one = fixtureTrainRecord(false);
  one.runs.pop_back();
  view.setRecord(one, QStringLiteral("/tmp/one.json"));
  EXPECT_EQ(view.lossSeriesCount(), 1);
  EXPECT_EQ(view.sweepSeriesCount(), 0);
  EXPECT_TRUE(view.sweepMessageShown());
  EXPECT_FALSE(view.charts().timeline.psAsync);
  const QImage shot = view.grab().toImage();
  QSet<QRgb> colours;
  for (int y = 0; y < shot.height(); y += 5) {
    for (int x = 0; x < shot.width(); x += 5) colours.insert(shot.pixel(x, y));
  }
  EXPECT_GT(colours.size(), 16);
}

TEST(TrainingView, ProjectorModeShowsOneChartAtATime) {
  TrainingView view;
  view.resize(1400, 700);
  view.setRecord(fixtureTrainRecord(), QStringLiteral("/tmp/run.json"));
  view.show();
  auto* tabs = view.findChild<QTabWidget*>();
  ASSERT_NE(tabs, nullptr);
  EXPECT_FALSE(tabs->isVisible());
  view.setProjector(true);
  ASSERT_EQ(tabs->count(), 5);
  EXPECT_TRUE(tabs->isVisible());
  EXPECT_EQ(tabs->tabText(3), QStringLiteral("Sample step on every rank"));
  view.setProjector(false);
  EXPECT_EQ(tabs->count(), 0);
  EXPECT_FALSE(tabs->isVisible());
  EXPECT_EQ(view.lossSeriesCount(), 2) << "the charts are the same ones, moved";
}

class TrainingFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    good_ = dir_.filePath(QStringLiteral("good.json"));
    bad_ = dir_.filePath(QStringLiteral("bad.json"));
    std::ofstream(good_.toStdString()) << writeTrainJson(fixtureTrainRecord());
    std::string text = writeTrainJson(fixtureTrainRecord());
    const std::string from = "\"loss\":";
    size_t at = text.find(from);
    for (int i = 0; i < 3; ++i) at = text.find(from, at + 1);  // runs[0].steps[3]
    text.insert(at + from.size(), "\"low\",\"was\":");
    std::ofstream(bad_.toStdString()) << text;
  }
  QTemporaryDir dir_;
  QString good_, bad_;
};

std::unique_ptr<MainWindow> makeWindow() {
  WindowOptions o;
  o.workerBinary = ARL_WORKER_BINARY;
  o.persistSettings = false;
  SessionSetup s;
  s.localWorkers = 0;
  s.remoteWorkers = 4;
  o.setup = s;
  auto w = std::make_unique<MainWindow>(o);
  w->show();
  return w;
}

TEST_F(TrainingFiles, TheWindowShowsARecordAndRefusesABadOneInTheBanner) {
  auto w = makeWindow();
  auto* dock = w->findChild<QDockWidget*>(QStringLiteral("trainingDock"));
  ASSERT_NE(dock, nullptr);
  EXPECT_FALSE(dock->isVisible()) << "hidden until a record is opened";
  // The record is read off the GUI thread: a signal says how it went.
  QSignalSpy refused(w.get(), &MainWindow::trainingRecordRefused);
  QSignalSpy shown(w.get(), &MainWindow::trainingRecordShown);
  w->openTrainingRecord(bad_);
  ASSERT_TRUE(refused.wait(10'000));
  EXPECT_TRUE(shown.isEmpty());
  ASSERT_FALSE(w->banner()->isHidden());
  EXPECT_EQ(w->banner()->headline(), QStringLiteral("Could not open the training record"));
  EXPECT_EQ(w->banner()->details(),
            QStringLiteral("training record %1: runs[0].steps[3].loss: expected a number, found "
                           "a string")
                .arg(bad_));
  EXPECT_FALSE(w->trainingView()->hasRecord());
  w->openTrainingRecord(good_);
  ASSERT_TRUE(shown.wait(10'000));
  EXPECT_EQ(refused.size(), 1);
  EXPECT_EQ(shown.at(0).at(0).toString(), good_);
  EXPECT_TRUE(w->banner()->isHidden());
  EXPECT_TRUE(dock->isVisible());
  EXPECT_TRUE(w->trainingView()->hasRecord());
  EXPECT_EQ(w->trainingView()->record(), fixtureTrainRecord());
}

TEST_F(TrainingFiles, TheCommandLineShowsARecordOrSaysWhyNot) {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
  const QString shot = dir_.filePath(QStringLiteral("training.png"));
  QProcess lab;
  lab.setProcessEnvironment(env);
  lab.start(
      QStringLiteral(ARL_LAB_BINARY),
      {QStringLiteral("gui"), QStringLiteral("--train-record"), good_, QStringLiteral("--settle"),
       QStringLiteral("200"), QStringLiteral("--screenshot"), shot});
  ASSERT_TRUE(lab.waitForFinished(60000));
  EXPECT_EQ(lab.exitCode(), 0) << lab.readAllStandardError().toStdString();
  EXPECT_FALSE(QImage(shot).isNull());
  QProcess bad;
  bad.setProcessEnvironment(env);
  bad.start(QStringLiteral(ARL_LAB_BINARY),
            {QStringLiteral("gui"), QStringLiteral("--train-record"), bad_,
             QStringLiteral("--screenshot"), shot});
  ASSERT_TRUE(bad.waitForFinished(60000));
  EXPECT_EQ(bad.exitCode(), 2);
  EXPECT_TRUE(bad.readAllStandardError().contains("runs[0].steps[3].loss: expected a number"));
  QProcess tab;
  tab.setProcessEnvironment(env);
  tab.start(QStringLiteral(ARL_LAB_BINARY),
            {QStringLiteral("gui"), QStringLiteral("--charts"), QStringLiteral("loss"),
             QStringLiteral("--screenshot"), shot});
  ASSERT_TRUE(tab.waitForFinished(30000));
  EXPECT_EQ(tab.exitCode(), 2);
  EXPECT_TRUE(tab.readAllStandardError().contains("heatmap, spread, map, training)"));
}

}  // namespace
}  // namespace arl::ui
