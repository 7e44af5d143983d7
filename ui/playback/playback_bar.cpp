#include "playback/playback_bar.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QSlider>
#include <QStyle>
#include <QToolButton>
#include <algorithm>
#include <cmath>

#include "playback/playback_clock.h"
#include "schedule/schedule.h"

namespace arl::ui {

namespace {

constexpr int kSliderSteps = 600;  // 100 positions per decade, 1x to 1e-6x

QString formatNs(int64_t ns) {
  const double v = static_cast<double>(ns);
  if (std::abs(v) >= 1e9) return QString::number(v / 1e9, 'f', 3) + QStringLiteral(" s");
  if (std::abs(v) >= 1e6) return QString::number(v / 1e6, 'f', 3) + QStringLiteral(" ms");
  return QString::number(v / 1e3, 'f', 1) + QStringLiteral(" µs");
}

QColor phaseColor(uint8_t phase) {
  switch (static_cast<Phase>(phase)) {
    case Phase::ReduceScatter:
    case Phase::Reduce: return QColor(0xdc, 0xe8, 0xf7);
    case Phase::AllGather:
    case Phase::Broadcast: return QColor(0xfd, 0xf0, 0xc8);
    case Phase::Local: break;
  }
  return QColor(0xee, 0xee, 0xee);
}

}  // namespace

// ---- TimelineScrubber ----

TimelineScrubber::TimelineScrubber(QWidget* parent) : QWidget(parent) {
  setMinimumHeight(30);
  setCursor(Qt::PointingHandCursor);
  setToolTip(QStringLiteral("Drag to move through the run; ticks mark the end of each step"));
}

void TimelineScrubber::setSpan(int64_t startNs, int64_t endNs) {
  start_ = startNs;
  end_ = std::max(endNs, startNs + 1);
  update();
}

void TimelineScrubber::setTicks(std::vector<int64_t> ticks, std::vector<uint8_t> phases) {
  ticks_ = std::move(ticks);
  phases_ = std::move(phases);
  update();
}

void TimelineScrubber::setTime(int64_t t) {
  if (t == t_) return;
  t_ = t;
  update();
}

double TimelineScrubber::xOf(int64_t t) const {
  const double w = width() - 16;
  return 8 + w * static_cast<double>(t - start_) / static_cast<double>(end_ - start_);
}

int64_t TimelineScrubber::timeAt(double x) const {
  const double w = std::max(1, width() - 16);
  const double f = std::clamp((x - 8) / w, 0.0, 1.0);
  return start_ + static_cast<int64_t>(f * static_cast<double>(end_ - start_));
}

void TimelineScrubber::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QRectF track(8, height() / 2.0 - 7, width() - 16, 14);
  p.setPen(Qt::NoPen);
  p.setBrush(QColor(0xee, 0xf0, 0xf3));
  p.drawRoundedRect(track, 4, 4);
  // Phase bands: from each boundary to the next, in that step's phase colour; runs of one
  // phase merge into one rectangle, so a long run costs a few rectangles, not one per step.
  double bandStart = xOf(start_);
  int bandPhase = -1;
  for (size_t i = 0; i <= ticks_.size(); ++i) {
    const int phase = i < ticks_.size() && i < phases_.size() ? phases_[i] : -2;
    if (phase == bandPhase) continue;
    const double x =
        i < ticks_.size() && i > 0 ? xOf(ticks_[i - 1]) : (i == 0 ? bandStart : xOf(ticks_.back()));
    if (bandPhase >= 0 && x > bandStart) {
      p.setBrush(phaseColor(static_cast<uint8_t>(bandPhase)));
      p.drawRect(QRectF(QPointF(bandStart, track.top()), QPointF(x, track.bottom())));
    }
    bandStart = x;
    bandPhase = phase;
  }
  p.setPen(QPen(QColor(0x6b, 0x74, 0x80), 1));
  const double minGap = 3;
  double lastX = -100;
  for (int64_t t : ticks_) {
    const double x = xOf(t);
    if (x - lastX < minGap) continue;
    p.drawLine(QPointF(x, track.top() - 3), QPointF(x, track.bottom() + 3));
    lastX = x;
  }
  const double hx = xOf(t_);
  p.setPen(QPen(QColor(0x1d, 0x22, 0x2a), 2));
  p.setBrush(QColor(0xff, 0xc4, 0x00));
  p.drawRoundedRect(QRectF(hx - 5, track.top() - 6, 10, track.height() + 12), 3, 3);
}

void TimelineScrubber::mousePressEvent(QMouseEvent* e) {
  emit seekRequested(timeAt(e->position().x()));
}

void TimelineScrubber::mouseMoveEvent(QMouseEvent* e) {
  if (e->buttons() & Qt::LeftButton) emit seekRequested(timeAt(e->position().x()));
}

// ---- PlaybackBar ----

