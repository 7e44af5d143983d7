// The charts' plain data (ui/charts/chart_data.h): from the sample recording and from rows
// whose figures are known.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "charts/chart_data.h"
#include "charts_fixture.h"

namespace arl::ui {
namespace {

using testing::madeRow;
using testing::samplePath;

const ChartSeries* findSeries(const XYChartData& d, const std::string& key) {
  for (const ChartSeries& s : d.series) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

// The y of the point at x, or NaN.
double yAt(const ChartSeries& s, double x) {
  for (const ChartPoint& p : s.points) {
    if (std::abs(p.x - x) < 1e-9) return p.y;
  }
  return std::nan("");
}

TEST(ChartsData, SampleHasAPointForEverySizeAndAlgorithmWithItsPrediction) {
  const BenchReport report = readRecording(samplePath());
  ASSERT_FALSE(report.rows.empty());
  const SessionCharts c = sessionCharts(report);
  std::set<uint64_t> sizes, slices;
  for (const SweepRow& row : report.rows) slices.insert(row.result.request.sliceBytes);
  for (const SweepRow& row : report.rows) {
    // With several slice sizes in a session, each is a series of its own.
    std::string algo = row.result.request.algorithm;
    if (slices.size() > 1) algo += " slice " + formatSize(row.result.request.sliceBytes);
    const double x = std::log2(static_cast<double>(row.sizeBytes));
    sizes.insert(row.sizeBytes);
    for (const auto& [d, y] :
         {std::pair{&c.busbw, row.metrics.busbwGBps}, std::pair{&c.algbw, row.metrics.algbwGBps}}) {
      const ChartSeries* measured = findSeries(*d, algo);
      ASSERT_NE(measured, nullptr) << algo;
      EXPECT_EQ(measured->style, SeriesStyle::Measured);
      EXPECT_DOUBLE_EQ(yAt(*measured, x), y) << algo << " " << row.sizeBytes;
      ASSERT_TRUE(std::isfinite(row.predictedUs) && row.predictedUs > 0);
      const ChartSeries* model = findSeries(*d, algo + " model");
      ASSERT_NE(model, nullptr);
      EXPECT_EQ(model->style, SeriesStyle::Predicted);
      const double alg = static_cast<double>(row.sizeBytes) / row.predictedUs / 1e3;
      const double expected = d == &c.busbw ? alg * 2.0 * 3 / 4 : alg;
      EXPECT_NEAR(yAt(*model, x), expected, expected * 1e-12);
    }
  }
  EXPECT_GE(sizes.size(), 3U) << "the sample should sweep a few sizes";
  // Every size is on the x axis, labelled as nccl-tests' users read sizes.
  std::set<std::string> labels;
  for (const AxisTick& t : c.busbw.x.ticks) labels.insert(t.label);
  for (const uint64_t s : sizes) EXPECT_TRUE(labels.count(formatSize(s))) << formatSize(s);
  EXPECT_NE(c.busbw.subtitle.find("4 ranks"), std::string::npos) << c.busbw.subtitle;
  EXPECT_NE(c.busbw.y.tooltip.find("2(n"), std::string::npos);
}

// The size charts name where the model's parameters came from beside their predictions; a
// chart without predictions does not.
TEST(ChartsData, SizeChartsNameTheModelsSourceWhereTheyShowPredictions) {
  BenchReport report = readRecording(samplePath());
  report.modelSource = "calibration /x/calibration.json (testhost)";
  const SessionCharts c = sessionCharts(report);
  for (const XYChartData* d : {&c.busbw, &c.algbw}) {
    EXPECT_NE(d->note.find("The model's parameters: calibration /x/calibration.json (testhost)."),
              std::string::npos)
        << d->note;
  }
  EXPECT_EQ(c.slice.note.find("calibration /x"), std::string::npos) << c.slice.note;
  for (SweepRow& r : report.rows) r.predictedUs = std::nan("");
  const SessionCharts none = sessionCharts(report);
  EXPECT_EQ(none.busbw.note.find("The model's parameters"), std::string::npos) << none.busbw.note;
}

// Measured by the median iteration, the bandwidth charts plot S / p50 (busbw times the bus
// factor), say so, and leave out a run without a median; by the mean, nccl-tests' figures.
TEST(ChartsData, BandwidthOfTheMedianIterationPlotsSizeOverP50) {
  std::vector<ChartRow> rows;
  for (const uint64_t size : {uint64_t{4096}, uint64_t{1} << 20}) {
    rows.push_back(chartRow(madeRow("ring", size, 65536, 100.0 + size / 1e4, 90.0)));
  }
  SweepRow noMedian = madeRow("ring", uint64_t{16} << 20, 65536, 5000.0, 4000.0);
  noMedian.metrics.spread = {};
  rows.push_back(chartRow(noMedian));
  const XYChartData mean = bandwidthVsSize(rows, true);
  const XYChartData median = bandwidthVsSize(rows, true, BandwidthOf::Median);
  const ChartSeries* byMean = findSeries(mean, "ring");
  const ChartSeries* byMedian = findSeries(median, "ring");
  ASSERT_TRUE(byMean && byMedian);
  EXPECT_EQ(byMean->points.size(), 3U);
  ASSERT_EQ(byMedian->points.size(), 2U) << "the run without a median is left out";
  for (size_t i = 0; i < 2; ++i) {
    const ChartRow& r = rows[i];
    const double x = std::log2(static_cast<double>(r.sizeBytes));
    EXPECT_DOUBLE_EQ(yAt(*byMean, x), r.busbwGBps);
    const double algbw = static_cast<double>(r.sizeBytes) / r.spread.p50Us / 1e3;
    EXPECT_NEAR(yAt(*byMedian, x), algbw * 2.0 * 3 / 4, 1e-12 * algbw);
    EXPECT_GT(yAt(*byMedian, x), yAt(*byMean, x));  // the fixture's p50 is 0.9 of the mean
  }
  EXPECT_NE(median.note.find("Solid: measured (the median iteration, p50)."), std::string::npos)
      << median.note;
  EXPECT_NE(mean.note.find("Solid: measured (mean over timed iterations)."), std::string::npos);
  const XYChartData algbw = bandwidthVsSize(rows, false, BandwidthOf::Median);
  EXPECT_NE(algbw.y.tooltip.find("median"), std::string::npos) << algbw.y.tooltip;
  const XYChartData slice = busbwVsSlice(rows, BandwidthOf::Median);
  EXPECT_NE(slice.note.find("median iteration"), std::string::npos) << slice.note;
  EXPECT_EQ(parseBandwidthOf("median"), BandwidthOf::Median);
  EXPECT_EQ(parseBandwidthOf("mean"), BandwidthOf::Mean);
  EXPECT_FALSE(parseBandwidthOf("p99").has_value());
}

TEST(ChartsData, OneMeasuredAndOneModelSeriesPerAlgorithm) {
  std::vector<ChartRow> rows;
  for (const uint64_t size : {uint64_t{4096}, uint64_t{65536}, uint64_t{1} << 20}) {
    rows.push_back(chartRow(madeRow("ring", size, 65536, 100.0 + size / 1e4, 90.0)));
    rows.push_back(chartRow(madeRow("tree", size, 65536, 120.0 + size / 1e4, std::nan(""))));
  }
  const XYChartData d = bandwidthVsSize(rows, true);
  ASSERT_EQ(d.series.size(), 3U) << "tree has no prediction, so no model series";
  const ChartSeries* ring = findSeries(d, "ring");
  const ChartSeries* tree = findSeries(d, "tree");
  ASSERT_TRUE(ring && tree && findSeries(d, "ring model"));
  EXPECT_EQ(ring->color.algorithm, "ring");
  EXPECT_EQ(tree->points.size(), 3U);
  for (size_t i = 1; i < tree->points.size(); ++i)
    EXPECT_LT(tree->points[i - 1].x, tree->points[i].x);
  // 4K, 64K and 1M are labelled ticks; the axis holds them all.
  EXPECT_LE(d.x.min, 12);
  EXPECT_GE(d.x.max, 20);
  EXPECT_GE(d.y.max, ring->points.front().y);
}

TEST(ChartsData, SliceChartHasOneSeriesPerMessageSizeOrderedBySlice) {
  std::vector<ChartRow> rows;
  for (const uint64_t size : {uint64_t{1} << 20, uint64_t{16} << 20}) {
    for (const uint64_t slice : {uint64_t{256} << 10, uint64_t{16} << 10, uint64_t{64} << 10}) {
      rows.push_back(chartRow(madeRow("ring", size, slice, static_cast<double>(size) / slice, 1)));
    }
  }
  const XYChartData d = busbwVsSlice(rows);
  ASSERT_EQ(d.series.size(), 2U);
  EXPECT_EQ(d.series[0].name, "message 1M");
  EXPECT_EQ(d.series[1].name, "message 16M");
  for (const ChartSeries& s : d.series) {
    ASSERT_EQ(s.points.size(), 3U);
    EXPECT_DOUBLE_EQ(s.points[0].x, 14);  // 16K
    EXPECT_DOUBLE_EQ(s.points[2].x, 18);  // 256K
  }
  EXPECT_NE(d.series[0].color.index, d.series[1].color.index);
}

TEST(ChartsData, SpreadBandRunsFromMedianToP99WithTheMaximumAsMarkers) {
  const std::vector<ChartRow> rows = {chartRow(madeRow("ring", 1 << 20, 1 << 16, 100, 1)),
                                      chartRow(madeRow("ring", 4 << 20, 1 << 16, 400, 1))};
  const XYChartData d = iterationSpreadChart(rows);
  const ChartSeries* low = findSeries(d, "ring p50");
  const ChartSeries* high = findSeries(d, "ring p99");
  const ChartSeries* max = findSeries(d, "ring max");
  ASSERT_TRUE(low && high && max);
  EXPECT_EQ(low->style, SeriesStyle::BandLow);
  EXPECT_EQ(high->style, SeriesStyle::BandHigh);
  EXPECT_EQ(low->band, high->band);
  EXPECT_NEAR(low->points[0].y, std::log10(90.0), 1e-12);
  EXPECT_NEAR(high->points[1].y, std::log10(600.0), 1e-12);
  EXPECT_NEAR(max->points[1].y, std::log10(800.0), 1e-12);
  EXPECT_LE(d.y.min, std::log10(90.0));
  EXPECT_GE(d.y.max, std::log10(800.0));
}

TEST(ChartsData, TimelineOfTheSampleHasEveryRanksLanes) {
  const BenchReport report = readRecording(samplePath());
  const SweepRow* run = defaultTimelineRow(report.rows);
  ASSERT_NE(run, nullptr) << "the sample must carry chunk telemetry";
  const TimelineData t = stepTimeline(*run);
  ASSERT_EQ(t.nranks, 4);
  EXPECT_EQ(t.lanes.size(), 12U);
  std::map<std::pair<int, Activity>, int> bars;
  for (const TimelineBar& b : t.bars) {
    EXPECT_GE(b.startUs, 0);
    EXPECT_LE(b.startUs, b.endUs);
    EXPECT_LE(b.endUs, t.endUs + 1e-9);
    EXPECT_EQ(b.lane / 3, b.rank);
    ++bars[{b.rank, b.activity}];
  }
  for (int r = 0; r < 4; ++r) {
    EXPECT_GT((bars[{r, Activity::Send}]), 0) << r;
    EXPECT_GT((bars[{r, Activity::Recv}]), 0) << r;
    EXPECT_GT((bars[{r, Activity::Reduce}]), 0) << r;
  }
  // A ring of 4 ranks has 2 x 3 steps per iteration.
  std::set<uint32_t> steps;
  for (const StepEndMark& m : t.stepEnds) steps.insert(m.step);
  EXPECT_EQ(steps.size(), 6U);
}

// A run of NCCL's: its lanes are NCCL's, from what NCCL's profiler plugin reported, and the
// note says that no per-chunk events came where NCCL had no network steps.
// A training step: a compute lane above each rank's send, recv and reduce, the compute
// spans on it, and where the rank computed with a message in flight, the overlap.
TEST(ChartsData, TimelineOfATrainingStepHasAComputeLaneAndItsOverlap) {
  SweepRow row;
  row.result.request.algorithm = "ring";
  row.result.request.train = TrainConfig{};
  row.result.nranks = 2;
  const auto add = [&](EventKind k, int rank, int64_t endNs, uint64_t lengthNs) {
    TelemetryEvent e;
    e.rank = rank;
    e.kind = k;
    e.peer = k == EventKind::SendStart || k == EventKind::SendEnd ? 1 - rank : -1;
    e.tNs = endNs;
    e.offset = lengthNs;
    row.result.events.push_back(e);
  };
  add(EventKind::ComputeForward, 0, 10'000, 10'000);   // 0 .. 10 us
  add(EventKind::ComputeBackward, 0, 30'000, 20'000);  // 10 .. 30 us
  add(EventKind::SendStart, 0, 20'000, 0);             // a bucket's send, 20 .. 40 us
  add(EventKind::SendEnd, 0, 40'000, 0);
  add(EventKind::ComputeOptimizer, 0, 45'000, 5'000);  // 40 .. 45 us
  add(EventKind::ComputeForward, 1, 12'000, 12'000);
  const TimelineData t = stepTimeline(row);
  EXPECT_TRUE(t.training);
  EXPECT_FALSE(t.nccl);
  EXPECT_EQ(t.laneNames, (std::vector<std::string>{"compute", "send", "recv", "reduce"}));
  ASSERT_EQ(t.lanes.size(), 8U);
  EXPECT_EQ(t.lanes[4], "rank 1 compute");
  EXPECT_NE(t.title.find("Training step 0"), std::string::npos) << t.title;
  std::map<Activity, int> bars;
  for (const TimelineBar& b : t.bars) {
    ++bars[b.activity];
    EXPECT_EQ(b.lane % 4 == 0, isComputeActivity(b.activity)) << b.lane;
  }
  EXPECT_EQ(bars[Activity::Forward], 2);
  EXPECT_EQ(bars[Activity::Backward], 1);
  EXPECT_EQ(bars[Activity::Optimizer], 1);
  EXPECT_EQ(bars[Activity::Send], 1);
  // The backward pass overlapped the send; the optimizer began as it ended.
  ASSERT_EQ(t.overlaps.size(), 1U);
  EXPECT_EQ(t.overlaps[0].rank, 0);
  EXPECT_DOUBLE_EQ(t.overlaps[0].startUs, 20);
  EXPECT_DOUBLE_EQ(t.overlaps[0].endUs, 30);
  EXPECT_TRUE(t.stepEnds.empty());
}

TEST(ChartsData, TimelineOfAnNcclRunShowsNcclsLanesLabelledAsNccls) {
  SweepRow row;
  row.sizeBytes = 4096;
  row.result.request.algorithm = "nccl-ring";
  row.result.nranks = 1;
  const auto add = [&](EventKind k, int64_t t, uint32_t channel) {
    TelemetryEvent e;
    e.rank = 0;
    e.kind = k;
    e.tNs = t;
    e.chunk = channel;
    row.result.events.push_back(e);
  };
  add(EventKind::NcclColl, 1'000, 0);
  add(EventKind::NcclKernelStart, 3'000, 0);
  add(EventKind::NcclKernelStart, 3'100, 1);
  add(EventKind::NcclKernelEnd, 9'000, 0);
  add(EventKind::NcclKernelEnd, 9'500, 1);
  const TimelineData t = stepTimeline(row);
  EXPECT_TRUE(t.nccl);
  ASSERT_EQ(t.lanes.size(), 3U);
  EXPECT_EQ(t.lanes[0], "rank 0 NCCL collective");
  EXPECT_EQ(t.lanes[1], "rank 0 NCCL kernel");
  std::map<Activity, int> bars;
  for (const TimelineBar& b : t.bars) ++bars[b.activity];
  EXPECT_EQ(bars[Activity::NcclColl], 1);
  EXPECT_EQ(bars[Activity::NcclKernel], 2);
  EXPECT_DOUBLE_EQ(t.endUs, 8.5);
  EXPECT_NE(t.note.find("NCCL reports no per-chunk events"), std::string::npos) << t.note;
}

TEST(ChartsData, HeatMapOfTheSampleRingHasTrafficOnRingLinksOnly) {
  const BenchReport report = readRecording(samplePath());
  const SweepRow* run = defaultTimelineRow(report.rows);
  ASSERT_NE(run, nullptr);
  const HeatMapData h = linkHeatMap(*run);
  ASSERT_EQ(h.loads.nranks, 4);
  const std::vector<uint32_t> timed = timedIterations(run->result);
  ASSERT_FALSE(timed.empty());
  EXPECT_EQ(h.loads.iterations, static_cast<int>(timed.size()));
  const std::set<uint32_t> timedSet(timed.begin(), timed.end());
  uint64_t total = 0;
  const Timeline timeline(run->result.events);
  for (const Transfer& x : timeline.transfers()) {
    if (timedSet.count(x.iteration) != 0) total += x.bytes;
  }
  uint64_t summed = 0;
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      const LinkLoad& x = h.loads.at(a, b);
      summed += x.bytes;
      EXPECT_EQ(x.bytesPerSecond > 0, b == (a + 1) % 4) << a << "->" << b;
      EXPECT_GE(x.busy, 0);
      EXPECT_LE(x.busy, 1);
      EXPECT_EQ(x.configuredBytesPerSecond, 0) << "the sample ran unshaped";
    }
  }
  EXPECT_EQ(summed, total);
  EXPECT_FALSE(h.headline.empty());
  EXPECT_NE(h.note.find("in flight"), std::string::npos) << h.note;
}

// A message of `bytes` from `sender` to `receiver` in `iteration`, sent at `t0` and whole at
// the receiver at `t1` (ns); `chunk` tells messages of one link apart.
void addMessage(std::vector<TelemetryEvent>& events, uint32_t iteration, int sender, int receiver,
                uint32_t chunk, uint64_t bytes, int64_t t0, int64_t t1) {
  TelemetryEvent e;
  e.runId = 1;
  e.iteration = iteration;
  e.chunk = chunk;
  e.bytes = bytes;
  e.provenance = uint64_t{1} << sender;
  e.rank = sender;
  e.peer = receiver;
  e.kind = EventKind::SendStart;
  e.tNs = t0;
  events.push_back(e);
  e.rank = receiver;
  e.peer = sender;
  e.kind = EventKind::RecvEnd;
  e.tNs = t1;
  events.push_back(e);
}

// Iteration 1 of a 3-rank ring, 10 us long, on 500 MB/s ports with link 1 -> 2 shaped to
// 100 MB/s (0.1 byte per ns): 1 -> 2 carries 970 bytes in two messages that overlap (the second
// queued behind the first) over 9.7 us, so it is busy 97% of the time at 100 MB/s; 0 -> 1 is
// busy 2 us (20%) at 400 MB/s; 2 -> 0 1 us (10%) at 500 MB/s. Iteration 0 (a warm-up) moves
// a large message on 2 -> 0 that must not count.
std::vector<TelemetryEvent> slowLinkRing() {
  std::vector<TelemetryEvent> ev;
  addMessage(ev, 0, 2, 0, 0, 1'000'000, -50'000, -10'000);
  addMessage(ev, 1, 1, 2, 0, 500, 0, 5'000);
  addMessage(ev, 1, 1, 2, 1, 470, 4'000, 9'700);
  addMessage(ev, 1, 0, 1, 0, 400, 0, 1'000);
  addMessage(ev, 1, 0, 1, 1, 400, 5'000, 6'000);
  addMessage(ev, 1, 2, 0, 0, 500, 6'000, 7'000);
  TelemetryEvent end;
  end.runId = 1;
  end.iteration = 1;
  end.rank = 0;
  end.kind = EventKind::IterationEnd;
  end.tNs = 10'000;
  ev.push_back(end);
  return ev;
}

LinkShaping slowLinkShaping() {
  LinkShaping s;
  s.portBytesPerSecond = 500e6;
  s.linkBytesPerSecond[{1, 2}] = 100e6;
  return s;
}

TEST(LinkLoads, BusyShareThroughputAndPaceOfEachLinkFromKnownMessages) {
  const LinkLoads l = linkLoads(slowLinkRing(), 3, slowLinkShaping(), {1});
  ASSERT_EQ(l.nranks, 3);
  EXPECT_EQ(l.iterations, 1);
  EXPECT_EQ(l.iterationNs, 10'000);
  const LinkLoad& slow = l.at(1, 2);
  EXPECT_EQ(slow.bytes, 970u);
  EXPECT_EQ(slow.busyNs, 9'700);
  EXPECT_DOUBLE_EQ(slow.busy, 0.97);
  EXPECT_DOUBLE_EQ(slow.bytesPerSecond, 100e6);
  EXPECT_DOUBLE_EQ(slow.configuredBytesPerSecond, 100e6);
  EXPECT_DOUBLE_EQ(slow.pace, 1.0);
  const LinkLoad& fast = l.at(0, 1);
  EXPECT_EQ(fast.busyNs, 2'000);
  EXPECT_DOUBLE_EQ(fast.busy, 0.2);
  EXPECT_DOUBLE_EQ(fast.bytesPerSecond, 400e6);
  EXPECT_DOUBLE_EQ(fast.configuredBytesPerSecond, 500e6);
  EXPECT_DOUBLE_EQ(fast.pace, 0.8);
  EXPECT_EQ(l.at(2, 0).bytes, 500u) << "the warm-up's message is not counted";
  EXPECT_DOUBLE_EQ(l.at(2, 0).busy, 0.1);
  EXPECT_EQ(l.at(0, 2).bytes, 0u);
  EXPECT_EQ(l.at(0, 2).busy, 0);
  EXPECT_EQ(l.busiestSender, 1);
  EXPECT_EQ(l.busiestReceiver, 2);
  EXPECT_DOUBLE_EQ(l.medianBusy, 0.2);
  EXPECT_TRUE(l.bottleneck);
  EXPECT_TRUE(l.shaped());
}

TEST(LinkLoads, EveryIterationCountsWhenNoneIsNamed) {
  const LinkLoads l = linkLoads(slowLinkRing(), 3, {});
  EXPECT_EQ(l.iterations, 2);
  EXPECT_EQ(l.at(2, 0).bytes, 1'000'500u);
  EXPECT_FALSE(l.shaped());
  EXPECT_EQ(l.at(1, 2).pace, 0) << "no pace without a configured rate";
}

// The run's rank count is trusted: an event of a rank or peer past it (a corrupt recording's)
// is left out, and never makes the matrix grow.
TEST(LinkLoads, EventsOfRanksOutsideTheRunAreLeftOut) {
  std::vector<TelemetryEvent> ev = slowLinkRing();
  addMessage(ev, 1, 1, 7, 0, 999, 0, 90'000);
  TelemetryEvent wild;
  wild.iteration = 1;
  wild.rank = std::numeric_limits<int32_t>::max();
  wild.kind = EventKind::StepEnd;
  wild.tNs = 500'000;
  ev.push_back(wild);
  const LinkLoads l = linkLoads(ev, 3, slowLinkShaping(), {1});
  ASSERT_EQ(l.nranks, 3);
  EXPECT_EQ(l.links.size(), 9u);
  EXPECT_EQ(l.iterationNs, 10'000) << "the events left out do not stretch the iteration";
  EXPECT_EQ(l.at(1, 2).bytes, 970u);
  EXPECT_DOUBLE_EQ(l.at(1, 2).busy, 0.97);
  const LinkLoads all = linkLoads(ev, 3, {});
  EXPECT_EQ(all.nranks, 3);
  EXPECT_EQ(all.at(2, 0).bytes, 1'000'500u);
}

// Links busy about alike: the busiest is named, but not as a bottleneck.
TEST(LinkLoads, ABalancedRunHasNoSingleBottleneck) {
  std::vector<TelemetryEvent> ev;
  addMessage(ev, 0, 0, 1, 0, 1000, 0, 5'000);
  addMessage(ev, 0, 1, 2, 0, 1000, 0, 5'500);
  addMessage(ev, 0, 2, 0, 0, 1000, 1'000, 6'000);
  addMessage(ev, 0, 0, 1, 1, 100, 9'000, 10'000);
  const LinkLoads l = linkLoads(ev, 3, {});
  EXPECT_EQ(l.busiestSender, 0);
  EXPECT_EQ(l.busiestReceiver, 1);
  EXPECT_DOUBLE_EQ(l.at(0, 1).busy, 0.6);
  EXPECT_FALSE(l.bottleneck);
  SweepRow row;
  row.result.nranks = 3;
  row.result.events = ev;
  const HeatMapData h = linkHeatMap(row);
  EXPECT_EQ(h.headline.rfind("no single bottleneck", 0), 0u) << h.headline;
}

// The heat map of a run with a slow link names it as the bottleneck, with its busy share and
// its pace against the rate it was shaped to, from the run's request and timed iterations.
TEST(ChartsData, HeatMapNamesTheSlowLinkAsTheBottleneck) {
  SweepRow row;
  row.sizeBytes = 4 << 20;
  row.result.nranks = 3;
  row.result.request.algorithm = "ring";
  row.result.request.shaping = slowLinkShaping();
  row.result.events = slowLinkRing();
  for (int r = 0; r < 3; ++r) row.result.perRank.push_back({r, 1, 10'000, 0});
  const HeatMapData h = linkHeatMap(row);
  EXPECT_TRUE(h.loads.bottleneck);
  EXPECT_EQ(h.loads.iterations, 1);
  EXPECT_EQ(h.headline.rfind("bottleneck: 1\u21922, busy 97%", 0), 0u) << h.headline;
  EXPECT_NE(h.headline.find("100% of its 100 MB/s"), std::string::npos) << h.headline;
  EXPECT_NE(h.headline.find("; its own rate holds the run back"), std::string::npos) << h.headline;
  EXPECT_NE(h.headline.find("median link is busy 20%"), std::string::npos) << h.headline;
  EXPECT_NE(h.note.find("pace"), std::string::npos) << h.note;
  EXPECT_EQ(h.note.find("Over 100%"), std::string::npos) << h.note;
  // The same messages on a link shaped to 500 MB/s: busy as long, at a fifth of its rate, so
  // the time goes to waiting at its ends, not to the link's rate.
  row.result.request.shaping.linkBytesPerSecond.clear();
  const HeatMapData waiting = linkHeatMap(row);
  EXPECT_TRUE(waiting.loads.bottleneck);
  EXPECT_NE(waiting.headline.find("20% of its 500 MB/s"), std::string::npos) << waiting.headline;
  EXPECT_NE(waiting.headline.find("far below its rate: it waits"), std::string::npos)
      << waiting.headline;
  // Shaped to 50 MB/s, link 1 -> 2 moved its bytes at 100 MB/s: the note says the shaping did
  // not hold it.
  row.result.request.shaping.linkBytesPerSecond[{1, 2}] = 50e6;
  const HeatMapData fast = linkHeatMap(row);
  EXPECT_DOUBLE_EQ(fast.loads.at(1, 2).pace, 2.0);
  EXPECT_NE(fast.note.find("Over 100% (1\u21922)"), std::string::npos) << fast.note;
}

TEST(ChartsData, SubtitleNamesRanksAlgorithmSliceAndHost) {
  BenchConfig c;
  c.algorithms = {"ring", "tree"};
  c.sliceSizes = {uint64_t{64} << 10};
  std::vector<WorkerInfo> w(3);
  for (WorkerInfo& x : w) x.host = "lab-host";
  const std::string s = sessionSubtitle(c, w);
  for (const char* part : {"3 ranks", "ring, tree", "slice 64K", "lab-host"}) {
    EXPECT_NE(s.find(part), std::string::npos) << part << " in " << s;
  }
}

// The switch's helper worker is no rank: alone, its runs have one rank fewer than workers; beside
// other algorithms the subtitle counts workers.
TEST(ChartsData, SubtitleCountsTheSwitchApartFromTheRanks) {
  BenchConfig c;
  c.algorithms = {"switch"};
  std::vector<WorkerInfo> w(5);
  EXPECT_NE(sessionSubtitle(c, w).find("4 ranks + the switch"), std::string::npos)
      << sessionSubtitle(c, w);
  c.algorithms = {"ring", "switch"};
  EXPECT_NE(sessionSubtitle(c, w).find("5 workers"), std::string::npos) << sessionSubtitle(c, w);
}

// Before a run the charts describe the setup Run would measure, never a default one.
TEST(ChartsData, NoRunSubtitleSaysSoAndFollowsTheSetup) {
  EXPECT_EQ(noRunSubtitle(), "No run yet");
  BenchConfig c;
  c.workers = 3;
  c.expect = 2;
  c.algorithms = {"tree"};
  c.minBytes = 4 << 10;
  c.maxBytes = 16 << 20;
  c.sliceSizes = {uint64_t{256} << 10};
  c.inflights = {2};
  const std::string s = noRunSubtitle(&c);
  EXPECT_EQ(s.rfind("No run yet", 0), 0u) << s;
  for (const char* part : {"5 ranks", "tree", "4K to 16M", "slice 256K", "2 in flight"}) {
    EXPECT_NE(s.find(part), std::string::npos) << part << " in " << s;
  }
  EXPECT_LT(s.find("4K to 16M"), s.find("slice 256K")) << "sizes before the slice: " << s;
  c.sliceSizes = {uint64_t{64} << 10};
  c.minBytes = c.maxBytes = 1 << 20;
  const std::string t = noRunSubtitle(&c);
  EXPECT_NE(t.find("slice 64K"), std::string::npos) << t;
  EXPECT_EQ(t.find("256K"), std::string::npos) << t;
  // Ring's window of slices, only where a ring runs.
  c.window = 8;
  EXPECT_EQ(noRunSubtitle(&c).find("window"), std::string::npos) << noRunSubtitle(&c);
  c.algorithms = {"tree", "ring"};
  EXPECT_NE(noRunSubtitle(&c).find("ring window 8"), std::string::npos) << noRunSubtitle(&c);
  EXPECT_NE(t.find(" 1M "), std::string::npos) << t;
}

TEST(TimeAxis, PlainNumbersNeverUseAnExponent) {
  EXPECT_EQ(plainNumber(0, 2), "0");
  EXPECT_EQ(plainNumber(-1e-12, 0.5), "0");
  EXPECT_EQ(plainNumber(7.5, 2.5), "7.5");
  EXPECT_EQ(plainNumber(0.25, 0.25), "0.25");
  EXPECT_EQ(plainNumber(12000, 2000), "12000");
  EXPECT_EQ(plainNumber(50000, 10000), "50000");
  EXPECT_EQ(plainNumber(0.0004, 0.0002), "0.0004");
}

TEST(TimeAxis, TheUnitFollowsTheSpanAsTimeLabelsDo) {
  EXPECT_EQ(timeUnitFor(800).name, "\u00B5s");
  EXPECT_EQ(timeUnitFor(999).name, "\u00B5s");
  EXPECT_EQ(timeUnitFor(1'000).name, "ms");
  EXPECT_EQ(timeUnitFor(999'000).name, "ms");
  EXPECT_EQ(timeUnitFor(20'000'000).name, "s");
  // A step of 6.46 ms stands on an axis in ms, not on one that reads "6000 µs".
  const std::string bar = timeLabel(6'460);
  EXPECT_EQ(bar, "6.46 ms");
  for (const AxisTick& t : timeTicks(6'460 * 1.08, 5)) {
    if (t.value > 0) {
      EXPECT_NE(t.label.find(" ms"), std::string::npos) << t.label;
    }
  }
}

std::vector<std::string> labels(const std::vector<AxisTick>& ticks) {
  std::vector<std::string> out;
  for (const AxisTick& t : ticks) out.push_back(t.label);
  return out;
}

TEST(TimeAxis, TicksOfATimelineReadInMicrosecondsMillisecondsOrSeconds) {
  // A 4M ring's iteration: about 8 ms.
  EXPECT_EQ(labels(timeTicks(8'000, 4)),
            (std::vector<std::string>{"0", "2 ms", "4 ms", "6 ms", "8 ms"}));
  EXPECT_EQ(labels(timeTicks(800, 4)), (std::vector<std::string>{"0", "200 \u00B5s", "400 \u00B5s",
                                                                 "600 \u00B5s", "800 \u00B5s"}));
  // A 64M ring on 500 MB/s ports: about 50 ms, where the old axis read 1e+04 and 5e+04.
  const std::vector<AxisTick> ms = timeTicks(52'000, 5);
  EXPECT_EQ(labels(ms), (std::vector<std::string>{"0", "20 ms", "40 ms"}));
  EXPECT_DOUBLE_EQ(ms.at(1).value, 20'000);
  EXPECT_EQ(labels(timeTicks(25'000'000, 5)),
            (std::vector<std::string>{"0", "5 s", "10 s", "15 s", "20 s", "25 s"}));
  EXPECT_EQ(labels(timeTicks(3, 6)),
            (std::vector<std::string>{"0", "0.5 \u00B5s", "1 \u00B5s", "1.5 \u00B5s", "2 \u00B5s",
                                      "2.5 \u00B5s", "3 \u00B5s"}));
  EXPECT_EQ(labels(timeTicks(25'000, 10)).at(1), "2.5 ms");
  EXPECT_TRUE(timeTicks(0, 5).empty());
  // No span from a nanosecond to a day is labelled with an exponent, and ticks stay in it.
  for (double span = 1e-3; span < 1e11; span *= 3.7) {
    const std::vector<AxisTick> ticks = timeTicks(span, 8);
    ASSERT_GE(ticks.size(), 2u) << span;
    EXPECT_LE(ticks.size(), 17u) << span;
    for (const AxisTick& t : ticks) {
      EXPECT_EQ(t.label.find('e'), std::string::npos) << t.label << " for a span of " << span;
      EXPECT_LE(t.value, span * (1 + 1e-9));
    }
  }
}

TEST(TimeAxis, TimeLabelsPickTheirOwnUnit) {
  EXPECT_EQ(timeLabel(250), "250 \u00B5s");
  EXPECT_EQ(timeLabel(2'500), "2.5 ms");
  EXPECT_EQ(timeLabel(100'000), "100 ms");
  EXPECT_EQ(timeLabel(1'500'000), "1.5 s");
  EXPECT_EQ(timeLabel(0.001), "0.001 \u00B5s");
  EXPECT_EQ(timeLabel(1e10), "10000 s");
}

TEST(TimeAxis, ATimeThatIsNotFiniteHasNoValue) {
  EXPECT_EQ(timeLabel(std::numeric_limits<double>::infinity()), kNoValue);
  EXPECT_EQ(timeLabel(-std::numeric_limits<double>::infinity()), kNoValue);
  EXPECT_EQ(timeLabel(std::nan("")), kNoValue);
  EXPECT_EQ(timeLabel(0), "0");
}

TEST(Units, RatesInDecimalUnitsAndNoValueWithoutOne) {
  EXPECT_EQ(rateLabel(2.5e9), "2.5 GB/s");
  EXPECT_EQ(rateLabel(1.25e9), "1.25 GB/s");
  EXPECT_EQ(rateLabel(200e6), "200 MB/s");
  EXPECT_EQ(rateLabel(0), kNoValue);
  EXPECT_EQ(rateLabel(-1), kNoValue);
  EXPECT_EQ(rateLabel(std::nan("")), kNoValue);
  EXPECT_EQ(rateLabel(std::numeric_limits<double>::infinity()), kNoValue);
}

// The spread chart's log axis and the bandwidth axes: times in their unit, no exponents.
TEST(TimeAxis, SpreadAndBandwidthAxesHaveNoExponents) {
  std::vector<ChartRow> rows;
  for (const double us : {3.0, 40'000.0, 2e7}) {
    rows.push_back(chartRow(madeRow("ring", 1 << 20, 1 << 18, us, std::nan(""))));
  }
  const XYChartData spread = iterationSpreadChart(rows);
  ASSERT_FALSE(spread.y.ticks.empty());
  for (const AxisTick& t : spread.y.ticks) {
    EXPECT_EQ(t.label.find('e'), std::string::npos) << t.label;
  }
  std::vector<ChartRow> slow = {chartRow(madeRow("ring", 4096, 4096, 5e8, std::nan("")))};
  const XYChartData bw = bandwidthVsSize(slow, true);
  for (const AxisTick& t : bw.y.ticks) EXPECT_EQ(t.label.find('e'), std::string::npos) << t.label;
}

}  // namespace
}  // namespace arl::ui
