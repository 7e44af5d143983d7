#include "charts/chart_render.h"

#include <QChart>
#include <QChartView>
#include <QCoreApplication>
#include <QPainter>
#include <QResizeEvent>
#include <memory>

namespace arl::ui {
namespace {

void renderXY(const XYChartData& d, QPainter& p, const QRectF& target, const FigureStyle& style) {
  XYChartAdapter adapter(style);
  adapter.update(d);
  std::unique_ptr<QChartView> view(makeChartView(adapter, nullptr));
  view->setAttribute(Qt::WA_DontShowOnScreen);
  view->setFrameShape(QFrame::NoFrame);
  view->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  view->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  view->resize(target.size().toSize());
  // The chart lays itself out on the view's resize and on posted layout requests.
  view->show();
  QCoreApplication::sendPostedEvents();
  view->render(&p, target, view->viewport()->rect(), Qt::KeepAspectRatio);
}

}  // namespace

void renderChart(const SessionCharts& charts, ChartKind k, QPainter& p, const QRectF& target,
                 const FigureStyle& style) {
  p.setRenderHint(QPainter::Antialiasing);
  p.setRenderHint(QPainter::TextAntialiasing);
  if (const XYChartData* d = charts.xy(k)) {
    renderXY(*d, p, target, style);
  } else if (k == ChartKind::StepTimeline) {
    paintTimeline(p, target, charts.timeline, style);
  } else {
    paintHeatMap(p, target, charts.heatMap, style);
  }
}

FigureWidget::FigureWidget(Paint paint, QWidget* parent) : QWidget(parent), paint_(std::move(paint)) {
  setMinimumSize(320, 240);
}

void FigureWidget::setPaint(Paint paint) {
  paint_ = std::move(paint);
  update();
}

void FigureWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  if (paint_) paint_(p, QRectF(rect()), FigureStyle::fromWidget(this));
}

}  // namespace arl::ui
