// The link load matrix: senders down, receivers across, each cell coloured by its link's busy
// share on a fixed ramp from idle (0%, dark) to always busy (100%, light), so that a link the
// others wait on is light among dark ones whatever the run's speed. The busiest link gets an
// outline and the headline names it: the figure answers "which link holds the run back".
#include <QLinearGradient>
#include <algorithm>
#include <cmath>

#include "charts/paint_util.h"
#include "style/palette.h"

namespace arl::ui {
namespace {

// The topology view's red for a slow link: the same link is marked alike in both.
const QColor kBottleneck(0xd6, 0x3c, 0x3c);

QString percent(double share) { return qs(percentLabel(share)); }

// Rank labels along one side of the matrix, each with its rank's colour as a swatch.
void drawRankLabels(QPainter& p, const QRectF& m, int n, const QSizeF& cell, bool rows,
                    const FigureStyle& s) {
  const QFontMetricsF fm(s.font);
  const double along = rows ? cell.height() : cell.width();
  const int every = std::max(1, static_cast<int>(std::ceil(fm.height() / along)));
  p.setFont(s.font);
  for (int r = 0; r < n; ++r) {
    const QColor c = rankColor(r, n);
    if (rows) {
      p.fillRect(QRectF(m.left() - 8, m.top() + r * along, 5, along), c);
    } else {
      p.fillRect(QRectF(m.left() + r * along, m.bottom() + 3, along, 5), c);
    }
    if (r % every != 0) continue;
    p.setPen(s.text);
    const QString t = QString::number(r);
    if (rows) {
      p.drawText(QRectF(m.left() - 44, m.top() + r * along, 32, along),
                 Qt::AlignRight | Qt::AlignVCenter, t);
    } else {
      p.drawText(QRectF(m.left() + r * along - 10, m.bottom() + 9, along + 20, fm.height()),
                 Qt::AlignHCenter | Qt::AlignTop, t);
    }
  }
}

void drawColourBar(QPainter& p, const QRectF& bar, const FigureStyle& s) {
  QLinearGradient g(bar.bottomLeft(), bar.topLeft());
  for (int i = 0; i <= 8; ++i) g.setColorAt(i / 8.0, rampColor(i / 8.0));
  p.fillRect(bar, g);
  p.setPen(QPen(s.muted, 1));
  p.drawRect(bar);
  p.setFont(s.font);
  const QFontMetricsF fm(s.font);
  const int steps = bar.height() >= fm.height() * 5 ? 4 : 2;  // labels must not overlap
  for (int i = 0; i <= steps; ++i) {
    const double y = bar.bottom() - bar.height() * i / steps;
    p.setPen(s.text);
    p.drawLine(QPointF(bar.right(), y), QPointF(bar.right() + 4, y));
    p.drawText(QRectF(bar.right() + 6, y - fm.height() / 2, 60, fm.height()),
               Qt::AlignLeft | Qt::AlignVCenter, percent(static_cast<double>(i) / steps));
  }
  const QFont tf = withSize(s.font, 1.05, true);
  QString title = QStringLiteral("link busy (share of time)");
  if (QFontMetricsF(tf).horizontalAdvance(title) > bar.height() + 40)
    title = QStringLiteral("busy");
  p.save();
  p.translate(bar.right() + 12 + fm.horizontalAdvance(QStringLiteral("100%")), bar.center().y());
  p.rotate(-90);
  p.setFont(tf);
  p.drawText(QRectF(-bar.height() / 2 - 20, 0, bar.height() + 40, fm.height() + 4), Qt::AlignCenter,
             title);
  p.restore();
}

// The lines a cell can hold, most important first: the busy share (what the colour says),
// the throughput while busy, the pace against the configured rate.
QStringList cellLines(const LinkLoad& x) {
  QStringList lines{percent(x.busy)};
  if (x.bytesPerSecond <= 0) return lines;  // its messages took no measurable time
  lines << qs(rateLabel(x.bytesPerSecond));
  if (x.configuredBytesPerSecond > 0) lines << QStringLiteral("pace %1").arg(percent(x.pace));
  return lines;
}

const QString kSep = QStringLiteral(" \u00B7 ");

// The first `k` figures on one line, the first in `lead`.
double rowWidth(const QStringList& all, qsizetype k, const QFontMetricsF& lead,
                const QFontMetricsF& fm) {
  return lead.horizontalAdvance(all[0]) +
         (k > 1 ? fm.horizontalAdvance(kSep + all.mid(1, k - 1).join(kSep)) : 0);
}

void drawRow(QPainter& p, const QRectF& c, const QStringList& all, qsizetype k, const QFont& lead,
             const QFont& rest) {
  const QFontMetricsF fl(lead), fm(rest);
  const double x0 = c.center().x() - rowWidth(all, k, fl, fm) / 2;
  p.setFont(lead);
  p.drawText(QRectF(x0, c.top(), c.width(), c.height()), Qt::AlignLeft | Qt::AlignVCenter, all[0]);
  if (k < 2) return;
  p.setFont(rest);
  p.drawText(QRectF(x0 + fl.horizontalAdvance(all[0]), c.top(), c.width(), c.height()),
             Qt::AlignLeft | Qt::AlignVCenter, kSep + all.mid(1, k - 1).join(kSep));
}

void drawStack(QPainter& p, const QRectF& c, const QStringList& all, qsizetype k, const QFont& lead,
               const QFont& rest) {
  const QFontMetricsF fl(lead), fm(rest);
  double y = c.center().y() - (fl.height() + fm.height() * static_cast<double>(k - 1)) / 2;
  p.setFont(lead);
  p.drawText(QRectF(c.left(), y, c.width(), fl.height()), Qt::AlignCenter, all[0]);
  y += fl.height();
  p.setFont(rest);
  for (qsizetype i = 1; i < k; ++i, y += fm.height()) {
    p.drawText(QRectF(c.left(), y, c.width(), fm.height()), Qt::AlignCenter, all[i]);
  }
}

// The cell's figures stacked, or on one line where the cell is wide and low, as many of them
// as fit, the busy share first (bold where the cell is high enough).
void drawCellText(QPainter& p, const QRectF& c, const LinkLoad& x, const QColor& fill,
                  const FigureStyle& s) {
  const QFont bold = withSize(s.font, 1.1, true);
  const QFontMetricsF fm(s.font), fb(bold);
  const QFont lead = fb.height() + 2 <= c.height() ? bold : s.font;
  const QFontMetricsF fl(lead);
  const QStringList all = cellLines(x);
  const auto stackFits = [&](qsizetype k) {
    double w = fl.horizontalAdvance(all[0]);
    for (qsizetype i = 1; i < k; ++i) w = std::max(w, fm.horizontalAdvance(all[i]));
    return w + 6 <= c.width() &&
           fl.height() + fm.height() * static_cast<double>(k - 1) + 4 <= c.height();
  };
  const auto rowFits = [&](qsizetype k) {
    return rowWidth(all, k, fl, fm) + 8 <= c.width() && fl.height() <= c.height();
  };
  qsizetype stacked = all.size(), row = all.size();
  while (stacked > 0 && !stackFits(stacked)) --stacked;
  while (row > 0 && !rowFits(row)) --row;
  if (stacked == 0 && row == 0) return;
  p.setPen(fill.lightnessF() > 0.55 ? Qt::black : Qt::white);
  if (row > stacked) {
    drawRow(p, c, all, row, lead, s.font);
  } else {
    drawStack(p, c, all, stacked, lead, s.font);
  }
}

void drawCells(QPainter& p, const QRectF& m, const QSizeF& cell, const LinkLoads& l,
               const FigureStyle& s) {
  const int n = l.nranks;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      const QRectF c(QPointF(m.left() + b * cell.width(), m.top() + a * cell.height()), cell);
      const LinkLoad& x = l.at(a, b);
      if (x.bytes == 0) {
        p.fillRect(c, s.dark ? s.background.lighter(130) : QColor(0xF2, 0xF2, 0xF2));
        continue;
      }
      const QColor fill = rampColor(x.busy);
      p.fillRect(c, fill);
      drawCellText(p, c, x, fill, s);
    }
  }
}

