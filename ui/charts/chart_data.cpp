#include "charts/chart_data.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "model/metrics.h"
#include "schedule/generators.h"

namespace arl::ui {
namespace {

const std::string kDot = " \u00B7 ";

bool hasPrediction(double us) { return std::isfinite(us) && us > 0; }

// What tells the series of one algorithm apart when a session swept more than sizes.
struct Variety {
  bool slices = false;
  bool inflights = false;
};

Variety varietyOf(const std::vector<ChartRow>& rows) {
  std::set<uint64_t> slices;
  std::set<int> inflights;
  for (const ChartRow& r : rows) {
    // A row without a slice (imported from nccl-tests or Inspector) has no pipeline of the
    // lab's to tell apart.
    if (r.sliceBytes == 0) continue;
    slices.insert(r.sliceBytes);
    inflights.insert(r.inflight);
  }
  return {slices.size() > 1, inflights.size() > 1};
}

// The variants of each algorithm's series (slice size x slices in flight), in sorted order.
std::map<std::string, std::vector<std::pair<uint64_t, int>>> variantsOf(
    const std::vector<ChartRow>& rows) {
  std::map<std::string, std::set<std::pair<uint64_t, int>>> sets;
  for (const ChartRow& r : rows) sets[r.algorithm].insert({r.sliceBytes, r.inflight});
  std::map<std::string, std::vector<std::pair<uint64_t, int>>> out;
  for (const auto& [a, set] : sets) out[a].assign(set.begin(), set.end());
  return out;
}

SeriesColor variantColor(const ChartRow& r,
                         const std::map<std::string, std::vector<std::pair<uint64_t, int>>>& all) {
  SeriesColor c{r.algorithm};
  const auto& list = all.at(r.algorithm);
  c.variants = static_cast<int>(list.size());
  c.variant = static_cast<int>(
      std::find(list.begin(), list.end(), std::pair{r.sliceBytes, r.inflight}) - list.begin());
  return c;
}

std::string seriesKey(const ChartRow& r, const Variety& v) {
  std::string k = r.algorithm;
  if (r.sliceBytes == 0) return k;
  if (v.slices) k += " slice " + formatSize(r.sliceBytes);
  if (v.inflights) k += " \u00D7" + std::to_string(r.inflight);
  return k;
}

void sortPoints(std::vector<ChartPoint>& pts) {
  std::stable_sort(pts.begin(), pts.end(),
                   [](const ChartPoint& a, const ChartPoint& b) { return a.x < b.x; });
}

// A linear axis from 0 with five or six ticks at round values.
ChartAxis bandwidthAxis(const std::string& title, double maxValue) {
  return linearAxis(title, 0, maxValue > 0 ? maxValue * 1.05 : 1);
}

// A log10 time axis over [lo, hi] microseconds, ticks at 1-2-5 or decades.
ChartAxis log10TimeAxis(double lo, double hi) {
  ChartAxis a;
  a.title = "iteration time (slowest rank)";
  const double l = std::floor(std::log10(std::max(lo, 1e-3)));
  const double h = std::ceil(std::log10(std::max(hi, lo * 1.0001)));
  a.min = l;
  a.max = std::max(h, l + 1);
  const bool fine = a.max - a.min <= 2;
  for (double d = a.min; d <= a.max + 1e-9; d += 1) {
    for (const double m : {1.0, 2.0, 5.0}) {
      if (m != 1.0 && !fine) continue;
      const double v = d + std::log10(m);
      if (v > a.max + 1e-9) break;
      a.ticks.push_back({v, timeLabel(std::pow(10.0, v))});
    }
  }
  return a;
}

}  // namespace

std::string chartSlug(ChartKind k) {
  switch (k) {
    case ChartKind::BusbwVsSize: return "busbw-vs-size";
    case ChartKind::AlgbwVsSize: return "algbw-vs-size";
    case ChartKind::BusbwVsSlice: return "busbw-vs-slice";
    case ChartKind::StepTimeline: return "step-timeline";
    case ChartKind::LinkHeatMap: return "link-heatmap";
    case ChartKind::IterationSpread: return "iteration-spread";
  }
  return "chart";
}

std::string chartTabTitle(ChartKind k) {
  switch (k) {
    case ChartKind::BusbwVsSize: return "busbw vs size";
    case ChartKind::AlgbwVsSize: return "algbw vs size";
    case ChartKind::BusbwVsSlice: return "busbw vs slice";
    case ChartKind::StepTimeline: return "per-step timeline";
    case ChartKind::LinkHeatMap: return "link heat map";
    case ChartKind::IterationSpread: return "iteration spread";
  }
  return "chart";
}

std::optional<BandwidthOf> parseBandwidthOf(std::string_view s) {
  if (s == "mean") return BandwidthOf::Mean;
  if (s == "median") return BandwidthOf::Median;
  return std::nullopt;
}

namespace {

// `rows` with their bandwidths from the median iteration instead of the mean (algbw = S /
// p50, busbw = algbw times the busbw factor, as computeMetrics() does from the mean); a row
// with no median is not plotted. Mean: `rows` as they are.
std::vector<ChartRow> measuredBy(std::vector<ChartRow> rows, BandwidthOf of) {
  if (of == BandwidthOf::Mean) return rows;
  for (ChartRow& r : rows) {
    if (!(r.spread.p50Us > 0)) {
      r.ok = false;
      continue;
    }
    r.timeUs = r.spread.p50Us;
    r.algbwGBps = static_cast<double>(r.sizeBytes) / r.spread.p50Us / 1e3;
    r.busbwGBps = r.algbwGBps * r.busbwFactor;
  }
  return rows;
}

}  // namespace

ChartRow chartRow(const SweepRow& row) {
  ChartRow c;
  c.sizeBytes = row.sizeBytes;
  c.algorithm = row.result.request.algorithm;
  c.sliceBytes = row.result.request.sliceBytes;
  c.inflight = row.result.request.inflight;
  c.nranks = row.result.nranks;
  c.timeUs = row.metrics.timeUs;
  c.predictedUs = row.predictedUs;
  c.algbwGBps = row.metrics.algbwGBps;
  c.busbwGBps = row.metrics.busbwGBps;
  c.busbwFactor = c.nranks > 0 ? busBwFactor(row.result.request.collective, c.nranks) : 1.0;
  c.spread = row.metrics.spread;
  c.ok = row.result.state == RunState::Done && row.metrics.timeUs > 0;
  return c;
}

namespace {

// The parts of a configuration line, in order: ranks, algorithms, the collective, `sizes` when
// given (a user reads the toolbar so: size, then slice), the slices, slices in flight, hosts.
std::vector<std::string> subtitleParts(const BenchConfig& config,
                                       const std::vector<WorkerInfo>& workers,
                                       const std::string& sizes) {
  const size_t n = workers.empty()
                       ? static_cast<size_t>(std::max(config.workers + config.expect, 0))
                       : workers.size();
  // A helper worker (switch's in-network reducer) is no rank of the collective: alone, the
  // switch's runs have n - 1 ranks; beside other algorithms the count is of workers.
  size_t helpers = 0;
  bool allHelped = !config.algorithms.empty();
  for (const std::string& a : config.algorithms) {
    const auto h = static_cast<size_t>(std::max(helperWorkers(a), 0));
    helpers = std::max(helpers, h);
    allHelped = allHelped && h > 0;
  }
  std::vector<std::string> parts;
  if (helpers > 0 && allHelped && n > helpers) {
    parts.push_back(std::to_string(n - helpers) + " ranks + the switch");
  } else if (helpers > 0) {
    parts.push_back(std::to_string(n) + " workers");
  } else {
    parts.push_back(std::to_string(n) + (n == 1 ? " rank" : " ranks"));
  }
  std::string algos;
  for (const std::string& a : config.algorithms) algos += (algos.empty() ? "" : ", ") + a;
  if (!algos.empty()) parts.push_back(algos);
  parts.push_back(std::string(toString(config.collective)) + " " +
                  std::string(toString(config.dtype)) + " " + std::string(toString(config.op)));
  if (!sizes.empty()) parts.push_back(sizes);
  std::string slices;
  for (const uint64_t b : config.sliceSizes) slices += (slices.empty() ? "" : ", ") + formatSize(b);
  if (!slices.empty()) parts.push_back("slice " + slices);
  std::string inflight;
  for (const int k : config.inflights) {
    inflight += (inflight.empty() ? "" : ", ") + std::to_string(k);
  }
  if (!inflight.empty()) parts.push_back(inflight + " in flight");
  // Ring's window of slices, where a ring runs (others take no window: slicesWindowOf).
  const bool ring =
      std::any_of(config.algorithms.begin(), config.algorithms.end(),
                  [&](const std::string& a) { return slicesWindowOf(a, config.window) > 1; });
  if (ring) parts.push_back("ring window " + std::to_string(config.window));
  std::vector<std::string> hosts;
  for (const WorkerInfo& w : workers) {
    if (std::find(hosts.begin(), hosts.end(), w.host) == hosts.end()) hosts.push_back(w.host);
  }
  std::string hostText;
  for (size_t i = 0; i < hosts.size() && i < 3; ++i) hostText += (i ? ", " : "") + hosts[i];
  if (hosts.size() > 3) hostText += " +" + std::to_string(hosts.size() - 3) + " more";
  if (!hostText.empty()) parts.push_back(hostText);
  return parts;
}

std::string dotted(const std::vector<std::string>& parts) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : kDot) + p;
  return s;
}

}  // namespace

