#include "charts/chart_adapter.h"

#include <QApplication>
#include <QAreaSeries>
#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QImage>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QPainter>
#include <QPalette>
#include <QScatterSeries>
#include <QToolTip>
#include <array>
#include <cmath>

#include "style/palette.h"

namespace arl::ui {
namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

QList<QPointF> toQt(const std::vector<ChartPoint>& pts) {
  QList<QPointF> out;
  out.reserve(static_cast<qsizetype>(pts.size()));
  for (const ChartPoint& p : pts) out.append(QPointF(p.x, p.y));
  return out;
}

QFont scaled(const QFont& f, double factor, bool bold = false) {
  QFont g = f;
  g.setPointSizeF(f.pointSizeF() * factor);
  g.setBold(bold);
  return g;
}

void replaceTicks(QCategoryAxis* axis, const ChartAxis& a, bool compact) {
  for (const QString& label : axis->categoriesLabels()) axis->remove(label);
  axis->setStartValue(a.min);
  axis->setRange(a.min, a.max);
  for (const AxisTick& t : a.ticks) {
    if (t.value < a.min - 1e-9 || t.value > a.max + 1e-9) continue;
    axis->append(qs(t.label), t.value);
  }
  axis->setTitleText(qs(compact && !a.screenTitle.empty() ? a.screenTitle : a.title));
}

// The text a point's tooltip shows: its x (a size where x is log2 bytes, else the axis's
// title and the value) and its value.
QString pointText(const QString& series, const QPointF& p, const QString& xTitle, bool log2Bytes,
                  const QString& yTitle, bool logY) {
  const QString x = log2Bytes ? qs(sizeLabel(std::exp2(p.x())))
                              : xTitle + QLatin1Char(' ') + qs(plainNumber(p.x(), 0.001));
  const QString y =
      logY ? qs(timeLabel(std::pow(10.0, p.y()))) : QStringLiteral("%1").arg(p.y(), 0, 'f', 3);
  return QStringLiteral("%1\n%2: %3\n%4").arg(series, x, y, yTitle);
}

}  // namespace

FigureStyle FigureStyle::paper() {
  FigureStyle s;
  s.font = QApplication::font();
  s.font.setPointSizeF(10);
  return s;
}

FigureStyle FigureStyle::fromWidget(const QWidget* w) {
  FigureStyle s = paper();
  if (w == nullptr) return s;
  const QPalette& pal = w->palette();
  s.background = pal.color(QPalette::Base);
  s.text = pal.color(QPalette::Text);
  s.dark = s.background.lightnessF() < 0.5;
  s.muted = s.dark ? s.text.darker(140) : s.text.lighter(180);
  s.grid = s.dark ? s.background.lighter(180) : s.background.darker(115);
  s.font = w->font();
  s.compact = true;
  return s;
}

QColor rampColor(double t) {
  // Samples of matplotlib's "viridis" from 0 to 0.85 (its last yellows are too pale on white).
  static const std::array<QColor, 5> stops = {QColor(68, 1, 84), QColor(59, 82, 139),
                                              QColor(33, 145, 140), QColor(53, 183, 121),
                                              QColor(144, 215, 67)};
  t = std::clamp(t, 0.0, 1.0) * static_cast<double>(stops.size() - 1);
  const size_t i = std::min(static_cast<size_t>(t), stops.size() - 2);
  const double f = t - static_cast<double>(i);
  const QColor& a = stops[i];
  const QColor& b = stops[i + 1];
  return QColor::fromRgbF(static_cast<float>(a.redF() + (b.redF() - a.redF()) * f),
                          static_cast<float>(a.greenF() + (b.greenF() - a.greenF()) * f),
                          static_cast<float>(a.blueF() + (b.blueF() - a.blueF()) * f));
}

QColor seriesColor(const SeriesColor& c) {
  if (!c.algorithm.empty() && c.count <= 1) {
    const QColor base = algorithmColor(qs(c.algorithm));
    if (c.variants <= 1) return base;
    const double t = static_cast<double>(c.variant) / static_cast<double>(c.variants - 1);
    return QColor::fromHslF(base.hslHueF(), base.hslSaturationF(),
                            static_cast<float>(0.25 + 0.4 * t));
  }
  if (c.count <= 1) return rampColor(0.2);
  return rampColor(static_cast<double>(c.index) / static_cast<double>(c.count - 1));
}