PlaybackBar::PlaybackBar(QWidget* parent) : QWidget(parent) {
  auto* lay = new QHBoxLayout(this);
  lay->setContentsMargins(10, 6, 10, 6);
  lay->setSpacing(8);
  auto button = [&](const QString& text, const QString& tip, QStyle::StandardPixmap icon) {
    auto* b = new QToolButton(this);
    b->setText(text);
    b->setToolTip(tip);
    b->setIcon(style()->standardIcon(icon));
    b->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    b->setAutoRaise(true);
    lay->addWidget(b);
    return b;
  };
  live_ = button(QStringLiteral("Live"),
                 QStringLiteral("Follow the run as it runs, at its own pace, half a second behind"),
                 QStyle::SP_MediaSeekForward);
  live_->setCheckable(true);
  back_ = button(QStringLiteral("Step"),
                 QStringLiteral("Back one step (to the previous step boundary)"),
                 QStyle::SP_MediaSkipBackward);
  play_ = button(QStringLiteral("Play"),
                 QStringLiteral("Play or pause the run at the chosen speed"), QStyle::SP_MediaPlay);
  forward_ = button(QStringLiteral("Step"), QStringLiteral("Play one step and stop at its end"),
                    QStyle::SP_MediaSkipForward);
  speed_ = new QSlider(Qt::Horizontal, this);
  speed_->setRange(0, kSliderSteps);
  speed_->setFixedWidth(110);
  speed_->setToolTip(QStringLiteral("Playback speed: 1× is the run's real pace"));
  lay->addWidget(speed_);
  speedLabel_ = new QLabel(this);
  speedLabel_->setMinimumWidth(130);
  QFont bold = speedLabel_->font();
  bold.setBold(true);
  speedLabel_->setFont(bold);
  lay->addWidget(speedLabel_);
  scrubber_ = new TimelineScrubber(this);
  lay->addWidget(scrubber_, 1);
  time_ = new QLabel(this);
  time_->setMinimumWidth(130);
  lay->addWidget(time_);
  connect(live_, &QToolButton::clicked, this, &PlaybackBar::liveRequested);
  connect(back_, &QToolButton::clicked, this, &PlaybackBar::stepBackRequested);
  connect(play_, &QToolButton::clicked, this, &PlaybackBar::playPauseRequested);
  connect(forward_, &QToolButton::clicked, this, &PlaybackBar::stepForwardRequested);
  connect(speed_, &QSlider::valueChanged, this,
          [this](int v) { emit speedRequested(speedForSlider(v)); });
  connect(scrubber_, &TimelineScrubber::seekRequested, this, &PlaybackBar::seekRequested);
}

int PlaybackBar::sliderForSpeed(double speed) {
  const double decades =
      std::log10(std::clamp(speed, PlaybackClock::kMinSpeed, PlaybackClock::kMaxSpeed));
  return static_cast<int>(std::lround(kSliderSteps + decades * 100));
}

double PlaybackBar::speedForSlider(int position) {
  return std::pow(10.0, static_cast<double>(position - kSliderSteps) / 100.0);
}

QString PlaybackBar::speedText(double speed) {
  if (speed >= 0.1) return QString::number(speed, 'g', 2) + QStringLiteral("×");
  // Two significant digits in plain decimals (0.00034×, never 3.4e-04×), and the slow-motion
  // factor, which reads better at a glance: "1/2900".
  const int digits = static_cast<int>(std::ceil(-std::log10(speed))) + 1;
  const long inverse = std::lround(1.0 / speed);
  const long shown = inverse >= 1000 ? (inverse + 50) / 100 * 100 : inverse;
  QString text = QString::number(speed, 'f', std::clamp(digits, 1, 8));
  while (text.endsWith(QChar('0'))) text.chop(1);
  return QStringLiteral("%1× (1/%2)").arg(text).arg(shown);
}

QString PlaybackBar::speedLabel() const { return speedLabel_->text(); }

void PlaybackBar::showClock(const PlaybackClock& clock) {
  const bool live = clock.mode() == PlaybackClock::Mode::Live;
  live_->setChecked(live);
  const bool running = clock.running();
  play_->setText(running ? QStringLiteral("Pause") : QStringLiteral("Play"));
  play_->setIcon(style()->standardIcon(running ? QStyle::SP_MediaPause : QStyle::SP_MediaPlay));
  const QSignalBlocker block(speed_);
  speed_->setValue(sliderForSpeed(clock.speed()));
  speedLabel_->setText(live ? QStringLiteral("live") : speedText(clock.speed()));
  scrubber_->setSpan(clock.startNs(), clock.endNs());
  scrubber_->setTime(clock.time());
  time_->setText(formatNs(clock.time() - clock.startNs()) + QStringLiteral(" / ") +
                 formatNs(clock.endNs() - clock.startNs()));
}

void PlaybackBar::setSteps(const std::vector<int64_t>& boundaries,
                           const std::vector<uint8_t>& phases) {
  scrubber_->setTicks(boundaries, phases);
}

}  // namespace arl::ui
