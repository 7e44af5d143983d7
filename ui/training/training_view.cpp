#include "training/training_view.h"

#include <QChartView>
#include <QComboBox>
#include <QEvent>
#include <QFileInfo>
#include <QGridLayout>
#include <QLabel>
#include <QScrollArea>
#include <QStackedWidget>
#include <QTabWidget>
#include <QVBoxLayout>

#include "charts/chart_adapter.h"
#include "charts/chart_render.h"
#include "charts/paint_util.h"
#include "training/training_paint.h"

namespace arl::ui {
namespace {

QLabel* captionLabel() {
  auto* l = new QLabel;
  l->setWordWrap(true);
  l->setForegroundRole(QPalette::PlaceholderText);
  l->setContentsMargins(6, 0, 6, 2);
  l->setTextFormat(Qt::PlainText);
  return l;
}

QLabel* placeholderLabel() {
  auto* l = new QLabel(
      QObject::tr("No training record open.\n\nFile → Open training record… shows the JSON that "
                  "allreduce-lab train writes (or: allreduce-lab gui --train-record FILE.json)."));
  l->setAlignment(Qt::AlignCenter);
  l->setWordWrap(true);
  l->setForegroundRole(QPalette::PlaceholderText);
  return l;
}

// The charts' least room: a plot with its axes, legend and a line of subtitle readable.
constexpr int kFigureMinWidth = 300;
constexpr int kFigureMinHeight = 200;

}  // namespace

TrainingView::TrainingView(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  pages_ = new QStackedWidget(this);
  outer->addWidget(pages_);
  pages_->addWidget(placeholderLabel());

  auto* content = new QWidget;
  auto* col = new QVBoxLayout(content);
  col->setContentsMargins(6, 4, 6, 4);
  col->addLayout(buildHeader());
  buildFigures();
  buildCells();
  gridHost_ = new QWidget;
  grid_ = new QGridLayout(gridHost_);
  grid_->setContentsMargins(0, 0, 0, 0);
  grid_->setSpacing(8);
  for (size_t i = 0; i < kCells; ++i) placeInGrid(static_cast<Place>(i));
  for (int c = 0; c < 3; ++c) grid_->setColumnStretch(c, 1);
  col->addWidget(gridHost_, 1);
  tabs_ = new QTabWidget;
  tabs_->setDocumentMode(true);
  // A stack of pages asks for the height its wrapped captions would need at their narrowest:
  // one chart with its caption needs far less, and the scroll area then scrolls for nothing.
  tabs_->setMinimumHeight(kFigureMinHeight + 80);
  tabs_->hide();
  col->addWidget(tabs_, 1);

  auto* scroll = new QScrollArea;
  scroll->setWidget(content);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  pages_->addWidget(scroll);
  pages_->setCurrentIndex(0);
  rebuildXYCharts();
}

// The file and what its runs share, and the box that picks the timeline's run.
QLayout* TrainingView::buildHeader() {
  auto* top = new QHBoxLayout;
  summary_ = new QLabel;
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::PlainText);
  top->addWidget(summary_, 1);
  top->addWidget(new QLabel(tr("Timeline of run:")));
  timelineRunBox_ = new QComboBox;
  timelineRunBox_->setToolTip(tr("The run whose sample step the timeline shows"));
  top->addWidget(timelineRunBox_);
  connect(timelineRunBox_, &QComboBox::activated, this,
          [this](int i) { showTimelineRun(static_cast<size_t>(std::max(i, 0))); });
  return top;
}

// The XY charts' places (their views come with each record) and the painted figures.
void TrainingView::buildFigures() {
  for (size_t i = 0; i < kXYCharts; ++i) {
    auto* holder = new QWidget;
    holders_[i] = new QVBoxLayout(holder);
    holders_[i]->setContentsMargins(0, 0, 0, 0);
    holder->setMinimumSize(kFigureMinWidth, kFigureMinHeight);
  }
  split_ = new FigureWidget([this](QPainter& p, const QRectF& r, const FigureStyle& s) {
    paintStepSplit(p, r, charts_.split, s);
  });
  timeline_ = new FigureWidget([this](QPainter& p, const QRectF& r, const FigureStyle& s) {
    paintTrainTimeline(p, r, charts_.timeline, s);
  });
  sweepMessage_ = new FigureWidget([this](QPainter& p, const QRectF& r, const FigureStyle& s) {
    paintChartMessage(p, r, charts_.sweep.title, charts_.sweep.subtitle, charts_.sweepMessage, s);
  });
  for (FigureWidget* f : {split_, timeline_, sweepMessage_}) {
    f->setMinimumSize(kFigureMinWidth, kFigureMinHeight);
  }
  sweepPages_ = new QStackedWidget;
  sweepPages_->addWidget(holders_[Sweep]->parentWidget());
  sweepPages_->addWidget(sweepMessage_);
}

void TrainingView::buildCells() {
  makeCell(LossCell, tr("Loss against step"), holders_[Loss]->parentWidget(), &captions_[Loss]);
  makeCell(SplitCell, tr("Step time: compute, hidden and exposed communication"), split_,
           &splitCaption_);
  QWidget* spreadCell = makeCell(SpreadCell, tr("Replica spread against step"),
                                 holders_[Spread]->parentWidget(), &captions_[Spread]);
  identical_ = new QLabel;
  identical_->setTextFormat(Qt::PlainText);
  identical_->setWordWrap(true);
  identical_->setContentsMargins(6, 0, 6, 0);
  static_cast<QVBoxLayout*>(spreadCell->layout())->insertWidget(2, identical_);
  makeCell(TimelineCell, tr("Sample step on every rank"), timeline_, &timelineCaption_);
  makeCell(SweepCell, tr("Step time against bucket size"), sweepPages_, &captions_[Sweep]);
}

