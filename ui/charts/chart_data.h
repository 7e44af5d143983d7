// What the charts show, as plain data: series of points, axes with their ranges, ticks and
// titles, timeline bars and a link matrix, computed from a session's rows and a run's
// Timeline. No Qt here, so the figures are unit-testable and survive a move from Qt Charts
// (deprecated upstream) to Qt Graphs: chart_adapter.h turns this data into Qt objects.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "charts/link_load.h"
#include "exec/timeline.h"
#include "export/export.h"
#include "style/units.h"

namespace arl::ui {

// The charts of a session, in tab order.
enum class ChartKind : uint8_t {
  BusbwVsSize,
  AlgbwVsSize,
  BusbwVsSlice,
  StepTimeline,
  LinkHeatMap,
  IterationSpread,
};
inline constexpr int kChartKinds = 6;

// "busbw-vs-size", ...: the chart's file name stem in exports.
std::string chartSlug(ChartKind k);
// "busbw vs size", ...: the tab's title.
std::string chartTabTitle(ChartKind k);

struct ChartPoint {
  double x = 0;
  double y = 0;
};

struct AxisTick {
  double value = 0;
  std::string label;
};

// A linear axis; logarithmic quantities are plotted as their logarithm with ticks labelled
// in the original unit (x = log2 of the size, labelled 4K, 64K, 1M).
struct ChartAxis {
  std::string title;
  std::string screenTitle;  // shorter, for the window's charts (the tooltip says the rest)
  double min = 0;
  double max = 1;
  std::vector<AxisTick> ticks;  // empty: evenly spaced value ticks
  std::string tooltip;
  bool log2Bytes = false;  // the values are log2 of a size in bytes (tooltips write "4K")
};

// How a series is drawn: a measured line with markers, the model's dashed line, the lower or
// upper edge of a band (the two edges of one band share `band`), or markers alone.
enum class SeriesStyle : uint8_t { Measured, Predicted, BandLow, BandHigh, Markers };

// The colour a series takes: its algorithm's (style/palette.h), or place `index` of `count`
// on a sequential ramp (one message size of several).
struct SeriesColor {
  std::string algorithm;  // non-empty: algorithmColor(algorithm)
  int index = 0;
  int count = 1;
  // One of `variants` series of the same algorithm (several slice sizes or slices in
  // flight): shades of the algorithm's hue, from dark (0) to light.
  int variant = 0;
  int variants = 1;
};

struct ChartSeries {
  std::string key;   // stable across updates: a live chart replaces the points of this key
  std::string name;  // the legend's text
  SeriesStyle style = SeriesStyle::Measured;
  SeriesColor color;
  std::string band;  // BandLow/BandHigh: the band both edges belong to
  std::vector<ChartPoint> points;
  bool inLegend = true;  // false: the chart's note explains it
};

struct XYChartData {
  std::string title;
  std::string subtitle;  // the configuration: ranks, algorithms, slice, hosts
  ChartAxis x;
  ChartAxis y;
  std::vector<ChartSeries> series;
  std::string note;  // shown under the chart: what is measured, what is modelled
};

// The rows of a session as the charts read them (telemetry is not needed and not kept).
// The iteration time the bandwidth charts (busbw and algbw against size, busbw against slice)
// measure a run by: nccl-tests' mean over the timed iterations (the default, and what bench's
// table and the CSV and JSON report), or the median iteration, p50, which one slow iteration
// of a short run does not move and which the cost model's prediction is calibrated to.
enum class BandwidthOf : uint8_t { Mean, Median };

// "mean" or "median" (the --bandwidth flags' values); nullopt for anything else.
std::optional<BandwidthOf> parseBandwidthOf(std::string_view s);

struct ChartRow {
  uint64_t sizeBytes = 0;
  std::string algorithm;
  uint64_t sliceBytes = 0;
  int inflight = 0;
  int nranks = 0;
  double timeUs = 0;
  double predictedUs = 0;  // NaN or <= 0: no prediction
  double algbwGBps = 0;
  double busbwGBps = 0;
  double busbwFactor = 1;
  IterationSpread spread;
  bool ok = true;  // the run finished; failed runs are not plotted
};

ChartRow chartRow(const SweepRow& row);

// The configuration line of a session: "4 ranks · ring · allreduce float sum · slice 1M ·
// 4 in flight · host1". Without workers, the ranks are the configuration's local and
// remote workers.
std::string sessionSubtitle(const BenchConfig& config, const std::vector<WorkerInfo>& workers);

// The line the charts show before a session: "No run yet", or with the setup that Run would
// measure, "No run yet · setup: 4 ranks · ring · allreduce float sum · 4K to 16M · slice 256K ·
// 4 in flight".
std::string noRunSubtitle(const BenchConfig* setup = nullptr);

// The smallest of 1, 2, 2.5 and 5 times a power of ten at or above span / n: a round step for
// about n ticks over [0, span] (1 for a span that is not positive).
double niceStep(double span, int n);

// Ticks over [0, spanUs] at a round step (about `n` of them) in the span's unit
// (timeUnitFor, the unit timeLabel writes a time of that size in), labelled "0", "2 ms", ...
std::vector<AxisTick> timeTicks(double spanUs, int n);

// "4K", "64K", "1M": a size in bytes as nccl-tests' users read it, rounded to a power of two.
std::string sizeLabel(double bytes);

// The x axis of log2 sizes over [lo, hi] bytes, half a power of two of margin either side,
// ticked at powers of two (log2SizeTicks).
ChartAxis log2SizeAxis(std::string title, uint64_t lo, uint64_t hi);

// A linear axis over at least [lo, hi] from one round tick to another, about six ticks
// labelled without exponent ("0", "2.5", "5").
ChartAxis linearAxis(const std::string& title, double lo, double hi);

// Size ticks at every power of two in [minLog2, maxLog2] (every second or fourth one when
// there are many), labelled 4K, 64K, 1M.
std::vector<AxisTick> log2SizeTicks(double minLog2, double maxLog2);

// busbw (or algbw) against log2 of the size, one measured series per algorithm with the
// model's prediction (predicted bandwidth = size / predicted time, times the busbw factor)
// dashed beside it. With several slice sizes or slices in flight in a session, each
// combination is a series of its own.
// Measured by `of` (a row without a median is left out by Median).
XYChartData bandwidthVsSize(const std::vector<ChartRow>& rows, bool busbw,
                            BandwidthOf of = BandwidthOf::Mean);

// busbw against log2 of the slice size, one series per message size (and algorithm), measured
// by `of`.
XYChartData busbwVsSlice(const std::vector<ChartRow>& rows, BandwidthOf of = BandwidthOf::Mean);

// The spread of iteration times per size: for each algorithm a band from p50 to p99, the p50
// line and the largest iteration as markers; y is log10 of microseconds.
XYChartData iterationSpreadChart(const std::vector<ChartRow>& rows);

// One bar of the per-step timeline.
struct TimelineBar {
  int lane = 0;
  int rank = 0;
  Activity activity = Activity::Send;
  int peer = -1;
  double startUs = 0;  // from the iteration's start
  double endUs = 0;
};

// A rank finished a step at tUs.
struct StepEndMark {
  int rank = 0;
  uint32_t step = 0;
  double tUs = 0;
};

// Where a rank computed while its communication was in flight (a training step's overlap).
struct OverlapSpan {
  int rank = 0;
  double startUs = 0;
  double endUs = 0;
};

struct TimelineData {
  std::string title;
  std::string subtitle;
  int nranks = 0;
  uint32_t iteration = 0;
  std::vector<std::string> lanes;      // "rank 0 send", "rank 0 recv", "rank 0 reduce", ...
  std::vector<std::string> laneNames;  // each rank's lanes: "send", "recv", "reduce"
  std::vector<int> laneRank;
  std::vector<TimelineBar> bars;
  std::vector<StepEndMark> stepEnds;  // every rank's step ends
  // NCCL's run: the lanes are NCCL's (collective, kernel channels, proxy steps), from what
  // NCCL's profiler plugin reported, not the lab's send, recv and reduce.
  bool nccl = false;
  // A training step: a compute lane (forward, backward, optimizer) above the buckets'
  // send, recv and reduce lanes, and where compute and communication overlapped.
  bool training = false;
  std::vector<OverlapSpan> overlaps;
  double endUs = 0;
  std::string note;
};

// The per-step timeline of one iteration of a run: three lanes per rank (send, recv,
// reduce; for a run of NCCL's: NCCL collective, NCCL kernel, NCCL proxy; for a training run,
// whose iteration is a training step, compute above the three), times in microseconds
// from the iteration's first event. `iteration` < 0 picks the timed iteration whose slowest-rank
// time is the median.
TimelineData stepTimeline(const SweepRow& row, int iteration = -1);

// The link heat map of one run: senders down, receivers across, each directed link's load
// (link_load.h) over the run's timed iterations. The colour is the link's busy share; its cell
// says that share, its throughput while busy and, on a shaped network, its pace against its
// configured rate; the busiest link is named in the headline, as the bottleneck when it stands
// out.
struct HeatMapData {
  std::string title;
  std::string subtitle;
  LinkLoads loads;
  // "bottleneck: 1→2, busy 97% ..." or "no single bottleneck: ..."; empty without traffic.
  std::string headline;
  std::string note;  // what the colour and the figures mean
};

HeatMapData linkHeatMap(const SweepRow& row);

// The row of a session whose timeline and heat map are shown by default: the last with
// telemetry events, or nullptr.
const SweepRow* defaultTimelineRow(const std::vector<SweepRow>& rows);

// Every chart of a session, with the session's configuration as each one's subtitle.
struct SessionCharts {
  std::string subtitle;
  // Where the model's parameters came from (BenchReport::modelSource): the size charts' notes
  // name it beside their dashed predictions. Empty: not named.
  std::string modelSource;
  BandwidthOf bandwidthOf = BandwidthOf::Mean;  // what the bandwidth charts measure by
  XYChartData busbw;
  XYChartData algbw;
  XYChartData slice;
  XYChartData spread;
  TimelineData timeline;
  HeatMapData heatMap;

  // The XY chart of `k` (nullptr for the timeline and the heat map).
  const XYChartData* xy(ChartKind k) const;
  XYChartData* xy(ChartKind k) { return const_cast<XYChartData*>(std::as_const(*this).xy(k)); }
};

// The XY charts of `rows`, each with `subtitle`.
void fillXYCharts(SessionCharts& c, const std::vector<ChartRow>& rows);
// The timeline and heat map of `run` (empty ones for nullptr).
void fillRunCharts(SessionCharts& c, const SweepRow* run);

// All charts of a report; the timeline and the heat map show `run`, by default
// defaultTimelineRow(report.rows).
// The bandwidth charts measure by `of`.
SessionCharts sessionCharts(const BenchReport& report, const SweepRow* run = nullptr,
                            BandwidthOf of = BandwidthOf::Mean);

}  // namespace arl::ui
