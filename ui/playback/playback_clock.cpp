#include "playback/playback_clock.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "model/metrics.h"

namespace arl::ui {

void PlaybackClock::setRange(int64_t startNs, int64_t endNs) {
  startNs_ = startNs;
  endNs_ = std::max(startNs, endNs);
  t_ = std::clamp(t_, startNs_, endNs_);
}

void PlaybackClock::setBoundaries(std::vector<int64_t> boundaries) {
  std::sort(boundaries.begin(), boundaries.end());
  boundaries_ = std::move(boundaries);
}

void PlaybackClock::setSpeed(double factor) {
  if (!std::isfinite(factor)) return;
  speed_ = std::clamp(factor, kMinSpeed, kMaxSpeed);
}

void PlaybackClock::play() {
  if (t_ >= endNs_) t_ = startNs_;
  carryNs_ = 0;
  mode_ = Mode::Playing;
}

void PlaybackClock::seek(int64_t t) {
  t_ = std::clamp(t, startNs_, endNs_);
  carryNs_ = 0;
  if (mode_ != Mode::Live) mode_ = Mode::Paused;
}

void PlaybackClock::stepForward() {
  if (mode_ == Mode::Stepping) t_ = stepTarget_;
  const auto it = std::upper_bound(boundaries_.begin(), boundaries_.end(), t_);
  if (it == boundaries_.end() || *it > endNs_) {
    mode_ = Mode::Paused;
    return;
  }
  stepTarget_ = *it;
  carryNs_ = 0;
  mode_ = Mode::Stepping;
}

void PlaybackClock::stepBack() {
  if (mode_ == Mode::Stepping) t_ = stepTarget_;
  const auto it = std::lower_bound(boundaries_.begin(), boundaries_.end(), t_);
  t_ = it == boundaries_.begin() ? startNs_ : std::max(startNs_, *std::prev(it));
  carryNs_ = 0;
  mode_ = Mode::Paused;
}

int64_t PlaybackClock::followLive(int64_t nowNs) {
  if (mode_ == Mode::Live) t_ = std::clamp(nowNs - kLiveDelayNs, startNs_, endNs_);
  return t_;
}

int64_t PlaybackClock::advance(int64_t wallNs) {
  if (!running()) return t_;
  carryNs_ += speed_ * static_cast<double>(std::max<int64_t>(wallNs, 0));
  const auto whole = static_cast<int64_t>(carryNs_);
  carryNs_ -= static_cast<double>(whole);
  t_ += whole;
  const int64_t stop = mode_ == Mode::Stepping ? std::min(stepTarget_, endNs_) : endNs_;
  if (t_ >= stop) {
    t_ = stop;
    mode_ = Mode::Paused;
  }
  return t_;
}

int64_t PlaybackClock::boundaryAtOrBefore(int64_t t) const {
  const auto it = std::upper_bound(boundaries_.begin(), boundaries_.end(), t);
  return it == boundaries_.begin() ? startNs_ : *std::prev(it);
}

double PlaybackClock::speedForStepSeconds(double wallSeconds) const {
  std::vector<double> lengths;
  int64_t prev = startNs_;
  for (int64_t b : boundaries_) {
    if (b > prev) lengths.push_back(static_cast<double>(b - prev));
    prev = std::max(prev, b);
  }
  if (lengths.empty() || wallSeconds <= 0) return 1e-3;
  return std::clamp(median(std::move(lengths)) / (wallSeconds * 1e9), kMinSpeed, kMaxSpeed);
}

}  // namespace arl::ui