std::string sessionSubtitle(const BenchConfig& config, const std::vector<WorkerInfo>& workers) {
  return dotted(subtitleParts(config, workers, {}));
}

std::string noRunSubtitle(const BenchConfig* setup) {
  std::string s = "No run yet";
  if (setup == nullptr) return s;
  std::string sizes = formatSize(setup->minBytes);
  if (setup->maxBytes != setup->minBytes) sizes += " to " + formatSize(setup->maxBytes);
  return s + kDot + "setup: " + dotted(subtitleParts(*setup, {}, sizes));
}

double niceStep(double span, int n) {
  if (!(span > 0) || n < 1) return 1;
  const double raw = span / n;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 2.5, 5.0}) {
    if (m * p >= raw * (1 - 1e-12)) return m * p;
  }
  return 10 * p;
}

std::vector<AxisTick> timeTicks(double spanUs, int n) {
  std::vector<AxisTick> ticks;
  if (!(spanUs > 0) || !std::isfinite(spanUs)) return ticks;
  const TimeUnit u = timeUnitFor(spanUs);
  const double step = niceStep(spanUs / u.us, n);
  for (int i = 0; i * step <= spanUs / u.us * (1 + 1e-9); ++i) {
    const double v = i * step;
    ticks.push_back({v * u.us, i == 0 ? std::string("0") : plainNumber(v, step) + " " + u.name});
  }
  return ticks;
}

