// The real main window as it opens, offscreen: the topology pane shows the setup's plan (its
// ranks and the first step of its schedule, labelled as the plan) and follows the setup; a
// run and a replay take its place. Run and Stop are there once; the setup dock fits a
// 1600x1000 window without scrolling.
#include <gtest/gtest.h>

#include <QAbstractButton>
#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QDockWidget>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QScrollArea>
#include <QScrollBar>
#include <QThread>
#include <memory>

#include "topology/explain_panel.h"
#include "topology/run_model.h"
#include "topology/scene_items.h"
#include "topology/topology_pane.h"
#include "topology/topology_view.h"
#include "wait_until.h"
#include "window/main_window.h"
#include "window/setup_panel.h"
#include "window/setup_section.h"

namespace arl::ui {
namespace {

// Ranks the window waits for rather than starts: a plan needs no worker.
SessionSetup remoteRing(int n) {
  SessionSetup s;
  s.localWorkers = 0;
  s.remoteWorkers = n;
  s.algorithm = "ring";
  s.size = {false, uint64_t{1} << 20, 0, 0, 2};
  s.slice = {false, uint64_t{256} << 10, 0, 0, 2};
  return s;
}

std::unique_ptr<MainWindow> makeWindow(const SessionSetup& s, WindowOptions o = {}) {
  o.workerBinary = ARL_WORKER_BINARY;
  o.persistSettings = false;
  o.setup = s;
  auto w = std::make_unique<MainWindow>(o);
  w->show();
  return w;
}

// Every text of the explanation beside the view.
QString explanationText(const TopologyPane& pane) {
  QStringList texts;
  for (const QLabel* l : pane.explanation()->findChildren<QLabel*>()) texts << l->text();
  return texts.join(QLatin1Char('\n'));
}

void selectAlgorithm(MainWindow& w, const QString& name) {
  QComboBox* box = w.setupPanel()->algorithmBox();
  box->setCurrentIndex(box->findData(name));
}

// Puts `s` in the setup panel as a user's edit would (the panel says it changed).
void edit(MainWindow& w, const SessionSetup& s) {
  w.setupPanel()->setSetup(s);
  emit w.setupPanel()->changed();
}

TEST(WindowPlan, OpensOnTheSetupsRanksAndTheFirstStepOfItsSchedule) {
  auto w = makeWindow(remoteRing(4));
  const TopologyPane& pane = *w->topologyPane();
  ASSERT_TRUE(pane.showsPlan());
  const RunModel& m = pane.model();
  EXPECT_TRUE(m.planned());
  EXPECT_EQ(m.nranks(), 4);
  ASSERT_NE(m.schedule(), nullptr) << m.scheduleError();
  EXPECT_TRUE(m.scheduleError().empty());
  EXPECT_EQ(pane.eventsHeld(), 0u);  // nothing measured
  // Ring step 1: every rank sends one chunk to the next rank.
  const auto& transfers = m.timeline().transfers();
  ASSERT_EQ(transfers.size(), 4u);
  for (const Transfer& x : transfers) {
    EXPECT_EQ(x.receiver, (x.sender + 1) % 4);
    EXPECT_EQ(x.step, transfers.front().step);
    EXPECT_EQ(x.provenance, uint64_t{1} << x.sender);
  }
  EXPECT_EQ(pane.view()->tokens().size(), 4u);
  EXPECT_EQ(pane.view()->rankItems(), 4);
  // The strips hold each rank's own contribution, as a run starts.
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < pane.view()->strips().cells(); ++c) {
      EXPECT_EQ(pane.view()->strips().mask(r, c), uint64_t{1} << r);
    }
  }
  EXPECT_TRUE(
      pane.captionText().contains(QStringLiteral("ring allreduce · the plan · step 1 of 6")))
      << pane.captionText().toStdString();
  EXPECT_TRUE(pane.captionDetail().contains(QStringLiteral("press Run to measure")));
  EXPECT_TRUE(pane.captionDetail().contains(QStringLiteral("not measured")));
  const QString explained = explanationText(pane);
  EXPECT_TRUE(explained.contains(QStringLiteral("4 ranks"))) << explained.toStdString();
  EXPECT_TRUE(explained.contains(QStringLiteral("1M message")));
  EXPECT_TRUE(explained.contains(QStringLiteral("Each rank sends")));
  EXPECT_TRUE(explained.contains(QStringLiteral("not measured")));
  EXPECT_FALSE(explained.contains(QStringLiteral("0 ranks")));
  EXPECT_FALSE(explained.contains(QStringLiteral("No schedule")));
  EXPECT_FALSE(explained.contains(QStringLiteral("waiting for telemetry")));
  EXPECT_FALSE(pane.explanation()->ruleText().isEmpty());
}

