#include "charts/charts_panel.h"

#include <QChartView>
#include <QComboBox>
#include <QLabel>
#include <QVBoxLayout>
#include <cmath>
#include <cstdio>

#include "base/topology.h"
#include "charts/chart_adapter.h"
#include "charts/chart_render.h"

namespace arl::ui {
namespace {

constexpr std::array<ChartKind, 4> kXYKinds = {ChartKind::BusbwVsSize, ChartKind::AlgbwVsSize,
                                               ChartKind::BusbwVsSlice, ChartKind::IterationSpread};

}  // namespace

ChartsPanel::ChartsPanel(QWidget* parent) : QTabWidget(parent) {
  setDocumentMode(true);
  const FigureStyle style = FigureStyle::fromWidget(this);
  std::array<QWidget*, kChartKinds> pages{};
  for (size_t i = 0; i < kXYKinds.size(); ++i) {
    adapters_[i] = std::make_unique<XYChartAdapter>(style);
    views_[i] = makeChartView(*adapters_[i], nullptr);
    views_[i]->setMinimumSize(320, 240);
    const int k = static_cast<int>(kXYKinds[i]);
    pages[static_cast<size_t>(k)] = wrap(views_[i], &notes_[static_cast<size_t>(k)]);
  }
  timeline_ = new FigureWidget([this](QPainter& p, const QRectF& r, const FigureStyle& s) {
    paintTimeline(p, r, charts_.timeline, s);
  });
  heatMap_ = new FigureWidget([this](QPainter& p, const QRectF& r, const FigureStyle& s) {
    paintHeatMap(p, r, charts_.heatMap, s);
  });
  pages[static_cast<size_t>(ChartKind::StepTimeline)] = wrap(timeline_, nullptr);
  pages[static_cast<size_t>(ChartKind::LinkHeatMap)] = wrap(heatMap_, nullptr);
  for (int k = 0; k < kChartKinds; ++k) {
    addTab(pages[static_cast<size_t>(k)],
           QString::fromStdString(chartTabTitle(static_cast<ChartKind>(k))));
  }
  map_ = new FigureWidget([this](QPainter& p, const QRectF& r, const FigureStyle& s) {
    paintCrossoverMap(p, r, crossover_, s);
  });
  map_->setMinimumSize(320, 240);
  addTab(wrap(map_, nullptr), tr("map (model)"));
  // What the bandwidth charts measure by, at the tabs' corner: the mean (nccl-tests) or the
  // median iteration, which the model's dashed line predicts.
  bandwidthBox_ = new QComboBox(this);
  bandwidthBox_->addItem(tr("bandwidth from the mean time"));
  bandwidthBox_->addItem(tr("bandwidth from the median iteration"));
  bandwidthBox_->setToolTip(
      tr("Mean: nccl-tests' time, the mean over the timed iterations (bench's table, CSV, "
         "JSON). Median: the middle iteration (p50), which one slow iteration of a short run "
         "does not move; the cost model's prediction is calibrated to it."));
  setCornerWidget(bandwidthBox_, Qt::TopRightCorner);
  connect(bandwidthBox_, &QComboBox::currentIndexChanged, this,
          [this](int i) { setBandwidthOf(i == 1 ? BandwidthOf::Median : BandwidthOf::Mean); });
  // Shown only on the tabs it changes: the timeline, heat map and spread are not bandwidths.
  connect(this, &QTabWidget::currentChanged, this, [this](int tab) {
    const ChartKind k = kindOfTab(tab);
    bandwidthBox_->setVisible(tab < kChartKinds &&
                              (k == ChartKind::BusbwVsSize || k == ChartKind::AlgbwVsSize ||
                               k == ChartKind::BusbwVsSlice));
  });
  timer_.setSingleShot(true);
  timer_.setInterval(kRedrawIntervalMs);
  connect(&timer_, &QTimer::timeout, this, &ChartsPanel::redraw);
  // No configuration has come yet: a default one would name sizes and a slice nobody chose.
  charts_.subtitle = noRunSubtitle();
  fillRunCharts(charts_, nullptr);
  computeMap();
  redraw();
}

ChartsPanel::~ChartsPanel() = default;

void ChartsPanel::setModel(const ModelParams& p, const std::string& source) {
  mapParams_ = p;
  mapSource_ = source;
  computeMap();
  map_->update();
}

// The map over the session's ports, added latency and topology (windowMapQuery); every cell is
// a closed form or a small simulation, quick enough for the GUI thread.
void ChartsPanel::computeMap() {
  const MapQuery q = windowMapQuery(mapParams_, config_.shaping, config_.topology);
  crossover_.map = crossoverMap(q);
  std::string network = describeShaping(q.network);
  if (q.topology) {
    network = topologyName(*q.topology) + ", links " +
              describeRate(topologyLinkRate(*q.topology, q.network));
    if (q.hopLatencySeconds > 0) {
      char hop[48];
      std::snprintf(hop, sizeof hop, ", +%.3g us per hop", q.hopLatencySeconds * 1e6);
      network += hop;
    }
  }
  crossover_.modelText = alphaBetaGammaText(q.params) + " · " + network +
                         (mapSource_.empty() ? "" : " · " + mapSource_);
}

QWidget* ChartsPanel::wrap(QWidget* view, QLabel** note) {
  auto* page = new QWidget;
  auto* layout = new QVBoxLayout(page);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  layout->addWidget(view, 1);
  if (note != nullptr) {
    *note = new QLabel;
    (*note)->setWordWrap(true);
    (*note)->setForegroundRole(QPalette::PlaceholderText);
    (*note)->setContentsMargins(8, 0, 8, 4);
    layout->addWidget(*note);
  }
  return page;
}

void ChartsPanel::showSetup(const BenchConfig& setup) {
  if (shown_) return;
  config_ = setup;
  planned_ = true;
  charts_.subtitle = noRunSubtitle(&setup);
  fillRunCharts(charts_, nullptr);
  computeMap();  // the setup's ports and topology, before any run
  map_->update();
  // The y axes are chosen again: the sizes' axes move with the setup.
  for (ChartKind k : kXYKinds) charts_.xy(k)->y = {};
  scheduleRedraw();
}

void ChartsPanel::beginSession(const BenchConfig& config, const std::vector<WorkerInfo>& workers,
                               const std::string& modelSource) {
  config_ = config;
  workers_ = workers;
  rows_.clear();
  live_ = true;
  shown_ = true;
  planned_ = false;
  charts_ = SessionCharts{};
  charts_.subtitle = sessionSubtitle(config_, workers_);
  charts_.modelSource = modelSource;
  charts_.bandwidthOf = bandwidthOf_;
  fillRunCharts(charts_, nullptr);
  computeMap();
  timer_.stop();
  redraw();
}

void ChartsPanel::addRow(const SweepRow& row) {
  rows_.push_back(chartRow(row));
  scheduleRedraw();
}

void ChartsPanel::setReport(const BenchReport& report) {
  timer_.stop();
  live_ = false;
  shown_ = true;
  planned_ = false;
  config_ = report.config;
  workers_ = report.workers;
  rows_.clear();
  for (const SweepRow& r : report.rows) rows_.push_back(chartRow(r));
  charts_.subtitle = sessionSubtitle(config_, workers_);
  charts_.modelSource = report.modelSource;
  fillRunCharts(charts_, defaultTimelineRow(report.rows));
  mapParams_ = report.model;
  mapSource_ = report.modelSource;
  computeMap();
  redraw();
}

void ChartsPanel::showRun(const SweepRow& row) {
  fillRunCharts(charts_, &row);
  timeline_->update();
  heatMap_->update();
}

void ChartsPanel::setBandwidthOf(BandwidthOf of) {
  if (of == bandwidthOf_) return;
  bandwidthOf_ = of;
  bandwidthBox_->setCurrentIndex(of == BandwidthOf::Median ? 1 : 0);
  charts_.bandwidthOf = of;
  // The y axes are chosen again: a live session's only grow, and the median's may be lower.
  for (ChartKind k : kXYKinds) charts_.xy(k)->y = {};
  redraw();
}

SessionCharts ChartsPanel::charts() const {
  SessionCharts c = charts_;
  fillXYCharts(c, rows_);
  return c;
}

void ChartsPanel::scheduleRedraw() {
  if (!timer_.isActive()) timer_.start();
}

// While live, the x axes span the session's configured sizes and the y axes only grow, so the
// charts do not jump as rows arrive; before a session, the x axes span the setup's sizes.
void ChartsPanel::applyLiveAxes(XYChartData& d, ChartKind k) const {
  const XYChartData& before = *charts_.xy(k);
  if (k != ChartKind::BusbwVsSlice) {
    const double lo =
        std::floor(std::log2(static_cast<double>(std::max<uint64_t>(config_.minBytes, 1))));
    const double hi =
        std::ceil(std::log2(static_cast<double>(std::max(config_.maxBytes, config_.minBytes))));
    // Without rows the data's axis is a placeholder: the configured sizes alone are the axis.
    d.x.min = rows_.empty() ? lo - 0.5 : std::min(d.x.min, lo - 0.5);
    d.x.max = rows_.empty() ? hi + 0.5 : std::max(d.x.max, hi + 0.5);
    d.x.ticks = log2SizeTicks(d.x.min + 0.5, d.x.max - 0.5);
  }
  // The y axis only grows while rows come in (no jumping), unless it is more than twice what
  // the rows need: the axis drawn before any row (0 to 1 GB/s) would flatten a 20 MB/s run.
  if (!before.y.ticks.empty() && d.y.min >= before.y.min && d.y.max <= before.y.max &&
      before.y.max <= 2 * d.y.max) {
    d.y = before.y;
  }
}

void ChartsPanel::redraw() {
  SessionCharts next = charts_;
  fillXYCharts(next, rows_);
  for (size_t i = 0; i < kXYKinds.size(); ++i) {
    XYChartData& d = *next.xy(kXYKinds[i]);
    if (live_ || planned_) applyLiveAxes(d, kXYKinds[i]);
    adapters_[i]->update(d);
    views_[i]->setToolTip(QString::fromStdString(d.y.tooltip));
    notes_[static_cast<size_t>(kXYKinds[i])]->setText(QString::fromStdString(d.note));
  }
  charts_ = std::move(next);
  crossover_.measured = measuredWinners(rows_);
  timeline_->update();
  heatMap_->update();
  map_->update();
  ++redraws_;
}

}  // namespace arl::ui