ChartAxis log2SizeAxis(std::string title, uint64_t lo, uint64_t hi) {
  ChartAxis a;
  a.title = std::move(title);
  const double l = std::log2(static_cast<double>(std::max<uint64_t>(lo, 1)));
  const double h = std::log2(static_cast<double>(std::max<uint64_t>(hi, 1)));
  a.min = std::floor(l) - 0.5;
  a.max = std::ceil(h) + 0.5;
  a.ticks = log2SizeTicks(std::floor(l), std::ceil(h));
  a.log2Bytes = true;
  return a;
}

ChartAxis linearAxis(const std::string& title, double lo, double hi) {
  ChartAxis a;
  a.title = title;
  if (!(hi > lo)) hi = lo + 1;
  const double step = niceStep(hi - lo, 6);
  a.min = step * std::floor(lo / step + 1e-9);
  a.max = step * std::ceil(hi / step - 1e-9);
  for (int i = 0; a.min + i * step <= a.max + step * 1e-9; ++i) {
    a.ticks.push_back({a.min + i * step, plainNumber(a.min + i * step, step)});
  }
  return a;
}

std::string sizeLabel(double bytes) {
  const double p = std::round(std::log2(std::max(bytes, 1.0)));
  return formatSize(static_cast<uint64_t>(std::ldexp(1.0, static_cast<int>(p))));
}