QString chartTitleHtml(const std::string& title, const std::string& subtitle,
                       const FigureStyle& style) {
  QString html = QStringLiteral("<p align=\"center\"><b>%1</b>").arg(qs(title).toHtmlEscaped());
  if (!subtitle.empty()) {
    html += QStringLiteral("<br/><span style=\"font-size:small; color:%1\">%2</span>")
                .arg(style.muted.name(), qs(subtitle).toHtmlEscaped());
  }
  return html + QStringLiteral("</p>");
}

XYChartAdapter::XYChartAdapter(const FigureStyle& style)
    : style_(style),
      chart_(new QChart),
      owned_(chart_),
      x_(new QCategoryAxis),
      y_(new QCategoryAxis) {
  chart_->setAnimationOptions(QChart::NoAnimation);
  chart_->addAxis(x_, Qt::AlignBottom);
  chart_->addAxis(y_, Qt::AlignLeft);
  for (QCategoryAxis* a : {x_, y_}) {
    a->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
  }
  chart_->legend()->setAlignment(style.compact ? Qt::AlignRight : Qt::AlignBottom);
  // Line markers in the legend, so a dashed prediction reads as dashed there too.
  chart_->legend()->setMarkerShape(QLegend::MarkerShapeFromSeries);
  chart_->setMargins(style.compact ? QMargins(4, 2, 8, 2) : QMargins(8, 8, 16, 8));
  setStyle(style);
}

XYChartAdapter::~XYChartAdapter() = default;

void XYChartAdapter::setStyle(const FigureStyle& style) {
  style_ = style;
  chart_->setTheme(style.dark ? QChart::ChartThemeDark : QChart::ChartThemeLight);
  chart_->setBackgroundBrush(style.background);
  chart_->setBackgroundRoundness(0);
  chart_->setPlotAreaBackgroundVisible(false);
  chart_->setTitleFont(style.compact ? style.font : scaled(style.font, 1.3));
  chart_->setTitleBrush(style.text);
  chart_->legend()->setFont(style.font);
  chart_->legend()->setLabelColor(style.text);
  for (QCategoryAxis* a : {x_, y_}) {
    a->setLabelsFont(style.font);
    a->setLabelsColor(style.text);
    a->setTitleFont(scaled(style.font, 1.05, true));
    a->setTitleBrush(style.text);
    a->setGridLineColor(style.grid);
    a->setLinePenColor(style.muted);
  }
  // The theme resets the series' colours: restore them.
  for (auto& [key, e] : series_) applySeriesStyle(e);
}

void XYChartAdapter::applySeriesStyle(const Entry& e) {
  const QColor colour = seriesColor(e.color);
  if (auto* scatter = qobject_cast<QScatterSeries*>(e.series)) {
    scatter->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    scatter->setMarkerSize(7);
    scatter->setBorderColor(colour.darker(130));
    scatter->setColor(colour);
    return;
  }
  QPen pen(colour, e.style == SeriesStyle::Predicted ? 2.0 : 2.5);
  if (e.style == SeriesStyle::Predicted) pen.setStyle(Qt::DashLine);
  e.series->setPen(pen);
  e.series->setPointsVisible(e.style == SeriesStyle::Measured);
}

int XYChartAdapter::seriesCount() const { return static_cast<int>(chart_->series().size()); }

void XYChartAdapter::updateAxes(const XYChartData& d) {
  chart_->setTitle(style_.compact ? QStringLiteral("<span style=\"color:%1\">%2</span>")
                                        .arg(style_.muted.name(), qs(d.subtitle).toHtmlEscaped())
                                  : chartTitleHtml(d.title, d.subtitle, style_));
  replaceTicks(x_, d.x, style_.compact);
  replaceTicks(y_, d.y, style_.compact);
  yTitle_ = qs(d.y.title);
  xTitle_ = qs(d.x.screenTitle.empty() ? d.x.title : d.x.screenTitle);
  xLog2Bytes_ = d.x.log2Bytes;
}

