// The playback bar under the topology view: live, step back, play/pause, step forward, the
// speed (1x down to 1e-6x, the factor always shown) and a scrubbable timeline with every step
// ticked and the phases shaded. It shows a PlaybackClock and asks the pane to change it; the
// pane owns the clock.
#pragma once

#include <QWidget>
#include <cstdint>
#include <vector>

class QLabel;
class QSlider;
class QToolButton;

namespace arl::ui {

class PlaybackClock;

// The timeline: a track from the run's first to its last event, a tick at each step boundary,
// bands for the phases, and a handle at the playback time. Click or drag to seek.
class TimelineScrubber : public QWidget {
  Q_OBJECT

 public:
  explicit TimelineScrubber(QWidget* parent = nullptr);
  void setSpan(int64_t startNs, int64_t endNs);
  void setTicks(std::vector<int64_t> ticks, std::vector<uint8_t> phases);
  void setTime(int64_t t);
  QSize sizeHint() const override { return {400, 34}; }

 signals:
  void seekRequested(int64_t t);

 protected:
  void paintEvent(QPaintEvent*) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;

 private:
  double xOf(int64_t t) const;
  int64_t timeAt(double x) const;
  int64_t start_ = 0;
  int64_t end_ = 1;
  int64_t t_ = 0;
  std::vector<int64_t> ticks_;
  std::vector<uint8_t> phases_;
};

class PlaybackBar : public QWidget {
  Q_OBJECT

 public:
  explicit PlaybackBar(QWidget* parent = nullptr);
  // Shows the clock's state (mode, speed, time) and the run's steps.
  void showClock(const PlaybackClock& clock);
  void setSteps(const std::vector<int64_t>& boundaries, const std::vector<uint8_t>& phases);
  // Slider position of a speed, and back (log scale, 1x at the right).
  static int sliderForSpeed(double speed);
  static double speedForSlider(int position);
  static QString speedText(double speed);
  QString speedLabel() const;

 signals:
  void liveRequested();
  void playPauseRequested();
  void stepForwardRequested();
  void stepBackRequested();
  void speedRequested(double factor);
  void seekRequested(int64_t t);

 private:
  QToolButton* live_;
  QToolButton* back_;
  QToolButton* play_;
  QToolButton* forward_;
  QSlider* speed_;
  QLabel* speedLabel_;
  QLabel* time_;
  TimelineScrubber* scrubber_;
};

}  // namespace arl::ui
