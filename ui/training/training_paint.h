// The Training view's painted figures (Qt Charts has neither stacked bars with a hidden share
// nor lanes of spans): the step time split, the sample step's timeline, and a chart's place
// that says why it has no plot. On screen (compact style) the view's heading names the figure
// and its caption holds the note; on paper the figure draws both itself.
#pragma once

#include <QColor>
#include <QPainter>
#include <QRectF>
#include <string>

#include "charts/chart_adapter.h"
#include "training/training_charts.h"

namespace arl::ui {

// A span kind's colour, the same in the timeline and the step split: compute in blues (the
// forward pass light, the backward pass dark), the optimizer olive, communication orange
// (ps-async's pull red).
QColor trainSpanColor(TrainSpan::Kind k);
// The step split's parts: compute alone (the backward pass's blue), hidden communication
// (orange, hatched in compute's blue), exposed communication (red).
QColor computeAloneColor();
QColor hiddenCommColor();
QColor exposedCommColor();

void paintStepSplit(QPainter& p, const QRectF& r, const StepSplitData& d, const FigureStyle& s);
void paintTrainTimeline(QPainter& p, const QRectF& r, const TrainTimelineData& d,
                        const FigureStyle& s);
// `message` in the middle of the figure's place, under its heading.
void paintChartMessage(QPainter& p, const QRectF& r, const std::string& title,
                       const std::string& subtitle, const std::string& message,
                       const FigureStyle& s);

}  // namespace arl::ui
