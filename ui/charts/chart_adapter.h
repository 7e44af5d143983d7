// The thin layer between the charts' plain data (chart_data.h) and Qt: XY charts become Qt
// Charts objects (deprecated upstream for Qt Graphs; nothing else includes Qt Charts), the
// timeline and the heat map are painted with QPainter. The same code draws on screen and into
// exports, so an export shows what the window shows.
#pragma once

#include <QColor>
#include <QFont>
#include <QRectF>
#include <QString>
#include <map>
#include <memory>
#include <string>

#include "charts/chart_data.h"

class QChart;
class QChartView;
class QCategoryAxis;
class QXYSeries;
class QAreaSeries;
class QPainter;
class QWidget;

namespace arl::ui {

// How a figure is drawn: the window's palette on screen, white paper in exports.
struct FigureStyle {
  QColor background = Qt::white;
  QColor text = QColor(0x20, 0x20, 0x20);
  QColor muted = QColor(0x60, 0x60, 0x60);
  QColor grid = QColor(0xDD, 0xDD, 0xDD);
  QFont font;  // labels; titles are drawn larger and bold
  bool dark = false;
  // The window's charts: the tab names the chart, so its title gives way to the subtitle;
  // axes take their short titles; the legend goes to the right, leaving the plot its height.
  bool compact = false;

  static FigureStyle paper();                     // exports: white, dark text
  static FigureStyle fromWidget(const QWidget*);  // the widget's palette (light or dark)
};

// The colour of a series (its algorithm's, or its place on a sequential ramp).
QColor seriesColor(const SeriesColor& c);
// A sequential ramp from dark blue-violet (0) to yellow-green (1), readable on white.
QColor rampColor(double t);

// One XY chart: creates its series on first sight of a key and afterwards replaces their
// points (QXYSeries::replace), so a live chart is redrawn without being rebuilt.
class XYChartAdapter {
 public:
  explicit XYChartAdapter(const FigureStyle& style);
  ~XYChartAdapter();
  XYChartAdapter(const XYChartAdapter&) = delete;
  XYChartAdapter& operator=(const XYChartAdapter&) = delete;

  // The chart; a QChartView that shows it takes ownership (see takeChart()).
  QChart* chart() const { return chart_; }
  void update(const XYChartData& data);
  void setStyle(const FigureStyle& style);
  // Series in the chart, by key (the band's edges under the band's key).
  int seriesCount() const;

 private:
  void updateAxes(const XYChartData& data);
  QXYSeries* seriesFor(const ChartSeries& s);
  void updateBand(const ChartSeries& s);

  FigureStyle style_;
  QChart* chart_;
  std::unique_ptr<QChart> owned_;  // until a view takes it
  QCategoryAxis* x_;
  QCategoryAxis* y_;
  QString yTitle_;  // the y axis's full title (tooltips read it)
  QString xTitle_;  // the x axis's title as shown, for an x that is not a size
  bool xLog2Bytes_ = true;
  struct Entry {
    QXYSeries* series = nullptr;
    SeriesStyle style = SeriesStyle::Measured;
    SeriesColor color;
  };
  void applySeriesStyle(const Entry& e);
  std::map<std::string, Entry> series_;
  struct Band {
    QXYSeries* low = nullptr;
    QXYSeries* high = nullptr;
    QAreaSeries* area = nullptr;
    QString name;
  };
  std::map<std::string, Band> bands_;
  friend QChartView* makeChartView(XYChartAdapter& adapter, QWidget* parent);
};

// A view of the adapter's chart (antialiased, owning the chart).
QChartView* makeChartView(XYChartAdapter& adapter, QWidget* parent);

// The chart's title and subtitle as the rich text a QChart title takes.
QString chartTitleHtml(const std::string& title, const std::string& subtitle,
                       const FigureStyle& style);

// Paint the per-step timeline or the heat map (title, subtitle, axes, legend) into `r`.
void paintTimeline(QPainter& p, const QRectF& r, const TimelineData& d, const FigureStyle& s);
void paintHeatMap(QPainter& p, const QRectF& r, const HeatMapData& d, const FigureStyle& s);

}  // namespace arl::ui
