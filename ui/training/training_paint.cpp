#include "training/training_paint.h"

#include <QFontMetricsF>
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "charts/paint_util.h"
#include "style/palette.h"

namespace arl::ui {
namespace {

// The figure's heading: title and subtitle on paper; on screen the view's heading names the
// figure, so the subtitle alone. Returns what is left below it.
QRectF heading(QPainter& p, const QRectF& r, const std::string& title, const std::string& subtitle,
               const FigureStyle& s) {
  if (!s.compact) return drawHeading(p, r, title, subtitle, s);
  const QFontMetricsF fm(s.font);
  p.setFont(s.font);
  p.setPen(s.muted);
  const QRectF line(r.left() + 4, r.top() + 2, r.width() - 8, fm.height());
  p.drawText(line, Qt::AlignHCenter | Qt::AlignVCenter,
             fm.elidedText(qs(subtitle), Qt::ElideRight, line.width()));
  return QRectF(r.left(), line.bottom() + 6, r.width(), r.bottom() - line.bottom() - 6);
}

QRectF note(QPainter& p, const QRectF& r, const std::string& text, const FigureStyle& s) {
  return s.compact ? r : drawNote(p, r, text, s);
}

// Text that reads on `fill`: white on a dark fill, near black on a light one.
QColor textOn(const QColor& fill) {
  return fill.lightnessF() < 0.55 ? QColor(Qt::white) : QColor(0x20, 0x20, 0x20);
}

// The hidden share: communication's orange crossed by compute's blue, both at once.
void fillHidden(QPainter& p, const QRectF& box) {
  p.fillRect(box, hiddenCommColor());
  p.fillRect(box, QBrush(computeAloneColor(), Qt::BDiagPattern));
}

struct Swatch {
  enum Look : uint8_t { Box, Hidden, Line };
  QColor fill;
  QString name;
  Look look = Box;
};

// A row of swatches with their names, centred in `r`.
void drawLegend(QPainter& p, const QRectF& r, const std::vector<Swatch>& items,
                const FigureStyle& s) {
  p.setFont(s.font);
  const QFontMetricsF fm(s.font);
  double width = 0;
  for (const Swatch& w : items) width += 26 + fm.horizontalAdvance(w.name);
  double x = r.left() + std::max(0.0, (r.width() - width) / 2);
  for (const Swatch& w : items) {
    const QRectF box(x, r.top() + 3, 14, fm.height() - 6);
    if (w.look == Swatch::Hidden) {
      fillHidden(p, box);
    } else if (w.look == Swatch::Line) {
      p.setPen(QPen(w.fill, 1.5));
      p.drawLine(QPointF(box.center().x(), box.top() - 1),
                 QPointF(box.center().x(), box.bottom() + 1));
    } else {
      p.fillRect(box, w.fill);
    }
    p.setPen(s.text);
    p.drawText(QPointF(x + 18, r.top() + fm.ascent()), w.name);
    x += 26 + fm.horizontalAdvance(w.name);
  }
}

// The room the axis's tick labels take left of the plot.
double labelsWidth(const ChartAxis& y, const FigureStyle& s) {
  const QFontMetricsF fm(s.font);
  double w = 0;
  for (const AxisTick& t : y.ticks) w = std::max(w, fm.horizontalAdvance(qs(t.label)));
  return w + 12;
}

void drawValueAxis(QPainter& p, const QRectF& plot, const ChartAxis& y, const FigureStyle& s) {
  const QFontMetricsF fm(s.font);
  p.setFont(s.font);
  for (const AxisTick& t : y.ticks) {
    if (t.value > y.max) continue;
    const double at = plot.bottom() - plot.height() * (t.value - y.min) / (y.max - y.min);
    p.setPen(QPen(s.grid, 1));
    p.drawLine(QPointF(plot.left(), at), QPointF(plot.right(), at));
    p.setPen(s.text);
    p.drawText(QRectF(plot.left() - labelsWidth(y, s), at - fm.height() / 2, labelsWidth(y, s) - 6,
                      fm.height()),
               Qt::AlignRight | Qt::AlignVCenter, qs(t.label));
  }
  p.setPen(QPen(s.muted, 1));
  p.drawLine(plot.bottomLeft(), plot.bottomRight());
  p.drawLine(plot.bottomLeft(), plot.topLeft());
}

// One run's bar: compute alone at the bottom, the hidden share over it, the exposed share on
// top, each with its time written in it where it fits, the step time above.
void drawSplitBar(QPainter& p, const QRectF& slot, const QRectF& plot, const StepSplitBar& b,
                  double yMax, const FigureStyle& s) {
  const QFontMetricsF fm(s.font);
  const double w = std::min(slot.width() * 0.55, 140.0);
  const double x = slot.center().x() - w / 2;
  const double perUs = plot.height() / yMax;
  double y = plot.bottom();
  const std::pair<double, int> parts[] = {{b.computeAloneUs, 0}, {b.hiddenUs, 1}, {b.exposedUs, 2}};
  for (const auto& [us, part] : parts) {
    const double h = us * perUs;
    const QRectF box(x, y - h, w, h);
    if (part == 1) {
      fillHidden(p, box);
    } else {
      p.fillRect(box, part == 0 ? computeAloneColor() : exposedCommColor());
    }
    const QString value = qs(timeLabel(us));
    if (h >= fm.height() + 2 && fm.horizontalAdvance(value) + 6 <= w) {
      const QColor fill = part == 0   ? computeAloneColor()
                          : part == 1 ? hiddenCommColor()
                                      : exposedCommColor();
      const QRectF label =
          QRectF(box.center().x() - fm.horizontalAdvance(value) / 2 - 3,
                 box.center().y() - fm.height() / 2, fm.horizontalAdvance(value) + 6, fm.height());
      if (part == 1) p.fillRect(label, fill);  // the hatch would cross the figures
      p.setPen(textOn(fill));
      p.drawText(label, Qt::AlignCenter, value);
    }
    y -= h;
  }
  p.setPen(s.text);
  p.setFont(withSize(s.font, 1.0, true));
  p.drawText(QRectF(slot.left(), y - fm.height() - 2, slot.width(), fm.height()),
             Qt::AlignHCenter | Qt::AlignBottom, qs(timeLabel(b.stepUs)));
  p.setFont(s.font);
  const QRectF under(slot.left() + 2, plot.bottom() + 3, slot.width() - 4, fm.height());
  p.drawText(under, Qt::AlignHCenter | Qt::AlignTop,
             fm.elidedText(qs(b.label), Qt::ElideRight, under.width()));
}

// The lanes' names left of the plot: "rank 0 compute" and "comm" where a lane is tall enough,
// else "rank 0" per rank (every few ranks where even that is too tall).
void drawLaneLabels(QPainter& p, const QRectF& plot, double left, double labelW,
                    const TrainTimelineData& d, const FigureStyle& s) {
  const QFontMetricsF fm(s.font);
  const double laneH = plot.height() / static_cast<double>(d.lanes.size());
  const double rankH = laneH * 2;
  const int labelEvery = std::max(1, static_cast<int>(std::ceil(fm.height() / rankH)));
  p.setFont(s.font);
  for (int rank = 0; rank < d.nranks; ++rank) {
    const double y = plot.top() + rank * rankH;
    if (rank % 2 == 1) p.fillRect(QRectF(plot.left(), y, plot.width(), rankH), s.grid.lighter(108));
    p.fillRect(QRectF(left + 2, y + 1, 5, rankH - 2), rankColor(rank, d.nranks));
    if (rank % labelEvery != 0) continue;
    p.setPen(s.text);
    if (laneH >= fm.height() * 0.9) {
      p.drawText(QRectF(left + 10, y, labelW - 14, laneH), Qt::AlignRight | Qt::AlignVCenter,
                 QStringLiteral("rank %1 compute").arg(rank));
      p.drawText(QRectF(left + 10, y + laneH, labelW - 14, laneH),
                 Qt::AlignRight | Qt::AlignVCenter, QStringLiteral("comm"));
    } else {
      p.drawText(QRectF(left + 10, y, labelW - 14, rankH), Qt::AlignRight | Qt::AlignVCenter,
                 QStringLiteral("rank %1").arg(rank));
    }
  }
}

void drawSpans(QPainter& p, const QRectF& plot, const TrainTimelineData& d, const FigureStyle& s) {
  const QFontMetricsF fm(s.font);
  const double laneH = plot.height() / static_cast<double>(d.lanes.size());
  const double scale = plot.width() / d.endUs;
  p.setFont(s.font);
  for (const TrainLaneSpan& b : d.spans) {
    const QRectF box(plot.left() + b.startUs * scale, plot.top() + b.lane * laneH + laneH * 0.1,
                     std::max((b.endUs - b.startUs) * scale, 0.8), laneH * 0.8);
    const QColor fill = trainSpanColor(b.kind);
    p.fillRect(box, fill);
    // A hairline between neighbouring spans of one lane, so that layers stay apart.
    p.setPen(QPen(s.background, 1));
    p.drawLine(box.topLeft(), box.bottomLeft());
    const QString label = qs(b.label);
    if (box.width() >= fm.horizontalAdvance(label) + 6 && box.height() >= fm.height() * 0.8) {
      p.setPen(textOn(fill));
      p.drawText(box, Qt::AlignCenter, label);
    }
  }
  p.setPen(QPen(s.text, 1.5));
  const double rankH = laneH * 2;
  for (int rank = 0; rank < d.nranks; ++rank) {
    const double end = d.stepEndUs[static_cast<size_t>(rank)];
    if (end <= 0) continue;
    const double x = plot.left() + end * scale;
    p.drawLine(QPointF(x, plot.top() + rank * rankH + 1),
               QPointF(x, plot.top() + (rank + 1) * rankH - 1));
  }
}

}  // namespace

QColor trainSpanColor(TrainSpan::Kind k) {
  switch (k) {
    case TrainSpan::Kind::Forward: return QColor(0x77, 0xAA, 0xDD);
    case TrainSpan::Kind::Backward: return QColor(0x33, 0x66, 0x99);
    case TrainSpan::Kind::Optimizer: return QColor(0x99, 0x99, 0x33);
    case TrainSpan::Kind::Reduce:
    case TrainSpan::Kind::Push: return QColor(0xEE, 0x77, 0x33);
    case TrainSpan::Kind::Pull: return QColor(0xCC, 0x33, 0x11);
  }
  return Qt::gray;
}

QColor computeAloneColor() { return trainSpanColor(TrainSpan::Kind::Backward); }
QColor hiddenCommColor() { return trainSpanColor(TrainSpan::Kind::Reduce); }
QColor exposedCommColor() { return QColor(0xCC, 0x33, 0x11); }

void paintStepSplit(QPainter& p, const QRectF& r, const StepSplitData& d, const FigureStyle& s) {
  p.save();
  p.fillRect(r, s.background);
  QRectF body = note(p, heading(p, r, d.title, d.subtitle, s), d.note, s);
  const QFontMetricsF fm(s.font);
  drawLegend(
      p, QRectF(body.left(), body.bottom() - fm.height(), body.width(), fm.height()),
      {{computeAloneColor(), QStringLiteral("compute")},
       {hiddenCommColor(), QStringLiteral("communication hidden by compute"), Swatch::Hidden},
       {exposedCommColor(), QStringLiteral("exposed communication")}},
      s);
  const double left = labelsWidth(d.y, s) + 4;
  const QRectF plot(body.left() + left, body.top() + fm.height() + 4, body.width() - left - 16,
                    body.height() - fm.height() * 3.5 - 12);
  if (d.bars.empty() || plot.height() <= 10 || plot.width() <= 10) {
    p.restore();
    return;
  }
  drawValueAxis(p, plot, d.y, s);
  const double slot = plot.width() / static_cast<double>(d.bars.size());
  for (size_t i = 0; i < d.bars.size(); ++i) {
    const QRectF place(plot.left() + slot * static_cast<double>(i), plot.top(), slot,
                       plot.height());
    drawSplitBar(p, place, plot, d.bars[i], d.y.max, s);
  }
  p.restore();
}

void paintTrainTimeline(QPainter& p, const QRectF& r, const TrainTimelineData& d,
                        const FigureStyle& s) {
  p.save();
  p.fillRect(r, s.background);
  QRectF body = note(p, heading(p, r, d.title, d.subtitle, s), d.note, s);
  const QFontMetricsF fm(s.font);
  using K = TrainSpan::Kind;
  std::vector<Swatch> legend = {{trainSpanColor(K::Forward), QStringLiteral("forward")},
                                {trainSpanColor(K::Backward), QStringLiteral("backward")},
                                {trainSpanColor(K::Optimizer), QStringLiteral("optimizer")}};
  if (d.psAsync) {
    legend.push_back({trainSpanColor(K::Push), QStringLiteral("push")});
    legend.push_back({trainSpanColor(K::Pull), QStringLiteral("pull")});
  } else {
    legend.push_back({trainSpanColor(K::Reduce), QStringLiteral("bucket collective")});
  }
  legend.push_back({s.text, QStringLiteral("step end"), Swatch::Line});
  drawLegend(p, QRectF(body.left(), body.bottom() - fm.height(), body.width(), fm.height()), legend,
             s);
  const double labelW = fm.horizontalAdvance(QStringLiteral("rank 00 compute")) + 16;
  const QRectF plot(body.left() + labelW, body.top(), body.width() - labelW - 16,
                    body.height() - fm.height() * 3.5 - 16);
  if (d.nranks <= 0 || d.endUs <= 0 || plot.height() <= 0 || plot.width() <= 0) {
    if (s.compact && !d.note.empty() && d.spans.empty()) {
      p.setPen(s.muted);
      p.drawText(body, Qt::AlignCenter | Qt::TextWordWrap, qs(d.note));
    }
    p.restore();
    return;
  }
  drawTimeAxis(p, plot, d.endUs, s, QStringLiteral("time from each rank's start of the step"));
  drawLaneLabels(p, plot, body.left(), labelW, d, s);
  drawSpans(p, plot, d, s);
  p.setPen(QPen(s.muted, 1));
  p.setBrush(Qt::NoBrush);
  p.drawRect(plot);
  p.restore();
}

void paintChartMessage(QPainter& p, const QRectF& r, const std::string& title,
                       const std::string& subtitle, const std::string& message,
                       const FigureStyle& s) {
  p.save();
  p.fillRect(r, s.background);
  const QRectF body = heading(p, r, title, subtitle, s);
  p.setPen(QPen(s.grid, 1, Qt::DashLine));
  p.setBrush(Qt::NoBrush);
  const QRectF frame = body.adjusted(16, 8, -16, -16);
  p.drawRect(frame);
  p.setFont(withSize(s.font, 1.1));
  p.setPen(s.text);
  p.drawText(frame.adjusted(12, 12, -12, -12), Qt::AlignCenter | Qt::TextWordWrap, qs(message));
  p.restore();
}

}  // namespace arl::ui