TrainingView::~TrainingView() = default;

QWidget* TrainingView::makeCell(Place place, const QString& title, QWidget* figure,
                                QLabel** caption) {
  auto* cell = new QWidget;
  auto* v = new QVBoxLayout(cell);
  v->setContentsMargins(0, 0, 0, 0);
  v->setSpacing(2);
  auto* heading = new QLabel(title);
  QFont bold = heading->font();
  bold.setBold(true);
  heading->setFont(bold);
  heading->setContentsMargins(6, 2, 6, 0);
  v->addWidget(heading);
  // Whatever height is left once the captions have theirs: a chart view's own wish (its
  // scene's size) would push the captions out of sight.
  figure->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Ignored);
  v->addWidget(figure, 1);
  *caption = captionLabel();
  v->addWidget(*caption);
  cells_[place] = cell;
  headings_[place] = heading;
  return cell;
}

// Three across: loss, step time, spread; under them the timeline (two wide) and the sweep.
void TrainingView::placeInGrid(Place place) {
  static constexpr int kRow[] = {0, 0, 0, 1, 1}, kCol[] = {0, 1, 2, 0, 2},
                       kSpan[] = {1, 1, 1, 2, 1};
  grid_->addWidget(cells_[place], kRow[place], kCol[place], 1, kSpan[place]);
}

void TrainingView::setProjector(bool on) {
  if (on == projector_) return;
  projector_ = on;
  if (on) {
    for (size_t i = 0; i < kCells; ++i) {
      grid_->removeWidget(cells_[i]);
      tabs_->addTab(cells_[i], headings_[i]->text());
      headings_[i]->hide();  // the tab names the chart
    }
  } else {
    tabs_->clear();  // the pages stay, to go back into the grid
    for (size_t i = 0; i < kCells; ++i) {
      placeInGrid(static_cast<Place>(i));
      headings_[i]->show();
      cells_[i]->show();
    }
  }
  tabs_->setVisible(on);
  gridHost_->setVisible(!on);
}

// New adapters in the widget's style (its font and palette, which projector mode changes): the
// adapters keep a series per key, and another record has other runs.
void TrainingView::rebuildXYCharts() {
  rebuilding_ = true;
  const FigureStyle style = FigureStyle::fromWidget(this);
  for (size_t i = 0; i < kXYCharts; ++i) {
    if (views_[i] != nullptr) {
      holders_[i]->removeWidget(views_[i]);
      delete views_[i];
    }
    adapters_[i] = std::make_unique<XYChartAdapter>(style);
    views_[i] = makeChartView(*adapters_[i], nullptr);
    holders_[i]->addWidget(views_[i]);
  }
  rebuilding_ = false;
}

void TrainingView::setRecord(const TrainRecord& record, const QString& source) {
  record_ = record;
  source_ = source;
  hasRecord_ = true;
  timelineRun_ = timelineRunOf(record_, 0);
  timelineRunBox_->clear();
  for (size_t i = 0; i < record_.runs.size(); ++i) {
    timelineRunBox_->addItem(qs(record_.runs[i].label));
  }
  timelineRunBox_->setEnabled(record_.runs.size() > 1);
  rebuildXYCharts();
  redraw();
  pages_->setCurrentIndex(1);
}

void TrainingView::showTimelineRun(size_t index) {
  timelineRun_ = timelineRunOf(record_, index);
  charts_ = trainingCharts(record_, timelineRun_);
  if (timelineRun_ < record_.runs.size()) {
    timelineRunBox_->setCurrentIndex(static_cast<int>(timelineRun_));
  }
  timelineCaption_->setText(qs(charts_.timeline.note));
  timeline_->update();
}

void TrainingView::redraw() {
  charts_ = trainingCharts(record_, timelineRun_);
  summary_->setText(tr("%1: %2").arg(QFileInfo(source_).fileName(), qs(charts_.summary)));
  summary_->setToolTip(source_);
  const std::array<const XYChartData*, kXYCharts> xy = {&charts_.loss, &charts_.spread,
                                                        &charts_.sweep};
  for (size_t i = 0; i < kXYCharts; ++i) {
    adapters_[i]->update(*xy[i]);
    views_[i]->setToolTip(qs(xy[i]->y.tooltip));
    captions_[i]->setText(qs(xy[i]->note));
  }
  if (timelineRun_ < record_.runs.size()) {
    timelineRunBox_->setCurrentIndex(static_cast<int>(timelineRun_));
  }
  splitCaption_->setText(qs(charts_.split.note));
  timelineCaption_->setText(qs(charts_.timeline.note));
  identical_->setText(qs(charts_.identicalCaption));
  sweepPages_->setCurrentIndex(charts_.sweepMessage.empty() ? 0 : 1);
  if (!charts_.sweepMessage.empty()) captions_[Sweep]->clear();
  split_->update();
  timeline_->update();
  sweepMessage_->update();
}

void TrainingView::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  const bool restyle =
      event->type() == QEvent::FontChange || event->type() == QEvent::PaletteChange;
  if (restyle && hasRecord_ && !rebuilding_) {
    rebuildXYCharts();
    redraw();
  }
}

int TrainingView::lossSeriesCount() const { return adapters_[Loss]->seriesCount(); }
int TrainingView::spreadSeriesCount() const { return adapters_[Spread]->seriesCount(); }
int TrainingView::sweepSeriesCount() const { return adapters_[Sweep]->seriesCount(); }
bool TrainingView::sweepMessageShown() const { return sweepPages_->currentIndex() == 1; }
QString TrainingView::identicalCaptionText() const { return identical_->text(); }

}  // namespace arl::ui
