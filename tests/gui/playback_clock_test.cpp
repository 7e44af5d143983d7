#include <gtest/gtest.h>

#include "playback/playback_bar.h"
#include "playback/playback_clock.h"

namespace arl::ui {
namespace {

TEST(PlaybackClock, AdvancesByWallTimeTimesSpeedAndStopsAtTheEnd) {
  PlaybackClock c;
  c.setRange(1000, 11000);
  c.seek(1000);
  c.setSpeed(0.01);
  c.play();
  c.advance(100'000);
  EXPECT_EQ(c.time(), 2000);
  // Below a nanosecond per frame still adds up.
  c.setSpeed(1e-6);
  for (int i = 0; i < 1000; ++i) c.advance(16'000);  // 16 ms frames, 16 s of wall time
  EXPECT_EQ(c.time(), 2016);
  c.setSpeed(1);
  c.advance(1'000'000);
  EXPECT_EQ(c.time(), 11000);
  EXPECT_EQ(c.mode(), PlaybackClock::Mode::Paused);
}

TEST(PlaybackClock, ClampsSpeedToItsRange) {
  PlaybackClock c;
  c.setSpeed(5);
  EXPECT_EQ(c.speed(), PlaybackClock::kMaxSpeed);
  c.setSpeed(0);
  EXPECT_EQ(c.speed(), PlaybackClock::kMinSpeed);
}

TEST(PlaybackClock, StepsBetweenBoundaries) {
  PlaybackClock c;
  c.setRange(0, 100);
  c.setBoundaries({30, 10, 60});
  c.seek(0);
  c.setSpeed(1);
  c.stepForward();
  EXPECT_EQ(c.mode(), PlaybackClock::Mode::Stepping);
  c.advance(5);
  EXPECT_EQ(c.time(), 5);
  c.advance(50);
  EXPECT_EQ(c.time(), 10);
  EXPECT_EQ(c.mode(), PlaybackClock::Mode::Paused);
  c.stepForward();
  c.stepForward();  // the step under way ends at once
  c.advance(1000);
  EXPECT_EQ(c.time(), 60);
  c.stepForward();  // no boundary after the last
  EXPECT_EQ(c.time(), 60);
  c.stepBack();
  EXPECT_EQ(c.time(), 30);
  EXPECT_EQ(c.boundaryAtOrBefore(45), 30);
  EXPECT_EQ(c.boundaryAtOrBefore(5), 0);
  c.stepBack();
  c.stepBack();
  EXPECT_EQ(c.time(), 0);
}

// Live, the time is the present less the delay, at the run's own pace, and it waits at the
// newest telemetry while that is late.
TEST(PlaybackClock, LiveTrailsThePresentByItsDelay) {
  constexpr int64_t kDelay = PlaybackClock::kLiveDelayNs;
  PlaybackClock c;
  c.goLive();
  c.setRange(1'000, 4'000'000'000);
  EXPECT_EQ(c.followLive(2'000'000'000), 2'000'000'000 - kDelay);
  c.advance(1'000'000);  // wall time alone does not move a live clock
  EXPECT_EQ(c.time(), 2'000'000'000 - kDelay);
  EXPECT_EQ(c.followLive(2'250'000'000), 2'250'000'000 - kDelay);
  // Telemetry late: the time waits at its newest, and goes on once more has come.
  EXPECT_EQ(c.followLive(9'000'000'000), 4'000'000'000);
  c.setRange(1'000, 9'000'000'000);
  EXPECT_EQ(c.time(), 4'000'000'000);
  EXPECT_EQ(c.followLive(9'000'000'000), 9'000'000'000 - kDelay);
  // Before the first telemetry's time, the first.
  EXPECT_EQ(c.followLive(kDelay), 1'000);
  // Paused, the present does not move it.
  c.pause();
  EXPECT_EQ(c.followLive(9'000'000'000), 1'000);
}

TEST(PlaybackClock, PicksASpeedWhereAStepLastsTheAskedTime) {
  PlaybackClock c;
  c.setRange(0, 3'000'000);
  c.setBoundaries({1'000'000, 2'000'000, 3'000'000});  // 1 ms steps
  EXPECT_DOUBLE_EQ(c.speedForStepSeconds(1.0), 1e-3);
}

TEST(PlaybackBar, SpeedSliderCoversOneToAMillionthOnALogScale) {
  EXPECT_NEAR(PlaybackBar::speedForSlider(PlaybackBar::sliderForSpeed(1.0)), 1.0, 1e-9);
  EXPECT_NEAR(PlaybackBar::speedForSlider(PlaybackBar::sliderForSpeed(1e-3)), 1e-3, 1e-9);
  EXPECT_NEAR(PlaybackBar::speedForSlider(PlaybackBar::sliderForSpeed(1e-6)), 1e-6, 1e-12);
  EXPECT_EQ(PlaybackBar::speedText(1e-3), QStringLiteral("0.001× (1/1000)"));
}

}  // namespace
}  // namespace arl::ui