TEST(WindowPlan, FollowsTheSetupAsItIsEdited) {
  auto w = makeWindow(remoteRing(4));
  const TopologyPane& pane = *w->topologyPane();
  selectAlgorithm(*w, QStringLiteral("tree"));
  ASSERT_TRUE(waitUntil([&] { return pane.model().run().request.algorithm == "tree"; }));
  EXPECT_TRUE(pane.showsPlan());
  EXPECT_TRUE(pane.captionText().startsWith(QStringLiteral("tree allreduce · the plan")));
  EXPECT_EQ(pane.view()->layout().kind, QStringLiteral("tree"));
  EXPECT_GT(pane.view()->tokens().size(), 0u);

  SessionSetup seven = remoteRing(4);
  seven.localWorkers = 3;
  edit(*w, seven);
  ASSERT_TRUE(waitUntil([&] { return pane.model().nranks() == 7; }));
  EXPECT_EQ(pane.model().run().request.algorithm, "ring");
  EXPECT_EQ(pane.view()->rankItems(), 7);
  EXPECT_TRUE(pane.captionText().contains(QStringLiteral("step 1 of 12")));

  // The ring order the setup names is the order chunks travel in.
  SessionSetup s = remoteRing(4);
  s.ringOrder = {0, 2, 1, 3};
  s.slowLinkFrom = 0;
  s.slowLinkTo = 2;
  s.slowLinkMBps = 100;
  edit(*w, s);
  ASSERT_TRUE(waitUntil([&] { return pane.model().run().request.ringOrder == s.ringOrder; }));
  for (const Transfer& x : pane.model().timeline().transfers()) {
    if (x.sender == 0) {
      EXPECT_EQ(x.receiver, 2);
    } else if (x.sender == 2) {
      EXPECT_EQ(x.receiver, 1);
    }
  }
  bool slowLabelled = false;
  for (const LayoutLink& l : pane.view()->layout().links) {
    slowLabelled |= l.slow && l.label == QStringLiteral("100 MB/s");
  }
  EXPECT_TRUE(slowLabelled);
}

TEST(WindowPlan, AnInvalidSetupShowsItsOwnRuleInOneLine) {
  SessionSetup s = remoteRing(4);
  s.remoteWorkers = 0;
  auto w = makeWindow(s);
  const TopologyPane& pane = *w->topologyPane();
  EXPECT_TRUE(pane.showsPlan());
  EXPECT_EQ(pane.captionDetail(),
            QStringLiteral("Local workers: local and remote workers make 0 ranks; must be 1..64"));
  EXPECT_FALSE(pane.captionDetail().contains(QStringLiteral("schedule")));
  EXPECT_FALSE(pane.explanation()->isVisibleTo(w.get()));
  EXPECT_EQ(pane.view()->rankItems(), 0);
  // Fixed, the plan comes back.
  s.localWorkers = 2;
  edit(*w, s);
  ASSERT_TRUE(waitUntil([&] { return pane.model().nranks() == 2; }));
  EXPECT_TRUE(pane.explanation()->isVisibleTo(w.get()));
  EXPECT_TRUE(pane.captionText().contains(QStringLiteral("the plan")));
}

TEST(WindowPlan, AReplayTakesThePlansPlaceUntilTheSetupChangesTheRun) {
  auto w = makeWindow(remoteRing(4));
  const TopologyPane& pane = *w->topologyPane();
  bool shown = false;
  QObject::connect(w.get(), &MainWindow::recordingShown, w.get(), [&] { shown = true; });
  w->openRecording(QStringLiteral(ARL_SOURCE_DIR "/resources/samples/tree-4.arlrec"));
  ASSERT_TRUE(waitUntil([&] { return shown; }));
  EXPECT_FALSE(pane.showsPlan());
  EXPECT_GT(pane.eventsHeld(), 0u);
  // What a run would draw stays the same: the replay stays.
  SessionSetup more = remoteRing(4);
  more.iterations = 9;
  more.warmup = 3;
  edit(*w, more);
  QThread::msleep(200);
  QCoreApplication::processEvents();
  QThread::msleep(200);
  QCoreApplication::processEvents();
  EXPECT_FALSE(pane.showsPlan());
  // A run that would differ: the plan of the new setup.
  selectAlgorithm(*w, QStringLiteral("halving-doubling"));
  ASSERT_TRUE(waitUntil([&] { return pane.showsPlan(); }));
  EXPECT_EQ(pane.model().run().request.algorithm, "halving-doubling");
}

TEST(WindowPlan, ARunTakesThePlansPlace) {
  SessionSetup s;
  s.localWorkers = 2;
  s.size = {false, 64 << 10, 0, 0, 2};
  s.slice = {false, 16 << 10, 0, 0, 2};
  s.iterations = 1;
  s.warmup = 0;
  auto w = makeWindow(s);
  const TopologyPane& pane = *w->topologyPane();
  EXPECT_TRUE(pane.showsPlan());
  bool ended = false;
  QObject::connect(w.get(), &MainWindow::sessionEnded, w.get(),
                   [&](const SessionEnd&) { ended = true; });
  ASSERT_TRUE(waitUntil([&] { return w->workers().size() >= 2; }));
  ASSERT_TRUE(w->run());
  ASSERT_TRUE(waitUntil([&] { return ended; }, 120000));
  EXPECT_FALSE(pane.showsPlan());
  EXPECT_FALSE(pane.model().planned());
  EXPECT_GT(pane.eventsHeld(), 0u);
  EXPECT_FALSE(pane.captionText().contains(QStringLiteral("the plan")));
}