std::vector<AxisTick> log2SizeTicks(double minLog2, double maxLog2) {
  const double span = maxLog2 - minLog2;
  const int every = span > 24 ? 4 : (span > 12 ? 2 : 1);
  std::vector<AxisTick> ticks;
  for (int e = static_cast<int>(std::ceil(minLog2)); e <= static_cast<int>(maxLog2); ++e) {
    if (e % every != 0) continue;
    ticks.push_back({static_cast<double>(e), sizeLabel(std::ldexp(1.0, e))});
  }
  return ticks;
}

XYChartData bandwidthVsSize(const std::vector<ChartRow>& measured, bool busbw, BandwidthOf of) {
  const std::vector<ChartRow> rows = measuredBy(measured, of);
  XYChartData d;
  const std::string name = busbw ? "busbw" : "algbw";
  d.title = name + " against message size";
  const Variety v = varietyOf(rows);
  const auto variants = variantsOf(rows);
  std::map<std::string, size_t> index;  // key -> measured series; its prediction follows it
  uint64_t lo = UINT64_MAX, hi = 0;
  double top = 0;
  for (const ChartRow& r : rows) {
    if (!r.ok) continue;
    const std::string key = seriesKey(r, v);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, d.series.size()).first;
      const SeriesColor c = variantColor(r, variants);
      d.series.push_back({key, key + " (measured)", SeriesStyle::Measured, c, {}, {}});
      d.series.push_back({key + " model", key + " (model)", SeriesStyle::Predicted, c, {}, {}});
    }
    const double x = std::log2(static_cast<double>(std::max<uint64_t>(r.sizeBytes, 1)));
    const double y = busbw ? r.busbwGBps : r.algbwGBps;
    d.series[it->second].points.push_back({x, y});
    top = std::max(top, y);
    if (hasPrediction(r.predictedUs)) {
      const double alg = static_cast<double>(r.sizeBytes) / r.predictedUs / 1e3;
      const double py = busbw ? alg * r.busbwFactor : alg;
      d.series[it->second + 1].points.push_back({x, py});
      top = std::max(top, py);
    }
    lo = std::min(lo, r.sizeBytes);
    hi = std::max(hi, r.sizeBytes);
  }
  for (ChartSeries& s : d.series) sortPoints(s.points);
  std::erase_if(d.series, [](const ChartSeries& s) { return s.points.empty(); });
  // Past three series the legend names each once, by its measured line; the note says what
  // the dashed lines of the same colour are, so no name is cut short.
  if (index.size() > 3) {
    for (ChartSeries& s : d.series) {
      if (s.style == SeriesStyle::Predicted) {
        s.inLegend = false;
      } else if (s.style == SeriesStyle::Measured) {
        s.name = s.key;
      }
    }
  }
  d.x = log2SizeAxis("message size (bytes, log\u2082)", lo == UINT64_MAX ? 1024 : lo,
                     hi == 0 ? 1 << 20 : hi);
  d.y = bandwidthAxis(name + " (GB/s, 1 GB = 10\u2079 B)", top);
  d.y.screenTitle = name + " (GB/s)";
  d.y.tooltip = busbw ? "busbw = algbw \u00D7 2(n\u22121)/n for all-reduce ((n\u22121)/n for "
                        "reduce-scatter and all-gather, 1 for reduce and broadcast), as "
                        "nccl-tests reports it: the bandwidth of an equivalent flat fabric "
                        "that the algorithm would saturate, comparable across rank counts "
                        "(1 GB = 10\u2079 B)"
                : of == BandwidthOf::Median
                    ? "algbw = S / time: the message size over the median of the timed "
                      "iterations' times, each the slowest rank's (1 GB = 10\u2079 B)"
                    : "algbw = S / time: the message size over the slowest rank's mean "
                      "iteration time (1 GB = 10\u2079 B)";
  d.note =
      std::string(of == BandwidthOf::Median ? "Solid: measured (the median iteration, p50)."
                                            : "Solid: measured (mean over timed iterations).") +
      " Dashed: the cost model's prediction, not a measurement.";
  return d;
}

