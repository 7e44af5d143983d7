// The per-link throughput matrix: senders down, receivers across, each cell coloured by its
// link's bytes/s on a sequential ramp from 0 (dark) to the fastest link (light), so a slow
// link is a dark cell among light ones.
#include <QLinearGradient>
#include <algorithm>

#include "charts/paint_util.h"
#include "style/palette.h"

namespace arl::ui {
namespace {

QString gbps(double bytesPerSecond) {
  const double v = bytesPerSecond / 1e9;
  return QString::number(v, 'f', v >= 10 ? 1 : 2);
}

// Rank labels along one side of the matrix, each with its rank's colour as a swatch.
void drawRankLabels(QPainter& p, const QRectF& m, int n, double cell, bool rows,
                    const FigureStyle& s) {
  const QFontMetricsF fm(s.font);
  const int every = std::max(1, static_cast<int>(std::ceil(fm.height() / cell)));
  p.setFont(s.font);
  for (int r = 0; r < n; ++r) {
    const QColor c = rankColor(r, n);
    if (rows) {
      p.fillRect(QRectF(m.left() - 8, m.top() + r * cell, 5, cell), c);
    } else {
      p.fillRect(QRectF(m.left() + r * cell, m.bottom() + 3, cell, 5), c);
    }
    if (r % every != 0) continue;
    p.setPen(s.text);
    const QString t = QString::number(r);
    if (rows) {
      p.drawText(QRectF(m.left() - 44, m.top() + r * cell, 32, cell),
                 Qt::AlignRight | Qt::AlignVCenter, t);
    } else {
      p.drawText(QRectF(m.left() + r * cell - 10, m.bottom() + 9, cell + 20, fm.height()),
                 Qt::AlignHCenter | Qt::AlignTop, t);
    }
  }
}

void drawColourBar(QPainter& p, const QRectF& bar, double maxBps, const FigureStyle& s) {
  QLinearGradient g(bar.bottomLeft(), bar.topLeft());
  for (int i = 0; i <= 8; ++i) g.setColorAt(i / 8.0, rampColor(i / 8.0));
  p.fillRect(bar, g);
  p.setPen(QPen(s.muted, 1));
  p.drawRect(bar);
  p.setFont(s.font);
  const QFontMetricsF fm(s.font);
  const double step = tickStep(maxBps / 1e9, 5);
  for (double v = 0; v <= maxBps / 1e9 + 1e-12; v += step) {
    const double y = bar.bottom() - bar.height() * v * 1e9 / maxBps;
    p.setPen(s.text);
    p.drawLine(QPointF(bar.right(), y), QPointF(bar.right() + 4, y));
    p.drawText(QRectF(bar.right() + 6, y - fm.height() / 2, 60, fm.height()),
               Qt::AlignLeft | Qt::AlignVCenter, QString::number(v, 'g', 3));
  }
  p.save();
  p.translate(bar.right() + 58, bar.center().y());
  p.rotate(-90);
  p.setFont(withSize(s.font, 1.05, true));
  p.drawText(QRectF(-bar.height() / 2, 0, bar.height(), fm.height() + 4), Qt::AlignCenter,
             QStringLiteral("link throughput (GB/s)"));
  p.restore();
}

}  // namespace

void paintHeatMap(QPainter& p, const QRectF& r, const HeatMapData& d, const FigureStyle& s) {
  p.save();
  p.fillRect(r, s.background);
  QRectF body = drawHeading(p, r, d.title, d.subtitle, s);
  body = drawNote(p, body, d.note, s);
  const QFontMetricsF fm(s.font);
  const int n = d.nranks;
  const double side = std::min(body.width() - 190, body.height() - fm.height() * 3 - 20);
  if (n <= 0 || side <= 20) {
    p.restore();
    return;
  }
  const double cell = side / n;
  const QRectF m(body.center().x() - side / 2 - 40, body.top() + fm.height() + 4, side, side);
  const bool values = cell >= fm.horizontalAdvance(QStringLiteral("00.00")) + 6;
  const double maxBps = d.maxBytesPerSecond > 0 ? d.maxBytesPerSecond : 1;
  p.setFont(s.font);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      const QRectF c(m.left() + b * cell, m.top() + a * cell, cell, cell);
      const double v = d.bytesPerSecond[static_cast<size_t>(a * n + b)];
      if (v <= 0) {
        p.fillRect(c, s.dark ? s.background.lighter(130) : QColor(0xF2, 0xF2, 0xF2));
        continue;
      }
      const QColor fill = rampColor(v / maxBps);
      p.fillRect(c, fill);
      if (!values) continue;
      p.setPen(fill.lightnessF() > 0.55 ? Qt::black : Qt::white);
      p.drawText(c, Qt::AlignCenter, gbps(v));
    }
  }
  p.setPen(QPen(s.muted, 1));
  p.setBrush(Qt::NoBrush);
  p.drawRect(m);
  drawRankLabels(p, m, n, cell, true, s);
  drawRankLabels(p, m, n, cell, false, s);
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
  drawColourBar(p, QRectF(m.right() + 40, m.top(), 18, side), maxBps, s);
  p.restore();
}

}  // namespace arl::ui
