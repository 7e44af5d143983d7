// The charts of a session, in tabs: busbw and algbw against size (one series per algorithm, the
// model's prediction dashed beside each), busbw against slice size, the per-step timeline of
// one run, the link load heat map of one run, the spread of iteration times, and the cost
// model's crossover map with the session's measured winners on it (the last tab, Map).
// Fed whole (a recording) or row by row (a live sweep; redrawn at most 30 times a second);
// before either, they show the setup Run would measure and say that nothing has run yet.
#pragma once

#include <QTabWidget>
#include <QTimer>
#include <array>
#include <memory>

#include "charts/chart_data.h"
#include "charts/crossover_view.h"
#include "export/export.h"

class QChartView;
class QComboBox;
class QLabel;

namespace arl::ui {

class XYChartAdapter;
class FigureWidget;

class ChartsPanel : public QTabWidget {
  Q_OBJECT

 public:
  explicit ChartsPanel(QWidget* parent = nullptr);
  ~ChartsPanel() override;

  // Before any session: the charts say that nothing has run yet, with the setup that Run
  // would measure (its ranks, algorithm, sizes, slice) and the size axes over its sizes.
  // Ignored once a session or a recording is shown: the charts then describe what ran.
  void showSetup(const BenchConfig& setup);
  // Starts a new session: every chart empties and takes this configuration, and the size
  // charts name `modelSource` (where the model's parameters came from) beside their
  // predictions.
  void beginSession(const BenchConfig& config, const std::vector<WorkerInfo>& workers,
                    const std::string& modelSource = {});
  // One finished run of the live session.
  void addRow(const SweepRow& row);
  // A whole session at once (a recording, or a finished sweep).
  void setReport(const BenchReport& report);
  // The run whose per-step timeline and link heat map are shown (its telemetry events are
  // read; the row need not outlive the call).
  void showRun(const SweepRow& row);

  // The cost model the Map tab is drawn with, and where its parameters came from; a
  // recording's own model (setReport) replaces it.
  void setModel(const ModelParams& p, const std::string& source);
  // The Map tab's index: after the ChartKind tabs.
  static constexpr int kMapTab = kChartKinds;
  const CrossoverView& crossover() const { return crossover_; }

  // What the bandwidth charts measure a run by (the combo box at the tabs' corner); they
  // redraw at once.
  void setBandwidthOf(BandwidthOf of);
  BandwidthOf bandwidthOf() const { return bandwidthOf_; }

  // What the charts show now (rows added since the last redraw included).
  SessionCharts charts() const;
  // The chart on tab `index` (tabs are in ChartKind order).
  static ChartKind kindOfTab(int index) { return static_cast<ChartKind>(index); }
  // Redraws so far (a live session's are coalesced: at most one per kRedrawIntervalMs).
  int redraws() const { return redraws_; }
  static constexpr int kRedrawIntervalMs = 33;

 private:
  void redraw();
  void scheduleRedraw();
  QWidget* wrap(QWidget* view, QLabel** note);
  void applyLiveAxes(XYChartData& d, ChartKind k) const;
  void computeMap();

  BenchConfig config_;
  std::vector<WorkerInfo> workers_;
  std::vector<ChartRow> rows_;
  SessionCharts charts_;
  bool live_ = false;
  bool shown_ = false;    // a session or a recording has been shown
  bool planned_ = false;  // config_ is the setup of showSetup(), nothing has run

  BandwidthOf bandwidthOf_ = BandwidthOf::Mean;
  QComboBox* bandwidthBox_ = nullptr;
  std::array<std::unique_ptr<XYChartAdapter>, 4> adapters_;  // busbw, algbw, slice, spread
  std::array<QChartView*, 4> views_{};
  std::array<QLabel*, kChartKinds> notes_{};
  FigureWidget* timeline_ = nullptr;
  FigureWidget* heatMap_ = nullptr;
  FigureWidget* map_ = nullptr;
  ModelParams mapParams_;
  std::string mapSource_;
  CrossoverView crossover_;
  QTimer timer_;
  int redraws_ = 0;
};

}  // namespace arl::ui