QXYSeries* XYChartAdapter::seriesFor(const ChartSeries& s) {
  auto it = series_.find(s.key);
  if (it != series_.end()) return it->second.series;
  QXYSeries* series = nullptr;
  if (s.style == SeriesStyle::Markers) {
    series = new QScatterSeries;
  } else {
    series = new QLineSeries;
  }
  const Entry e{series, s.style, s.color};
  series->setName(qs(s.name));
  chart_->addSeries(series);
  series->attachAxis(x_);
  series->attachAxis(y_);
  applySeriesStyle(e);
  if (!s.inLegend) {
    for (QLegendMarker* m : chart_->legend()->markers(series)) m->setVisible(false);
  }
  const QString yTitle = yTitle_;
  const bool logY = yTitle.contains(QStringLiteral("log"));
  QObject::connect(
      series, &QXYSeries::hovered, series,
      [series, yTitle, logY, xTitle = xTitle_, log2Bytes = xLog2Bytes_](const QPointF& p, bool on) {
        if (!on) return QToolTip::hideText();
        QToolTip::showText(QCursor::pos(),
                           pointText(series->name(), p, xTitle, log2Bytes, yTitle, logY));
      });
  series_.emplace(s.key, e);
  return series;
}

void XYChartAdapter::updateBand(const ChartSeries& s) {
  Band& b = bands_[s.band];
  QXYSeries*& edge = s.style == SeriesStyle::BandLow ? b.low : b.high;
  if (edge == nullptr) edge = new QLineSeries(chart_);
  edge->replace(toQt(s.points));
  if (b.area == nullptr && b.low != nullptr && b.high != nullptr) {
    b.area = new QAreaSeries(static_cast<QLineSeries*>(b.high), static_cast<QLineSeries*>(b.low));
    QColor fill = seriesColor(s.color);
    fill.setAlphaF(0.22F);
    b.area->setBrush(fill);
    b.area->setPen(Qt::NoPen);
    chart_->addSeries(b.area);
    b.area->attachAxis(x_);
    b.area->attachAxis(y_);
  }
  if (s.style == SeriesStyle::BandLow) b.name = qs(s.name);
  if (b.area != nullptr) b.area->setName(b.name);
}

namespace {

constexpr int kRingMarker = 16;

// A ring in `colour`: the marker of a one-point prediction, around the measured point (which it
// leaves visible) instead of over it.
QImage ringMarker(const QColor& colour) {
  QImage img(kRingMarker * 2, kRingMarker * 2, QImage::Format_ARGB32_Premultiplied);
  img.setDevicePixelRatio(2);
  img.fill(Qt::transparent);
  QPainter p(&img);
  p.setRenderHint(QPainter::Antialiasing);
  p.setPen(QPen(colour, 2.0, Qt::DashLine));
  p.setBrush(Qt::NoBrush);
  p.drawEllipse(QRectF(1.5, 1.5, kRingMarker - 3, kRingMarker - 3));
  return img;
}

}  // namespace

void XYChartAdapter::update(const XYChartData& d) {
  updateAxes(d);
  for (const ChartSeries& s : d.series) {
    if (s.style == SeriesStyle::BandLow || s.style == SeriesStyle::BandHigh) {
      updateBand(s);
      continue;
    }
    QXYSeries* series = seriesFor(s);
    series->replace(toQt(s.points));
    // A prediction of one size has no line to dash: it is drawn as a marker instead.
    if (s.style == SeriesStyle::Predicted) {
      const bool one = s.points.size() == 1;
      series->setPointsVisible(one);
      series->setLightMarker(one ? ringMarker(seriesColor(s.color)) : QImage());
      series->setMarkerSize(one ? kRingMarker : 5);
    }
  }
}

QChartView* makeChartView(XYChartAdapter& adapter, QWidget* parent) {
  auto* view = new QChartView(adapter.owned_.release(), parent);
  view->setRenderHint(QPainter::Antialiasing);
  return view;
}

}  // namespace arl::ui
