// Play a rank in the window, offscreen and by the keyboard alone: a whole game played with
// the schedule's moves is all right first time and ends with every rank holding the full
// sums; a wrong key is refused with the reason and the right move is made; at the end a real
// run of the same setup (bench on real workers) is recorded and handed to the window.
#include <gtest/gtest.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QSignalSpy>
#include <QTest>

#include "lessons/play_rank_panel.h"

namespace arl::ui {
namespace {

// Plays the current step's moves with keys, as a student would.
void keyTheStep(PlayRankPanel& panel) {
  const RankGame& g = *panel.game();
  for (const PlayMove& m : g.movesAt(g.step())) {
    if (m.kind == PlayMove::Kind::Send) {
      QTest::keyClick(&panel, static_cast<Qt::Key>(Qt::Key_0 + static_cast<int>(m.chunk)));
      for (int i = 0; i < g.nranks() && panel.selectedPeer() != m.peer; ++i)
        QTest::keyClick(&panel, Qt::Key_Right);
      ASSERT_EQ(panel.selectedPeer(), m.peer);
      QTest::keyClick(&panel, Qt::Key_S);
    } else {
      QTest::keyClick(&panel, m.action == ArrivalAction::Add ? Qt::Key_A : Qt::Key_C);
    }
  }
  QTest::keyClick(&panel, Qt::Key_E);
}

class PlayRankKeys : public ::testing::TestWithParam<const char*> {};

TEST_P(PlayRankKeys, AWholeGameByKeyboardIsRightFirstTime) {
  PlayRankPanel panel;
  panel.setAnimationMs(0);
  ASSERT_TRUE(panel.start(QString::fromLatin1(GetParam()), 4, 2));
  int steps = 0;
  while (!panel.game()->done() && steps < 100) {
    keyTheStep(panel);
    ++steps;
  }
  const RankGame& me = *panel.game();
  ASSERT_TRUE(me.done());
  EXPECT_EQ(steps, static_cast<int>(me.nsteps()));
  EXPECT_EQ(panel.mistakes(), 0);
  EXPECT_TRUE(panel.stepText().startsWith(QStringLiteral("All ")));
  EXPECT_TRUE(panel.feedback().contains(QStringLiteral("Done.")));
  // The others followed the schedule: every element of every rank holds the full sum.
  for (const RankGame& g : panel.ranks()) {
    ASSERT_TRUE(g.done());
    for (uint64_t e = 0; e < g.elements(); ++e) EXPECT_EQ(g.holds(e), 0b1111u);
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, PlayRankKeys,
                         ::testing::Values("ring", "tree", "halving-doubling"));

TEST(PlayRankPanel, AWrongKeyIsExplainedAndTheRightMoveMade) {
  PlayRankPanel panel;
  panel.setAnimationMs(0);
  ASSERT_TRUE(panel.start(QStringLiteral("ring"), 4, 1));
  // Step 1: rank 1 sends its chunk 0 to rank 2; chunk 3 is not its to send.
  QTest::keyClick(&panel, Qt::Key_3);
  QTest::keyClick(&panel, Qt::Key_S);
  EXPECT_EQ(panel.mistakes(), 1);
  EXPECT_TRUE(panel.feedback().contains(QStringLiteral("chunk 3 is not yours to send at step 1")))
      << panel.feedback().toStdString();
  EXPECT_TRUE(panel.feedback().contains(QStringLiteral("send chunk 0 to rank 2")));
  EXPECT_EQ(panel.game()->madeThisStep().size(), 1u);  // made in the student's place
  QTest::keyClick(&panel, Qt::Key_E);
  EXPECT_EQ(panel.game()->step(), 1u);
  // Step 2: chunk 3 arrives from rank 0 and must be added, not copied.
  QTest::keyClick(&panel, Qt::Key_C);
  EXPECT_EQ(panel.mistakes(), 2);
  EXPECT_TRUE(panel.feedback().contains(QStringLiteral("copying would throw your own")));
  EXPECT_EQ(panel.game()->holds(6), 0b0011u);  // chunk 3: rank 0's and rank 1's
}

TEST(PlayRankPanel, BadSetupsAreRefusedWithTheReason) {
  PlayRankPanel panel;
  EXPECT_FALSE(panel.start(QStringLiteral("no-such"), 4, 1));
  EXPECT_TRUE(panel.feedback().contains(QStringLiteral("Cannot play this")));
  EXPECT_FALSE(panel.start(QStringLiteral("ring"), 4, 4));
  EXPECT_TRUE(panel.feedback().contains(QStringLiteral("rank 4")));
  EXPECT_FALSE(panel.replayRealRun());  // the game that runs is not over
}

TEST(PlayRankPanel, TheEndReplaysARealRunOfTheSameSetup) {
  PlayRankPanel panel;
  panel.setAnimationMs(0);
  panel.setProgram(QStringLiteral(ARL_LAB_BINARY));
  ASSERT_TRUE(panel.start(QStringLiteral("ring"), 4, 0));
  for (int i = 0; i < 100 && !panel.game()->done(); ++i) QTest::keyClick(&panel, Qt::Key_E);
  ASSERT_TRUE(panel.game()->done());
  EXPECT_GT(panel.mistakes(), 0);  // every move was made for the student
  QSignalSpy replay(&panel, &PlayRankPanel::replayRequested);
  QTest::keyClick(&panel, Qt::Key_R);
  EXPECT_TRUE(panel.running());
  QElapsedTimer t;
  t.start();
  while (replay.isEmpty() && t.elapsed() < 60'000) replay.wait(500);
  ASSERT_EQ(replay.size(), 1) << panel.feedback().toStdString();
  EXPECT_TRUE(QFileInfo(replay.at(0).at(0).toString()).isFile());
  EXPECT_TRUE(replay.at(0).at(1).toString().contains(QStringLiteral("REPLAY")));
}

}  // namespace
}  // namespace arl::ui