// The busiest link's outline: solid and thick when it is the bottleneck, dashed when it only
// leads a balanced run.
void markBusiest(QPainter& p, const QRectF& m, const QSizeF& cell, const LinkLoads& l) {
  if (l.busiestSender < 0) return;
  const QRectF c(QPointF(m.left() + l.busiestReceiver * cell.width(),
                         m.top() + l.busiestSender * cell.height()),
                 cell);
  const double w = std::clamp(std::min(cell.width(), cell.height()) * 0.08, 2.0, 4.0);
  p.setBrush(Qt::NoBrush);
  p.setPen(QPen(kBottleneck, w, l.bottleneck ? Qt::SolidLine : Qt::DashLine));
  p.drawRect(c.adjusted(w / 2, w / 2, -w / 2, -w / 2));
}

// The headline above the matrix; returns the height it took.
double drawHeadline(QPainter& p, const QRectF& body, const HeatMapData& d, const FigureStyle& s) {
  if (d.headline.empty()) return 0;
  const QFont f = withSize(s.font, 1.1, d.loads.bottleneck);
  const QFontMetricsF fm(f);
  const QRectF box = fm.boundingRect(QRectF(body.left() + 8, body.top(), body.width() - 16, 1000),
                                     Qt::AlignHCenter | Qt::TextWordWrap, qs(d.headline));
  p.setFont(f);
  p.setPen(d.loads.bottleneck ? kBottleneck : s.text);
  p.drawText(QRectF(body.left() + 8, body.top(), body.width() - 16, box.height()),
             Qt::AlignHCenter | Qt::TextWordWrap, qs(d.headline));
  return box.height() + 6;
}