TEST(WindowLayout, RunAndStopAreThereOnce) {
  auto w = makeWindow(remoteRing(4));
  int runs = 0;
  int stops = 0;
  for (const QAbstractButton* b : w->findChildren<QAbstractButton*>()) {
    runs += b->text() == QStringLiteral("Run");
    stops += b->text() == QStringLiteral("Stop");
  }
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(stops, 1);
  EXPECT_TRUE(w->setupPanel()->findChildren<QAbstractButton*>().size() > 0);
  for (const QAbstractButton* b : w->setupPanel()->findChildren<QAbstractButton*>()) {
    EXPECT_NE(b->text(), QStringLiteral("Run"));
  }
  EXPECT_EQ(w->runAction()->shortcut(), QKeySequence(Qt::CTRL | Qt::Key_R));
}

TEST(WindowLayout, TheSetupFitsA1600x1000WindowWithoutScrolling) {
  SessionSetup s;  // the defaults: 4 local workers, a sweep of sizes
  s.localWorkers = 0;
  s.remoteWorkers = 4;
  auto w = makeWindow(s);
  w->resize(1600, 1000);
  auto* dock = w->findChild<QDockWidget*>(QStringLiteral("setupDock"));
  ASSERT_NE(dock, nullptr);
  auto* scroll = qobject_cast<QScrollArea*>(dock->widget());
  ASSERT_NE(scroll, nullptr);
  ASSERT_TRUE(waitUntil([&] { return w->height() == 1000; }, 2000));
  for (int i = 0; i < 10; ++i) QCoreApplication::processEvents();
  EXPECT_FALSE(scroll->verticalScrollBar()->isVisible())
      << "the setup needs " << w->setupPanel()->sizeHint().height() << " px, the dock gives "
      << scroll->viewport()->height();
  // The common fields are in view, the rest folded with a summary.
  for (const char* key : {"remote", "present", "runs", "ring", "shaping"}) {
    SetupSection* sec = w->setupPanel()->section(QString::fromLatin1(key));
    ASSERT_NE(sec, nullptr) << key;
    EXPECT_FALSE(sec->isOpen()) << key;
    EXPECT_FALSE(sec->summary().isEmpty()) << key;
  }
  EXPECT_EQ(w->setupPanel()->section(QStringLiteral("remote"))->summary(),
            QStringLiteral("4 remote"));
  // Everything open is more than the dock holds: it scrolls, and every field stays reachable.
  w->setupPanel()->setOpenSections({QStringLiteral("remote"), QStringLiteral("present"),
                                    QStringLiteral("runs"), QStringLiteral("ring"),
                                    QStringLiteral("shaping")});
  EXPECT_TRUE(waitUntil([&] { return scroll->verticalScrollBar()->isVisible(); }, 2000));
}

TEST(WindowLayout, AFoldedSectionOpensOnARefusalAndRemembersItsState) {
  auto w = makeWindow(remoteRing(4));
  SetupPanel& panel = *w->setupPanel();
  SetupSection* ring = panel.section(QStringLiteral("ring"));
  ASSERT_FALSE(ring->isOpen());
  panel.ringOrderEdit()->setText(QStringLiteral("0 1 1 2"));
  emit panel.ringOrderEdit()->textEdited(panel.ringOrderEdit()->text());
  ASSERT_TRUE(waitUntil([&] { return !panel.problemText(SetupField::RingOrder).isEmpty(); }));
  EXPECT_TRUE(ring->isOpen());
  EXPECT_TRUE(ring->refused());
  EXPECT_TRUE(panel.ringOrderEdit()->isVisibleTo(w.get()));
  EXPECT_TRUE(w->topologyPane()->captionDetail().startsWith(QStringLiteral("Order: ")));
  // A click on a folded title opens it, another folds it again.
  SetupSection* remote = panel.section(QStringLiteral("remote"));
  auto* title = remote->findChild<QAbstractButton*>();
  ASSERT_NE(title, nullptr);
  title->click();
  EXPECT_TRUE(remote->isOpen());
  EXPECT_TRUE(remote->form()->parentWidget()->isVisibleTo(w.get()));
  title->click();
  EXPECT_FALSE(remote->isOpen());
  // The open sections read back as they were left.
  panel.setOpenSections({QStringLiteral("shaping")});
  EXPECT_TRUE(panel.section(QStringLiteral("shaping"))->isOpen());
  EXPECT_TRUE(ring->isOpen());  // still refused
  EXPECT_FALSE(panel.section(QStringLiteral("remote"))->isOpen());
  const QStringList open = panel.openSections();
  EXPECT_TRUE(open.contains(QStringLiteral("shaping")));
  EXPECT_TRUE(open.contains(QStringLiteral("ring")));
  EXPECT_EQ(open.size(), 2);
}

}  // namespace
}  // namespace arl::ui
