#include "charts/chart_render.h"

#include <QChart>
#include <QChartView>
#include <QCoreApplication>
#include <QPainter>
#include <memory>

#include "charts/paint_util.h"

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
  // A hidden view defers its resize (and its viewport's): shown off screen, it lays out the
  // viewport and the chart, which finishes on the layout requests it posts.
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
    // The note (what is measured, what is modelled) under the chart, as the window shows it.
    const QRectF chartArea = drawNote(p, target, d->note, style);
    renderXY(*d, p, QRectF(target.topLeft(), QSizeF(target.width(), chartArea.height())), style);
  } else if (k == ChartKind::StepTimeline) {
    paintTimeline(p, target, charts.timeline, style);
  } else {
    paintHeatMap(p, target, charts.heatMap, style);
  }
}

FigureWidget::FigureWidget(Paint paint, QWidget* parent)
    : QWidget(parent), paint_(std::move(paint)) {
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
