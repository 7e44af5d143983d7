// Drawing helpers shared by the painted figures (timeline, heat map).
#pragma once

#include <QFont>
#include <QFontMetricsF>
#include <QPainter>
#include <QRectF>
#include <string>

#include "charts/chart_adapter.h"

namespace arl::ui {

inline QString qs(const std::string& s) { return QString::fromStdString(s); }

inline QFont withSize(const QFont& f, double factor, bool bold = false) {
  QFont g = f;
  g.setPointSizeF(f.pointSizeF() * factor);
  g.setBold(bold);
  return g;
}

// Draws title and subtitle at the top of `r`; returns what is left below them.
inline QRectF drawHeading(QPainter& p, const QRectF& r, const std::string& title,
                          const std::string& subtitle, const FigureStyle& s) {
  const QFont tf = withSize(s.font, 1.3, true);
  const QFont sf = s.font;
  double y = r.top() + 8;
  p.setFont(tf);
  p.setPen(s.text);
  const double th = QFontMetricsF(tf).height();
  p.drawText(QRectF(r.left(), y, r.width(), th), Qt::AlignHCenter | Qt::AlignVCenter, qs(title));
  y += th + 2;
  if (!subtitle.empty()) {
    p.setFont(sf);
    p.setPen(s.muted);
    const double sh = QFontMetricsF(sf).height();
    p.drawText(QRectF(r.left(), y, r.width(), sh), Qt::AlignHCenter | Qt::AlignVCenter,
               qs(subtitle));
    y += sh;
  }
  return QRectF(r.left(), y + 8, r.width(), r.bottom() - y - 8);
}

// A time axis under `plot` over [0, endUs] (gridlines up through the plot, about one tick per
// 90 pixels labelled "0", "2 ms", ...) with `caption` under the labels.
void drawTimeAxis(QPainter& p, const QRectF& plot, double endUs, const FigureStyle& s,
                  const QString& caption);

// Draws the note at the bottom of `r`; returns what is left above it.
inline QRectF drawNote(QPainter& p, const QRectF& r, const std::string& note,
                       const FigureStyle& s) {
  if (note.empty()) return r;
  const QFont f = withSize(s.font, 0.9);
  const double h = QFontMetricsF(f)
                       .boundingRect(QRectF(0, 0, r.width() - 16, 1000), Qt::TextWordWrap, qs(note))
                       .height() +
                   4;
  p.setFont(f);
  p.setPen(s.muted);
  p.drawText(QRectF(r.left() + 8, r.bottom() - h, r.width() - 16, h),
             Qt::AlignHCenter | Qt::AlignBottom | Qt::TextWordWrap, qs(note));
  return QRectF(r.left(), r.top(), r.width(), r.height() - h - 4);
}

}  // namespace arl::ui
