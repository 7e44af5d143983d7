// The playback clock of the topology view: a time on the run's telemetry clock (ns) that a
// frame timer advances by wall time scaled by a speed factor, that jumps between step
// boundaries in step mode, and that trails the present by a fixed delay while live. No Qt: the
// pane drives it from its frame timer, the tests call it directly.
#pragma once

#include <cstdint>
#include <vector>

namespace arl::ui {

class PlaybackClock {
 public:
  // Speeds a user may pick: 1x (the run's own pace) down to kMinSpeed (real steps take
  // microseconds; a teacher wants one step to last about a second).
  static constexpr double kMaxSpeed = 1.0;
  static constexpr double kMinSpeed = 1e-6;

  // While live, the time shown trails the present by this much: a worker ships records once
  // they have waited 250 ms (docs/telemetry.md, "How an event travels"), and the window hands
  // them on within tens of milliseconds, so by then every rank's telemetry of that moment has
  // arrived, both ends of its messages are known and they can be drawn in flight.
  static constexpr int64_t kLiveDelayNs = 500'000'000;

  enum class Mode { Live, Playing, Paused, Stepping };

  // The span the telemetry covers so far; the time is kept inside it.
  void setRange(int64_t startNs, int64_t endNs);
  // Step boundaries (the time each step of each iteration ended), ascending.
  void setBoundaries(std::vector<int64_t> boundaries);
  const std::vector<int64_t>& boundaries() const { return boundaries_; }

  void setSpeed(double factor);  // clamped to [kMinSpeed, kMaxSpeed]
  double speed() const { return speed_; }

  void goLive() {
    mode_ = Mode::Live;
    t_ = endNs_;
  }
  void play();  // from the end of the range, plays again from its start
  void pause() { mode_ = Mode::Paused; }
  Mode mode() const { return mode_; }
  bool running() const { return mode_ == Mode::Playing || mode_ == Mode::Stepping; }

  // Moves to `t` (clamped) and pauses, unless live.
  void seek(int64_t t);
  // Plays to the next boundary after the current time and stops there; a step already under
  // way finishes at once first. At the last boundary it stays.
  void stepForward();
  // Jumps to the last boundary before the current time (the range's start before the first).
  void stepBack();

  // Advances by `wallNs` of wall time: speed x wallNs while playing or stepping (stopping at
  // the end, or at the step's boundary); nothing while live (followLive). Returns the time.
  int64_t advance(int64_t wallNs);
  // While live: the time becomes `nowNs` (the present on the telemetry's clock) less
  // kLiveDelayNs, at the run's own pace, kept inside the range (so it waits at the newest
  // telemetry when that is late). Returns the time.
  int64_t followLive(int64_t nowNs);

  int64_t time() const { return t_; }
  int64_t startNs() const { return startNs_; }
  int64_t endNs() const { return endNs_; }
  // The last boundary at or before the current time (the range's start before the first):
  // what step mode shows buffers at, so they change only at boundaries.
  int64_t boundaryAtOrBefore(int64_t t) const;
  // The speed at which a step of median length lasts `wallSeconds` (clamped to the range).
  double speedForStepSeconds(double wallSeconds) const;

 private:
  int64_t startNs_ = 0;
  int64_t endNs_ = 0;
  int64_t t_ = 0;
  double carryNs_ = 0;  // playback time below one nanosecond, kept between frames
  int64_t stepTarget_ = 0;
  double speed_ = 1e-3;
  Mode mode_ = Mode::Live;
  std::vector<int64_t> boundaries_;
};

}  // namespace arl::ui
