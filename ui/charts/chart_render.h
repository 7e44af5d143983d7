// Draws one chart of a session onto any QPainter (screen, image, SVG, PDF) in paper style,
// and the widget that shows the painted figures (timeline, heat map) in the window.
#pragma once

#include <QWidget>
#include <functional>

#include "charts/chart_adapter.h"
#include "charts/chart_data.h"

namespace arl::ui {

// Renders chart `k` of `charts` into `target` (logical coordinates of the painter's device,
// which must not be pre-scaled for XY charts: Qt Charts then paints a blank page).
void renderChart(const SessionCharts& charts, ChartKind k, QPainter& p, const QRectF& target,
                 const FigureStyle& style = FigureStyle::paper());

// A widget that paints a figure with a paint function in the widget's own palette.
class FigureWidget : public QWidget {
 public:
  using Paint = std::function<void(QPainter&, const QRectF&, const FigureStyle&)>;
  explicit FigureWidget(Paint paint, QWidget* parent = nullptr);
  void setPaint(Paint paint);

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  Paint paint_;
};

}  // namespace arl::ui
