// The window's Training view: a training record (allreduce-lab train's JSON) as five charts.
// Loss against step and the replicas' spread against step (one line per run), the mean step
// split into compute, hidden and exposed communication (one bar per run), one run's sample
// step on every rank (a compute lane and a communication lane each, one time axis), and step
// time against bucket size (or why there is no sweep). Each chart names what was measured on
// which workers and network, with a caption of what it shows under it. On a laptop the five
// share the view; in projector mode they take it one at a time, in tabs.
#pragma once

#include <QString>
#include <QWidget>
#include <array>
#include <memory>

#include "training/training_charts.h"

class QChartView;
class QComboBox;
class QGridLayout;
class QLabel;
class QLayout;
class QStackedWidget;
class QTabWidget;
class QVBoxLayout;

namespace arl::ui {

class FigureWidget;
class XYChartAdapter;

class TrainingView : public QWidget {
  Q_OBJECT

 public:
  explicit TrainingView(QWidget* parent = nullptr);
  ~TrainingView() override;

  // Shows `record`, read from `source` (a file's path, named above the charts).
  void setRecord(const TrainRecord& record, const QString& source);
  bool hasRecord() const { return hasRecord_; }
  const TrainRecord& record() const { return record_; }
  QString source() const { return source_; }
  // The timeline shows run `index`'s sample step (the runs' box above it chooses too).
  void showTimelineRun(size_t index);
  // Projector mode: one chart at a time, in tabs, rather than five side by side.
  void setProjector(bool on);
  bool projector() const { return projector_; }

  // What the charts show now.
  const TrainingCharts& charts() const { return charts_; }
  // Series in the loss, spread and sweep charts as drawn (for tests).
  int lossSeriesCount() const;
  int spreadSeriesCount() const;
  int sweepSeriesCount() const;
  // Whether the sweep's place shows its message instead of a plot.
  bool sweepMessageShown() const;
  QString identicalCaptionText() const;

 protected:
  void changeEvent(QEvent* event) override;

 private:
  enum XY : size_t { Loss, Spread, Sweep, kXYCharts };
  // The charts' places, in the grid's reading order (and the tabs').
  enum Place : size_t { LossCell, SplitCell, SpreadCell, TimelineCell, SweepCell, kCells };
  QLayout* buildHeader();
  void buildFigures();
  void buildCells();
  QWidget* makeCell(Place place, const QString& title, QWidget* figure, QLabel** caption);
  void placeInGrid(Place place);
  void rebuildXYCharts();
  void redraw();

  TrainRecord record_;
  QString source_;
  bool hasRecord_ = false;
  size_t timelineRun_ = SIZE_MAX;
  TrainingCharts charts_;

  bool projector_ = false;
  QStackedWidget* pages_ = nullptr;  // the placeholder, or the charts
  QWidget* gridHost_ = nullptr;
  QGridLayout* grid_ = nullptr;
  QTabWidget* tabs_ = nullptr;  // projector mode's
  std::array<QWidget*, kCells> cells_{};
  std::array<QLabel*, kCells> headings_{};
  QLabel* summary_ = nullptr;
  QComboBox* timelineRunBox_ = nullptr;
  std::array<std::unique_ptr<XYChartAdapter>, kXYCharts> adapters_;
  std::array<QChartView*, kXYCharts> views_{};
  std::array<QVBoxLayout*, kXYCharts> holders_{};  // where each chart view sits
  std::array<QLabel*, kXYCharts> captions_{};
  FigureWidget* split_ = nullptr;
  FigureWidget* timeline_ = nullptr;
  FigureWidget* sweepMessage_ = nullptr;
  QStackedWidget* sweepPages_ = nullptr;
  QLabel* splitCaption_ = nullptr;
  QLabel* timelineCaption_ = nullptr;
  QLabel* identical_ = nullptr;
  bool rebuilding_ = false;
};

}  // namespace arl::ui