void drawAxisTitles(QPainter& p, const QRectF& m, const FigureStyle& s) {
  const QFontMetricsF fm(s.font);
  p.setFont(withSize(s.font, 1.05, true));
  p.setPen(s.text);
  p.drawText(QRectF(m.left(), m.bottom() + fm.height() + 12, m.width(), fm.height() + 4),
             Qt::AlignHCenter, QStringLiteral("receiver rank"));
  p.save();
  p.translate(m.left() - 50 - fm.height(), m.center().y());
  p.rotate(-90);
  p.drawText(QRectF(-m.height() / 2, 0, m.height(), fm.height() + 4), Qt::AlignCenter,
             QStringLiteral("sender rank"));
  p.restore();
}

}  // namespace

void paintHeatMap(QPainter& p, const QRectF& r, const HeatMapData& d, const FigureStyle& s) {
  p.save();
  p.fillRect(r, s.background);
  QRectF body = drawHeading(p, r, d.title, d.subtitle, s);
  body = drawNote(p, body, d.note, s);
  body.setTop(body.top() + drawHeadline(p, body, d, s));
  const QFontMetricsF fm(s.font);
  const int n = d.loads.nranks;
  // Room left of the matrix for rank labels and the axis title, right of it for the colour
  // bar, under it for the receivers' labels and title.
  const double width = body.width() - 90 - 130;
  const double height = body.height() - fm.height() * 2 - 24;
  if (n <= 0 || width <= 20 || height <= 20) {
    p.restore();
    return;
  }
  // Cells as high as the room allows and wider where it is wide (a short dock on screen), so
  // that their figures can be written on one line.
  const double cellH = std::min(height / n, width / n);
  const QSizeF cell(std::min(width / n, std::max(cellH, 200.0)), cellH);
  const QSizeF side(cell.width() * n, cell.height() * n);
  const QRectF m(QPointF(body.left() + 90 + (width - side.width()) / 2, body.top() + 4), side);
  drawCells(p, m, cell, d.loads, s);
  p.setPen(QPen(s.muted, 1));
  p.setBrush(Qt::NoBrush);
  p.drawRect(m);
  markBusiest(p, m, cell, d.loads);
  drawRankLabels(p, m, n, cell, true, s);
  drawRankLabels(p, m, n, cell, false, s);
  drawAxisTitles(p, m, s);
  drawColourBar(p, QRectF(m.right() + 30, m.top(), 18, side.height()), s);
  p.restore();
}

}  // namespace arl::ui
