// The charts panel: fed whole from the sample, and row by row as a live sweep feeds it
// (redraws coalesced to at most one per 33 ms).
#include <gtest/gtest.h>

#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QComboBox>

#include "base/topology.h"
#include "charts/charts_panel.h"
#include "charts_fixture.h"
#include "wait_until.h"

namespace arl::ui {
namespace {

using testing::madeRow;

// What the panel does on its own timer is done within this.
constexpr int kRedrawWaitMs = 2000;

TEST(ChartsPanel, HasOneTabPerChartThenTheMap) {
  ChartsPanel panel;
  ASSERT_EQ(panel.count(), kChartKinds + 1);
  for (int i = 0; i < kChartKinds; ++i) {
    EXPECT_EQ(panel.tabText(i).toStdString(), chartTabTitle(ChartsPanel::kindOfTab(i)));
  }
  EXPECT_EQ(panel.tabText(ChartsPanel::kMapTab).toStdString(), "map (model)");
}

// The Map tab: the model's map over the window's grid, and the recording's measured runs as
// its measured winners, each the fastest algorithm measured at its ranks and size.
TEST(ChartsPanel, MapsTheModelAndMarksTheMeasuredWinners) {
  ChartsPanel panel;
  const CrossoverView& before = panel.crossover();
  ASSERT_EQ(before.map.ranks.front(), 2);
  ASSERT_EQ(before.map.ranks.back(), 4096);
  EXPECT_TRUE(before.measured.empty());
  for (const MapCell& c : before.map.cells) EXPECT_FALSE(c.ranked.empty());
  const BenchReport report = readRecording(testing::samplePath());
  panel.setReport(report);
  const CrossoverView& v = panel.crossover();
  ASSERT_FALSE(v.measured.empty());
  for (const MeasuredWinner& w : v.measured) {
    double winner = 0, fastest = 0;
    for (const SweepRow& sr : report.rows) {
      const ChartRow r = chartRow(sr);
      if (r.nranks != w.nranks || r.sizeBytes != w.bytes || !r.ok) continue;
      if (fastest == 0 || r.timeUs < fastest) fastest = r.timeUs;
      if (r.algorithm == w.algorithm && (winner == 0 || r.timeUs < winner)) winner = r.timeUs;
    }
    EXPECT_GT(winner, 0) << w.algorithm;
    EXPECT_EQ(winner, fastest) << w.nranks << " ranks, " << w.bytes << " bytes";
    EXPECT_GE(w.margin, 0);
  }
}

// On a named topology the map is the topology's: the rank counts it fits, every cell priced
// over its links as the command line's `model map --topology` prices it, and the model line
// names it.
// Before any run, the map follows the setup: its topology by name, its ports, and
// --link-latency as the per-hop latency (the links are expanded only for a run).
TEST(ChartsPanel, MapsTheSetupsTopologyBeforeAnyRun) {
  ChartsPanel panel;
  BenchConfig setup;
  setup.topology = "torus:4x4";
  setup.shaping.portBytesPerSecond = 1e9;
  setup.shaping.addedLatencySeconds = 2e-6;
  panel.showSetup(setup);
  const CrossoverView& v = panel.crossover();
  ASSERT_EQ(v.map.ranks, std::vector<int>{16});
  EXPECT_NE(v.modelText.find("torus:4x4"), std::string::npos) << v.modelText;
  EXPECT_NE(v.modelText.find("+2 us per hop"), std::string::npos) << v.modelText;
  // The same cells as the session's map over the expanded links.
  ChartsPanel session;
  BenchConfig config = setup;
  LinkShaping ports;
  ports.portBytesPerSecond = 1e9;
  config.shaping = expandTopology(parseTopology(config.topology), 16, ports, 2e-6);
  session.beginSession(config, {}, "test");
  const CrossoverMap& want = session.crossover().map;
  ASSERT_EQ(want.cells.size(), v.map.cells.size());
  for (size_t i = 0; i < want.cells.size(); ++i) {
    ASSERT_EQ(want.cells[i].ranked.size(), v.map.cells[i].ranked.size());
    for (size_t k = 0; k < want.cells[i].ranked.size(); ++k) {
      EXPECT_EQ(v.map.cells[i].ranked[k].algorithm, want.cells[i].ranked[k].algorithm);
      EXPECT_DOUBLE_EQ(v.map.cells[i].ranked[k].seconds, want.cells[i].ranked[k].seconds);
    }
  }
  // A uniform setup maps every power of two.
  ChartsPanel uniform;
  BenchConfig flat;
  flat.shaping.portBytesPerSecond = 1e9;
  uniform.showSetup(flat);
  EXPECT_EQ(uniform.crossover().map.ranks.front(), 2);
  EXPECT_EQ(uniform.crossover().map.ranks.back(), 4096);
}

TEST(ChartsPanel, MapsASessionOnATopologyOverThatTopology) {
  ChartsPanel panel;
  BenchConfig config;
  config.topology = "torus:4x4";
  LinkShaping ports;
  ports.portBytesPerSecond = 1e9;
  config.shaping = expandTopology(parseTopology(config.topology), 16, ports, 2e-6);
  panel.beginSession(config, {}, "test");
  const CrossoverView& v = panel.crossover();
  ASSERT_EQ(v.map.ranks, std::vector<int>{16});
  EXPECT_NE(v.modelText.find("torus:4x4"), std::string::npos) << v.modelText;
  // The same map as the command line's: the per-hop latency comes back from the links.
  MapQuery q;
  q.ranks = {16};
  q.sizes = v.map.sizes;
  q.params = ModelParams{};
  q.network.portBytesPerSecond = 1e9;
  q.topology = parseTopology("torus:4x4");
  q.hopLatencySeconds = 2e-6;
  const CrossoverMap cli = crossoverMap(q);
  ASSERT_EQ(cli.cells.size(), v.map.cells.size());
  for (size_t i = 0; i < cli.cells.size(); ++i) {
    ASSERT_FALSE(cli.cells[i].ranked.empty());
    ASSERT_EQ(cli.cells[i].ranked.size(), v.map.cells[i].ranked.size());
    for (size_t k = 0; k < cli.cells[i].ranked.size(); ++k) {
      const MapEntry& want = cli.cells[i].ranked[k];
      const MapEntry& got = v.map.cells[i].ranked[k];
      EXPECT_EQ(got.algorithm, want.algorithm);
      EXPECT_DOUBLE_EQ(got.seconds, want.seconds) << want.algorithm;
      EXPECT_EQ(got.method, want.method) << want.algorithm;
    }
  }
  // Not the uniform map: the torus's distances are priced (ring's slowest link is a hop away
  // at most, halving-doubling's partners up to four).
  bool simulated = false;
  for (const MapCell& c : v.map.cells) {
    for (const MapEntry& e : c.ranked) simulated |= e.method == MapMethod::Simulation;
  }
  EXPECT_TRUE(simulated);
}

TEST(ChartsPanel, ShowsTheSampleRecording) {
  ChartsPanel panel;
  const BenchReport report = readRecording(testing::samplePath());
  panel.setReport(report);
  const SessionCharts c = panel.charts();
  size_t points = 0;
  for (const ChartSeries& s : c.busbw.series) points += s.points.size();
  EXPECT_EQ(points, report.rows.size() * 2) << "a measured and a predicted point per run";
  const auto* view = panel.widget(0)->findChild<QChartView*>();
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(view->chart()->series().size(), c.busbw.series.size());
  EXPECT_FALSE(c.timeline.bars.empty());
  EXPECT_GE(c.heatMap.loads.busiestSender, 0);
  EXPECT_FALSE(c.heatMap.headline.empty());
}

// Before any session the charts say that nothing has run, with the setup Run would measure,
// and follow it as it changes; once a session is shown, they describe the session.
TEST(ChartsPanel, BeforeARunTheSubtitleFollowsTheSetup) {
  ChartsPanel panel;
  const std::string first = panel.charts().busbw.subtitle;
  EXPECT_EQ(first, "No run yet");
  EXPECT_EQ(first.find("slice"), std::string::npos) << "no default configuration: " << first;
  BenchConfig setup;
  setup.minBytes = setup.maxBytes = 4 << 20;
  setup.sliceSizes = {uint64_t{256} << 10};
  panel.showSetup(setup);
  for (const SessionCharts& c : {panel.charts()}) {
    for (const std::string* s : {&c.busbw.subtitle, &c.algbw.subtitle, &c.slice.subtitle,
                                 &c.spread.subtitle, &c.timeline.subtitle, &c.heatMap.subtitle}) {
      EXPECT_NE(s->find("No run yet"), std::string::npos) << *s;
      EXPECT_NE(s->find("slice 256K"), std::string::npos) << *s;
    }
  }
  setup.sliceSizes = {uint64_t{64} << 10};
  panel.showSetup(setup);
  const std::string changed = panel.charts().busbw.subtitle;
  EXPECT_NE(changed.find("slice 64K"), std::string::npos) << changed;
  EXPECT_EQ(changed.find("256K"), std::string::npos) << changed;
  // The size axes span the setup's size once redrawn (log2 of 4M is 22).
  const auto* view = panel.widget(0)->findChild<QChartView*>();
  ASSERT_NE(view, nullptr);
  ASSERT_FALSE(view->chart()->axes(Qt::Horizontal).isEmpty());
  const auto* x = qobject_cast<QCategoryAxis*>(view->chart()->axes(Qt::Horizontal).front());
  ASSERT_NE(x, nullptr);
  EXPECT_TRUE(
      waitUntil([&] { return x->min() > 21 && x->min() <= 22 && x->max() >= 22 && x->max() < 23; },
                kRedrawWaitMs))
      << x->min() << " .. " << x->max();
  BenchConfig ran;
  ran.sliceSizes = {uint64_t{1} << 20};
  std::vector<WorkerInfo> workers(4);
  panel.beginSession(ran, workers);
  panel.showSetup(setup);
  const std::string live = panel.charts().busbw.subtitle;
  EXPECT_NE(live.find("slice 1M"), std::string::npos) << "the session's own: " << live;
  EXPECT_EQ(live.find("No run yet"), std::string::npos) << live;
}

// The combo box at the tabs' corner switches the bandwidth charts between the mean and the
// median iteration, at once, and a new session keeps the choice.
TEST(ChartsPanel, TheCornerBoxSwitchesTheBandwidthChartsToTheMedian) {
  ChartsPanel panel;
  const BenchReport report = readRecording(testing::samplePath());
  panel.setReport(report);
  auto* box = qobject_cast<QComboBox*>(panel.cornerWidget(Qt::TopRightCorner));
  ASSERT_NE(box, nullptr);
  EXPECT_EQ(panel.bandwidthOf(), BandwidthOf::Mean);
  const SessionCharts mean = panel.charts();
  box->setCurrentIndex(1);
  EXPECT_EQ(panel.bandwidthOf(), BandwidthOf::Median);
  const SessionCharts median = panel.charts();
  EXPECT_EQ(median.bandwidthOf, BandwidthOf::Median);
  const SessionCharts expected = sessionCharts(report, nullptr, BandwidthOf::Median);
  ASSERT_EQ(median.busbw.series.size(), expected.busbw.series.size());
  for (size_t i = 0; i < expected.busbw.series.size(); ++i) {
    ASSERT_EQ(median.busbw.series[i].points.size(), expected.busbw.series[i].points.size());
    for (size_t j = 0; j < expected.busbw.series[i].points.size(); ++j) {
      EXPECT_DOUBLE_EQ(median.busbw.series[i].points[j].y, expected.busbw.series[i].points[j].y);
    }
  }
  EXPECT_NE(median.busbw.note, mean.busbw.note);
  panel.beginSession(report.config, report.workers);
  EXPECT_EQ(panel.charts().bandwidthOf, BandwidthOf::Median);
  panel.setBandwidthOf(BandwidthOf::Mean);
  EXPECT_EQ(box->currentIndex(), 0);
  // Shown only where it changes something: the bandwidth tabs.
  panel.setCurrentIndex(static_cast<int>(ChartKind::StepTimeline));
  EXPECT_TRUE(box->isHidden());
  panel.setCurrentIndex(static_cast<int>(ChartKind::BusbwVsSlice));
  EXPECT_FALSE(box->isHidden());
}

TEST(ChartsPanel, LiveRowsAreRedrawnTogetherOnTheTimer) {
  ChartsPanel panel;
  BenchConfig config;
  config.minBytes = 4096;
  config.maxBytes = 1 << 20;
  config.algorithms = {"ring", "tree"};
  panel.beginSession(config, std::vector<WorkerInfo>(4));
  const int before = panel.redraws();
  for (const uint64_t size : {uint64_t{4096}, uint64_t{65536}, uint64_t{1} << 20}) {
    panel.addRow(madeRow("ring", size, 65536, 50 + size / 1e3, 40));
    panel.addRow(madeRow("tree", size, 65536, 60 + size / 1e3, 45));
  }
  EXPECT_EQ(panel.redraws(), before) << "rows are drawn on the timer, not one by one";
  ASSERT_TRUE(waitUntil([&] { return panel.redraws() > before; }, kRedrawWaitMs));
  EXPECT_EQ(panel.redraws(), before + 1) << "six rows, one redraw";
  const SessionCharts c = panel.charts();
  EXPECT_EQ(c.busbw.series.size(), 4U);
  for (const ChartSeries& s : c.busbw.series) EXPECT_EQ(s.points.size(), 3U) << s.key;
  const auto* view = panel.widget(0)->findChild<QChartView*>();
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(view->chart()->series().size(), 4);
  EXPECT_EQ(view->chart()->animationOptions(), QChart::NoAnimation);
  // The x axis spans the configured sizes from the start.
  EXPECT_LE(c.busbw.x.min, 12);
  EXPECT_GE(c.busbw.x.max, 20);
}

// A run far below 1 GB/s (a shaped 20 MB/s port) gets an axis of its own scale, not the 0 to
// 1 GB/s drawn before any row.
TEST(ChartsPanel, ASlowRunsAxisFitsItsRows) {
  ChartsPanel panel;
  BenchConfig config;
  config.minBytes = config.maxBytes = 4 << 20;
  config.algorithms = {"ring"};
  panel.beginSession(config, std::vector<WorkerInfo>(2));
  const int before = panel.redraws();
  // 4 MiB in 0.2 s each way: about 0.02 GB/s; the model says the same.
  panel.addRow(madeRow("ring", 4 << 20, 262144, 200000, 200000, 2));
  ASSERT_TRUE(waitUntil([&] { return panel.redraws() > before; }, kRedrawWaitMs));
  const ChartAxis& y = panel.charts().busbw.y;
  EXPECT_GT(y.max, 0.02);
  EXPECT_LT(y.max, 0.1) << "the axis drawn before any row was kept";
}

}  // namespace
}  // namespace arl::ui