XYChartData busbwVsSlice(const std::vector<ChartRow>& measured, BandwidthOf of) {
  const std::vector<ChartRow> rows = measuredBy(measured, of);
  XYChartData d;
  d.title = "busbw against slice size";
  std::set<uint64_t> sizes;
  std::set<std::string> algorithms;
  for (const ChartRow& r : rows) {
    if (!r.ok) continue;
    sizes.insert(r.sizeBytes);
    algorithms.insert(r.algorithm);
  }
  const std::vector<uint64_t> sizeList(sizes.begin(), sizes.end());
  const bool inflights = varietyOf(rows).inflights;
  std::map<std::string, size_t> index;
  uint64_t lo = UINT64_MAX, hi = 0;
  double top = 0;
  for (const ChartRow& r : rows) {
    if (!r.ok || r.sliceBytes == 0) continue;
    std::string key = formatSize(r.sizeBytes);
    if (algorithms.size() > 1) key = r.algorithm + " " + key;
    if (inflights) key += " \u00D7" + std::to_string(r.inflight);
    auto it = index.find(key);
    if (it == index.end()) {
      const int pos = static_cast<int>(
          std::lower_bound(sizeList.begin(), sizeList.end(), r.sizeBytes) - sizeList.begin());
      SeriesColor c{algorithms.size() > 1 ? r.algorithm : std::string(), pos,
                    static_cast<int>(sizeList.size())};
      it = index.emplace(key, d.series.size()).first;
      d.series.push_back({key, "message " + key, SeriesStyle::Measured, c, {}, {}});
    }
    const double x = std::log2(static_cast<double>(r.sliceBytes));
    d.series[it->second].points.push_back({x, r.busbwGBps});
    top = std::max(top, r.busbwGBps);
    lo = std::min(lo, r.sliceBytes);
    hi = std::max(hi, r.sliceBytes);
  }
  for (ChartSeries& s : d.series) sortPoints(s.points);
  d.x = log2SizeAxis("slice size (bytes, log\u2082)", lo == UINT64_MAX ? 4096 : lo,
                     hi == 0 ? 1 << 20 : hi);
  d.y = bandwidthAxis("busbw (GB/s, 1 GB = 10\u2079 B)", top);
  d.y.screenTitle = "busbw (GB/s)";
  d.note = hi == lo ? "One slice size in this session: sweep slice sizes (bench --slice "
                      "16K,64K,256K,1M) to see where slices get too small or too large."
                    : "Too small a slice pays the per-message cost too often; too large a "
                      "slice leaves the pipeline too short.";
  if (of == BandwidthOf::Median) d.note += " Measured by the median iteration (p50).";
  return d;
}

