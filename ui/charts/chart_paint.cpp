// The per-step timeline and the link heat map, painted with QPainter (Qt Charts has neither
// lanes of bars nor a matrix): on screen by their widgets, into exports by chart_render.
#include <QFontMetricsF>
#include <QLinearGradient>
#include <QPainter>
#include <algorithm>
#include <cmath>
#include <vector>

#include "charts/chart_adapter.h"
#include "charts/paint_util.h"
#include "style/palette.h"

namespace arl::ui {
namespace {

// Compute in greys tinted by the rank's hue, communication in the rank's colour: the two
// kinds of work read apart at a glance, and each rank stays its colour.
QColor laneColor(Activity a, int rank, int nranks) {
  const QColor c = rankColor(rank, nranks);
  switch (a) {
    case Activity::Forward: return QColor::fromHslF(c.hslHueF(), 0.18F, 0.66F);
    case Activity::Backward: return QColor::fromHslF(c.hslHueF(), 0.18F, 0.42F);
    case Activity::Optimizer: return QColor::fromHslF(c.hslHueF(), 0.18F, 0.2F);
    case Activity::Send:
    case Activity::NcclKernel: return c;
    case Activity::Recv:
    case Activity::NcclSend:
    case Activity::NcclRecv: return QColor::fromHslF(c.hslHueF(), c.hslSaturationF() * 0.7F, 0.82F);
    default: return c.darker(160);
  }
}

}  // namespace

void drawTimeAxis(QPainter& p, const QRectF& plot, double endUs, const FigureStyle& s,
                  const QString& caption) {
  p.setFont(s.font);
  const QFontMetricsF fm(s.font);
  // About one tick per 90 pixels, so that labels such as "12.5 ms" never touch.
  const int n = std::clamp(static_cast<int>(plot.width() / 90), 2, 10);
  for (const AxisTick& t : timeTicks(endUs, n)) {
    const double x = plot.left() + plot.width() * t.value / endUs;
    p.setPen(QPen(s.grid, 1));
    p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    p.setPen(s.text);
    p.drawText(QRectF(x - 45, plot.bottom() + 3, 90, fm.height()), Qt::AlignHCenter, qs(t.label));
  }
  p.setFont(withSize(s.font, 1.05, true));
  p.drawText(QRectF(plot.left(), plot.bottom() + fm.height() + 4, plot.width(), fm.height() + 4),
             Qt::AlignHCenter, caption);
}

namespace {

using LegendItem = std::pair<Activity, const char*>;

std::vector<LegendItem> legendItems(const TimelineData& d) {
  if (d.nccl) {
    return {{Activity::NcclColl, "NCCL collective (host start to last kernel end)"},
            {Activity::NcclKernel, "NCCL kernel channel"},
            {Activity::NcclSend, "NCCL proxy step"}};
  }
  std::vector<LegendItem> items;
  if (d.training) {
    items = {{Activity::Forward, "forward"},
             {Activity::Backward, "backward"},
             {Activity::Optimizer, "optimizer"}};
  }
  items.insert(items.end(), {{Activity::Send, "send"},
                             {Activity::Recv, "receive (waiting for data)"},
                             {Activity::Reduce, "reduce"}});
  return items;
}

// Amber, translucent: seen over the bars on light and dark backgrounds alike.
QColor overlapColor() { return QColor(0xF2, 0xA9, 0x00, 70); }

void drawTimelineLegend(QPainter& p, const QRectF& r, const FigureStyle& s, const TimelineData& d) {
  p.setFont(s.font);
  const QFontMetricsF fm(s.font);
  const std::vector<LegendItem> items = legendItems(d);
  double width = 0;
  for (const auto& item : items) width += 26 + fm.horizontalAdvance(QString::fromUtf8(item.second));
  double x = r.left() + std::max(0.0, (r.width() - width) / 2 - 40);
  const double y = r.top();
  for (const auto& [a, name] : items) {
    p.fillRect(QRectF(x, y + 3, 14, fm.height() - 6), laneColor(a, 0, d.nranks));
    p.setPen(s.text);
    p.drawText(QPointF(x + 18, y + fm.ascent()), QString::fromUtf8(name));
    x += 26 + fm.horizontalAdvance(QString::fromUtf8(name));
  }
  if (d.training) {
    p.fillRect(QRectF(x, y + 1, 14, fm.height() - 2), overlapColor());
    p.setPen(s.text);
    p.drawText(QPointF(x + 18, y + fm.ascent()), QStringLiteral("overlap"));
    return;
  }
  if (d.nccl) return;  // NCCL's runs have no steps of the lab's
  p.setPen(QPen(s.text, 1.5));
  p.drawLine(QPointF(x, y + 2), QPointF(x, y + fm.height() - 2));
  p.drawText(QPointF(x + 6, y + fm.ascent()), QStringLiteral("step end"));
}

// Each rank's lane names, or its number alone where the lanes are too thin for text.
void drawLaneLabels(QPainter& p, const QRectF& body, const QRectF& plot, double labelW,
                    const TimelineData& d, const FigureStyle& s) {
  const QFontMetricsF fm(s.font);
  const auto perRank = static_cast<int>(d.laneNames.size());
  const double laneH = plot.height() / static_cast<double>(d.lanes.size());
  const double rankH = laneH * perRank;
  const int labelEvery = std::max(1, static_cast<int>(std::ceil(fm.height() / rankH)));
  p.setFont(s.font);
  for (int rank = 0; rank < d.nranks; ++rank) {
    const double y = plot.top() + rank * rankH;
    if (rank % 2 == 1) p.fillRect(QRectF(plot.left(), y, plot.width(), rankH), s.grid.lighter(108));
    p.fillRect(QRectF(body.left() + 2, y + 1, 5, rankH - 2), rankColor(rank, d.nranks));
    if (rank % labelEvery != 0) continue;
    p.setPen(s.text);
    if (laneH >= fm.height() * 0.9) {
      for (int l = 0; l < perRank; ++l) {
        const QString name = qs(d.laneNames[static_cast<size_t>(l)]);
        p.drawText(QRectF(body.left() + 10, y + l * laneH, labelW - 14, laneH),
                   Qt::AlignRight | Qt::AlignVCenter,
                   l == 0 ? QStringLiteral("rank %1 %2").arg(rank).arg(name) : name);
      }
    } else {
      p.drawText(QRectF(body.left() + 10, y, labelW - 14, rankH), Qt::AlignRight | Qt::AlignVCenter,
                 QStringLiteral("rank %1").arg(rank));
    }
  }
}

}  // namespace

void paintTimeline(QPainter& p, const QRectF& r, const TimelineData& d, const FigureStyle& s) {
  p.save();
  p.fillRect(r, s.background);
  QRectF body = drawHeading(p, r, d.title, d.subtitle, s);
  body = drawNote(p, body, d.note, s);
  const QFontMetricsF fm(s.font);
  const QRectF legend(body.left(), body.bottom() - fm.height(), body.width(), fm.height());
  drawTimelineLegend(p, legend, s, d);
  const double labelW = fm.horizontalAdvance(d.nccl ? QStringLiteral("rank 00 NCCL kernel")
                                                    : QStringLiteral("rank 00 compute")) +
                        16;
  const QRectF plot(body.left() + labelW, body.top(), body.width() - labelW - 24,
                    body.height() - fm.height() * 3.5 - 16);
  if (d.nranks <= 0 || d.endUs <= 0 || plot.height() <= 0 || d.laneNames.empty()) {
    p.restore();
    return;
  }
  drawTimeAxis(p, plot, d.endUs, s,
               d.training ? QStringLiteral("time from the training step's first event")
                          : QStringLiteral("time from the iteration's start"));
  drawLaneLabels(p, body, plot, labelW, d, s);
  const double laneH = plot.height() / static_cast<double>(d.lanes.size());
  const double rankH = laneH * static_cast<double>(d.laneNames.size());
  const double scale = plot.width() / d.endUs;
  p.setPen(Qt::NoPen);
  for (const TimelineBar& b : d.bars) {
    const double x0 = plot.left() + b.startUs * scale;
    const double w = std::max((b.endUs - b.startUs) * scale, 0.8);
    const double y = plot.top() + b.lane * laneH + laneH * 0.12;
    p.fillRect(QRectF(x0, y, w, laneH * 0.76), laneColor(b.activity, b.rank, d.nranks));
  }
  for (const OverlapSpan& o : d.overlaps) {
    p.fillRect(QRectF(plot.left() + o.startUs * scale, plot.top() + o.rank * rankH,
                      std::max((o.endUs - o.startUs) * scale, 0.8), rankH),
               overlapColor());
  }
  p.setPen(QPen(s.text, 1.5));
  for (const StepEndMark& m : d.stepEnds) {
    const double x = plot.left() + m.tUs * scale;
    const double y = plot.top() + m.rank * rankH;
    p.drawLine(QPointF(x, y + 1), QPointF(x, y + rankH - 1));
  }
  p.setPen(QPen(s.muted, 1));
  p.setBrush(Qt::NoBrush);
  p.drawRect(plot);
  p.restore();
}

}  // namespace arl::ui