XYChartData iterationSpreadChart(const std::vector<ChartRow>& rows) {
  XYChartData d;
  d.title = "Spread of iteration times per size";
  const Variety v = varietyOf(rows);
  const auto variants = variantsOf(rows);
  std::map<std::string, size_t> index;
  uint64_t lo = UINT64_MAX, hi = 0;
  double tmin = 1e300, tmax = 0;
  for (const ChartRow& r : rows) {
    const IterationSpread& s = r.spread;
    if (!r.ok || !(s.p50Us > 0) || !(s.maxUs > 0)) continue;
    const std::string key = seriesKey(r, v);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, d.series.size()).first;
      const SeriesColor c = variantColor(r, variants);
      d.series.push_back({key + " p50", key + " p50\u2013p99", SeriesStyle::BandLow, c, key, {}});
      d.series.push_back({key + " p99", key + " p99", SeriesStyle::BandHigh, c, key, {}});
      d.series.push_back({key + " median", key + " p50", SeriesStyle::Measured, c, {}, {}, false});
      d.series.push_back({key + " max", key + " max", SeriesStyle::Markers, c, {}, {}, false});
    }
    const double x = std::log2(static_cast<double>(std::max<uint64_t>(r.sizeBytes, 1)));
    const size_t i = it->second;
    d.series[i].points.push_back({x, std::log10(s.p50Us)});
    d.series[i + 1].points.push_back({x, std::log10(std::max(s.p99Us, s.p50Us))});
    d.series[i + 2].points.push_back({x, std::log10(s.p50Us)});
    d.series[i + 3].points.push_back({x, std::log10(s.maxUs)});
    lo = std::min(lo, r.sizeBytes);
    hi = std::max(hi, r.sizeBytes);
    tmin = std::min(tmin, s.p50Us);
    tmax = std::max(tmax, s.maxUs);
  }
  for (ChartSeries& s : d.series) sortPoints(s.points);
  d.x = log2SizeAxis("message size (bytes, log\u2082)", lo == UINT64_MAX ? 1024 : lo,
                     hi == 0 ? 1 << 20 : hi);
  d.y = tmax > 0 ? log10TimeAxis(tmin, tmax) : log10TimeAxis(1, 1000);
  d.y.title = "iteration time (slowest rank, log\u2081\u2080)";
  d.y.screenTitle = "iteration time";
  d.y.tooltip = "The slowest rank's time per timed iteration, on a log\u2081\u2080 axis";
  d.note =
      "Band: median (p50) to p99 of the timed iterations, line: the median, squares: "
      "the slowest iteration (nearest-rank percentiles; measured).";
  return d;
}

const XYChartData* SessionCharts::xy(ChartKind k) const {
  switch (k) {
    case ChartKind::BusbwVsSize: return &busbw;
    case ChartKind::AlgbwVsSize: return &algbw;
    case ChartKind::BusbwVsSlice: return &slice;
    case ChartKind::IterationSpread: return &spread;
    default: return nullptr;
  }
}

void fillXYCharts(SessionCharts& c, const std::vector<ChartRow>& rows) {
  c.busbw = bandwidthVsSize(rows, true, c.bandwidthOf);
  c.algbw = bandwidthVsSize(rows, false, c.bandwidthOf);
  c.slice = busbwVsSlice(rows, c.bandwidthOf);
  c.spread = iterationSpreadChart(rows);
  for (XYChartData* d : {&c.busbw, &c.algbw, &c.slice, &c.spread}) d->subtitle = c.subtitle;
  if (c.modelSource.empty()) return;
  for (XYChartData* d : {&c.busbw, &c.algbw}) {
    const bool predicted =
        std::any_of(d->series.begin(), d->series.end(),
                    [](const ChartSeries& s) { return s.style == SeriesStyle::Predicted; });
    if (predicted) d->note += " The model's parameters: " + c.modelSource + ".";
  }
}

void fillRunCharts(SessionCharts& c, const SweepRow* run) {
  if (run != nullptr) {
    c.timeline = stepTimeline(*run);
    c.heatMap = linkHeatMap(*run);
  } else {
    c.timeline = TimelineData{};
    c.timeline.title = "Per-step timeline";
    c.timeline.note = "No run with telemetry to show.";
    c.heatMap = HeatMapData{};
    c.heatMap.title = "Link load";
    c.heatMap.note = c.timeline.note;
  }
  c.timeline.subtitle = c.subtitle;
  c.heatMap.subtitle = c.subtitle;
}

SessionCharts sessionCharts(const BenchReport& report, const SweepRow* run, BandwidthOf of) {
  SessionCharts c;
  c.bandwidthOf = of;
  c.subtitle = sessionSubtitle(report.config, report.workers);
  c.modelSource = report.modelSource;
  std::vector<ChartRow> rows;
  rows.reserve(report.rows.size());
  for (const SweepRow& r : report.rows) rows.push_back(chartRow(r));
  fillXYCharts(c, rows);
  fillRunCharts(c, run != nullptr ? run : defaultTimelineRow(report.rows));
  return c;
}

const SweepRow* defaultTimelineRow(const std::vector<SweepRow>& rows) {
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) {
    if (!it->result.events.empty()) return &*it;
  }
  return nullptr;
}

}  // namespace arl::ui
