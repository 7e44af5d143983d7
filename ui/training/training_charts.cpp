#include "training/training_charts.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "export/train_export.h"

namespace arl::ui {
namespace {

const std::string kDot = " \u00B7 ";

// The distinct values of `f` over the runs, in run order, joined by " / " (empty ones left out).
std::string distinct(const TrainRecord& r, const std::function<std::string(const TrainRun&)>& f) {
  std::vector<std::string> seen;
  for (const TrainRun& run : r.runs) {
    std::string v = f(run);
    if (!v.empty() && std::find(seen.begin(), seen.end(), v) == seen.end()) {
      seen.push_back(std::move(v));
    }
  }
  std::string out;
  for (const std::string& v : seen) out += (out.empty() ? "" : " / ") + v;
  return out;
}

std::string workersOf(const TrainRun& run) { return std::to_string(run.workers); }
std::string networkOf(const TrainRun& run) {
  return run.shaping.empty() ? "unshaped network" : "network " + run.shaping;
}
std::string slowComputeOf(const TrainRun& run) {
  if (run.cfg.slowComputeRank < 0) return {};
  return "rank " + std::to_string(run.cfg.slowComputeRank) + " computes " +
         plainNumber(run.cfg.slowComputeFactor, 0.01) + "\u00D7 slower";
}

// "measured on 4 workers · ring · unshaped network": what every chart names.
std::string measuredOn(const TrainRecord& r) {
  std::string s = "measured on " + distinct(r, workersOf) + " workers" + kDot +
                  distinct(r, [](const TrainRun& x) { return x.algorithm; }) + kDot +
                  distinct(r, networkOf);
  const std::string slow = distinct(r, slowComputeOf);
  if (!slow.empty()) s += kDot + slow;
  return s;
}

ChartSeries runSeries(const TrainRecord& r, size_t i, std::string name) {
  ChartSeries s;
  s.key = "run " + std::to_string(i);
  s.name = std::move(name);
  s.color = SeriesColor{{}, static_cast<int>(i), static_cast<int>(r.runs.size())};
  return s;
}

// The x axis of the steps the runs measured.
ChartAxis stepAxis(const TrainRecord& r) {
  double lo = INFINITY, hi = -INFINITY;
  for (const TrainRun& run : r.runs) {
    for (const TrainStepRow& s : run.steps) {
      lo = std::min(lo, static_cast<double>(s.step));
      hi = std::max(hi, static_cast<double>(s.step));
    }
  }
  if (!(lo <= hi)) lo = hi = 0;
  return linearAxis("step", lo, hi);
}

// A y axis of times from 0 over [0, maxUs], ticks labelled "0", "2 ms", "4 ms".
ChartAxis timeAxis(const std::string& title, double maxUs) {
  ChartAxis a;
  a.title = title;
  a.min = 0;
  a.max = maxUs > 0 && std::isfinite(maxUs) ? maxUs * 1.08 : 1;
  a.ticks = timeTicks(a.max, 5);
  return a;
}

std::string spanLabel(const TrainSpan& s) {
  switch (s.kind) {
    case TrainSpan::Kind::Forward:
    case TrainSpan::Kind::Backward: return "L" + std::to_string(s.index);
    case TrainSpan::Kind::Optimizer: return "opt";
    case TrainSpan::Kind::Reduce:
    case TrainSpan::Kind::Push: return "b" + std::to_string(s.index);
    case TrainSpan::Kind::Pull: return "pull";
  }
  return {};
}

// The steps a bar averages: all but the first (its warm-up), or the only one.
std::pair<size_t, size_t> averagedSteps(const TrainRun& run) {
  return {run.steps.size() > 1 ? 1 : 0, run.steps.size()};
}

}  // namespace

std::string recordSubtitle(const TrainRecord& r) {
  if (r.runs.empty()) return "no runs";
  return measuredOn(r) + kDot + distinct(r, [](const TrainRun& x) { return x.backend; }) + kDot +
         "slice " + distinct(r, [](const TrainRun& x) { return formatSize(x.sliceBytes); }) + kDot +
         distinct(r, [](const TrainRun& x) { return formatLayers(x.cfg.layers); }) + kDot +
         "batch " + distinct(r, [](const TrainRun& x) { return std::to_string(x.cfg.batch); }) +
         kDot + distinct(r, [](const TrainRun& x) {
           return std::string(toString(x.cfg.optimizer)) + " lr " + plainNumber(x.cfg.lr, 1e-6);
         });
}

std::string runSubtitle(const TrainRun& run) {
  std::string sync = run.cfg.sync == SyncMode::AllReduce
                         ? std::to_string(run.bucketFloats.size()) + " buckets of up to " +
                               formatSize(run.cfg.bucketBytes) +
                               (run.cfg.overlap ? ", reduced during the backward pass"
                                                : ", reduced after the backward pass")
                         : std::string(toString(run.cfg.sync)) + " (rank 0 serves)";
  TrainRecord one;
  one.runs = {run};
  return run.label + kDot + sync + kDot + measuredOn(one) + kDot + run.backend;
}

XYChartData lossChart(const TrainRecord& r) {
  XYChartData d;
  d.title = "Loss against step";
  d.subtitle = measuredOn(r) + kDot +
               distinct(r, [](const TrainRun& x) { return formatLayers(x.cfg.layers); }) + kDot +
               "batch " +
               distinct(r, [](const TrainRun& x) { return std::to_string(x.cfg.batch); });
  double top = 0;
  bool diverged = false;
  for (size_t i = 0; i < r.runs.size(); ++i) {
    ChartSeries s = runSeries(r, i, r.runs[i].label);
    for (const TrainStepRow& row : r.runs[i].steps) {
      if (!std::isfinite(row.loss)) {
        diverged = true;
        continue;
      }
      s.points.push_back({static_cast<double>(row.step), row.loss});
      top = std::max(top, row.loss);
    }
    d.series.push_back(std::move(s));
  }
  d.x = stepAxis(r);
  d.y = linearAxis("loss (mean cross-entropy over the ranks)", 0, top > 0 ? top * 1.05 : 1);
  d.y.screenTitle = "loss";
  d.note =
      "Measured: the mean over the ranks of each rank's cross-entropy on its shard of the "
      "batch, before the step's update.";
  if (diverged) d.note += " Steps whose loss is not finite (the run diverged) are left out.";
  return d;
}

StepSplitData stepSplit(const TrainRecord& r) {
  StepSplitData d;
  d.title = "Step time: compute, hidden and exposed communication";
  d.subtitle = measuredOn(r);
  double top = 0;
  for (const TrainRun& run : r.runs) {
    StepSplitBar b;
    b.label = run.label;
    const auto [from, to] = averagedSteps(run);
    double compute = 0, hidden = 0, exposed = 0, step = 0;
    for (size_t i = from; i < to; ++i) {
      compute += run.steps[i].computeUs;
      hidden += run.steps[i].hiddenUs;
      exposed += run.steps[i].exposedUs;
      step += run.steps[i].stepUs;
    }
    const double n = static_cast<double>(std::max<size_t>(to - from, 1));
    b.hiddenUs = hidden / n;
    b.computeAloneUs = std::max(0.0, compute / n - b.hiddenUs);
    b.exposedUs = exposed / n;
    b.stepUs = step / n;
    if (to > from) {
      b.firstStep = run.steps[from].step;
      b.lastStep = run.steps[to - 1].step;
    }
    top = std::max({top, b.stepUs, b.computeAloneUs + b.hiddenUs + b.exposedUs});
    d.bars.push_back(std::move(b));
  }
  d.y = timeAxis("mean step time", top);
  d.note =
      "Measured: the mean of each run's steps after the first (its warm-up). Hidden: a bucket's "
      "collective in flight while the rank computed; exposed: the step beyond its compute. "
      "The three add up to the step.";
  return d;
}

TrainTimelineData sampleStepTimeline(const TrainRun& run) {
  TrainTimelineData d;
  d.psAsync = run.cfg.sync == SyncMode::PsAsync;
  d.nranks = run.workers;
  for (const TrainRankStep& k : run.sampleStep) d.nranks = std::max(d.nranks, k.rank + 1);
  for (int rank = 0; rank < d.nranks; ++rank) {
    d.lanes.push_back("rank " + std::to_string(rank) + " compute");
    d.lanes.push_back("rank " + std::to_string(rank) + " comm");
    d.laneRank.insert(d.laneRank.end(), {rank, rank});
  }
  d.stepEndUs.assign(static_cast<size_t>(d.nranks), 0);
  const uint32_t step = run.sampleStep.empty() ? 0 : run.sampleStep.front().step;
  d.title = "Sample step " + std::to_string(step) + " on every rank: " + run.label;
  d.subtitle = runSubtitle(run);
  for (const TrainRankStep& k : run.sampleStep) {
    if (k.rank < 0) continue;
    const double end = static_cast<double>(k.stepNs) / 1e3;
    d.stepEndUs[static_cast<size_t>(k.rank)] = end;
    d.endUs = std::max(d.endUs, end);
    for (const TrainSpan& s : k.spans) {
      const int lane = 2 * k.rank + (isCompute(s.kind) ? 0 : 1);
      const double a = static_cast<double>(s.startNs) / 1e3;
      const double b = static_cast<double>(s.endNs) / 1e3;
      d.spans.push_back({lane, k.rank, s.kind, s.index, a, b, spanLabel(s)});
      d.endUs = std::max(d.endUs, b);
    }
  }
  if (run.sampleStep.empty()) {
    d.note = "No sample step in this run.";
    return d;
  }
  d.note = "Measured spans of step " + std::to_string(step) +
           ", each rank timed from its own start of the step. Upper lane: compute (forward "
           "and backward of layer Ln, the optimizer). Lower lane: " +
           (d.psAsync ? std::string("the rank's gradients pushed to the server (bucket bn) and "
                                    "the weights pulled back.")
                      : std::string("each bucket's collective in flight (bucket bn, in "
                                    "reduction order: the last layers' first).")) +
           " Where both lanes are busy, communication is hidden behind compute.";
  return d;
}

std::string identicalCaption(const TrainRecord& r) {
  std::string out;
  for (const TrainRun& run : r.runs) {
    const auto same = static_cast<size_t>(std::count_if(
        run.steps.begin(), run.steps.end(), [](const TrainStepRow& s) { return s.identical; }));
    const auto first = std::find_if(run.steps.begin(), run.steps.end(),
                                    [](const TrainStepRow& s) { return !s.identical; });
    std::string line;
    if (run.steps.empty()) {
      line = "\u2013 " + run.label + ": no steps";
    } else if (first == run.steps.end()) {
      line = "\u2713 " + run.label + ": every step bitwise identical on all " +
             std::to_string(run.workers) + " ranks";
    } else {
      line = "\u2717 " + run.label + ": " + std::to_string(same) + " of " +
             std::to_string(run.steps.size()) + " steps bitwise identical; the first that " +
             "was not: step " + std::to_string(first->step);
    }
    out += (out.empty() ? "" : "\n") + line;
  }
  return out;
}

XYChartData spreadChart(const TrainRecord& r) {
  XYChartData d;
  d.title = "Replica spread against step";
  d.subtitle = measuredOn(r);
  double top = 0;
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const TrainRun& run = r.runs[i];
    const bool same = !run.steps.empty() && std::all_of(run.steps.begin(), run.steps.end(),
                                                        [](const auto& s) { return s.identical; });
    ChartSeries s = runSeries(r, i, run.label + (same ? " \u2713" : ""));
    for (const TrainStepRow& row : run.steps) {
      if (!std::isfinite(row.spread)) continue;
      s.points.push_back({static_cast<double>(row.step), row.spread});
      top = std::max(top, row.spread);
    }
    d.series.push_back(std::move(s));
  }
  d.x = stepAxis(r);
  d.y = linearAxis("spread (largest L2 distance of a rank's weights from rank 0's)", 0,
                   top > 0 ? top * 1.05 : 1);
  d.y.screenTitle = "L2 from rank 0";
  d.note = "Measured after each step: the largest L2 distance of a rank's weights from rank 0's.";
  return d;
}

XYChartData sweepChart(const TrainRecord& r) {
  XYChartData d;
  d.title = "Step time against bucket size";
  std::vector<BucketSweepPoint> pts = r.sweep;
  std::sort(pts.begin(), pts.end(),
            [](const auto& a, const auto& b) { return a.bucketBytes < b.bucketBytes; });
  uint64_t lo = uint64_t{64} << 10, hi = uint64_t{64} << 20;
  double top = 0;
  ChartSeries step{"step", "step time (median)", SeriesStyle::Measured, {{}, 0, 2}, {}, {}};
  ChartSeries exposed{"exposed", "exposed communication", SeriesStyle::Measured, {{}, 1, 2}, {},
                      {}};
  for (const BucketSweepPoint& p : pts) {
    lo = std::min(lo, p.bucketBytes);
    hi = std::max(hi, p.bucketBytes);
    const double x = std::log2(static_cast<double>(p.bucketBytes));
    step.points.push_back({x, p.stepUs});
    exposed.points.push_back({x, p.exposedUs});
    top = std::max({top, p.stepUs, p.exposedUs});
  }
  d.x = log2SizeAxis("bucket size (bytes, log\u2082)", lo, hi);
  d.x.screenTitle = "bucket size";
  // Every second power of two (64K, 256K, 1M, ...): a third of the window's width holds six
  // labels, not eleven.
  std::erase_if(d.x.ticks, [](const AxisTick& t) { return static_cast<int>(t.value) % 2 != 0; });
  d.y = timeAxis("median step time", top);
  d.y.screenTitle = "step time";
  d.subtitle = measuredOn(r);
  const auto best = bestBucket(r.sweep);
  if (best) {
    d.subtitle = "best: " + formatSize(best->bucketBytes) + " buckets (" +
                 std::to_string(best->buckets) + "), " + timeLabel(best->stepUs) + " a step" +
                 kDot + d.subtitle;
    ChartSeries mark{
        "best", "best: " + formatSize(best->bucketBytes), SeriesStyle::Markers, {{}, 0, 2}, {}, {}};
    mark.points.push_back({std::log2(static_cast<double>(best->bucketBytes)), best->stepUs});
    d.series = {std::move(step), std::move(exposed), std::move(mark)};
  }
  d.note =
      "Measured: each point is the median step of a run with that bucket size, its first step "
      "left out.";
  return d;
}

size_t timelineRunOf(const TrainRecord& r, size_t timelineRun) {
  if (timelineRun < r.runs.size() && !r.runs[timelineRun].sampleStep.empty()) return timelineRun;
  for (size_t i = 0; i < r.runs.size(); ++i) {
    if (!r.runs[i].sampleStep.empty()) return i;
  }
  return r.runs.size();
}

TrainingCharts trainingCharts(const TrainRecord& r, size_t timelineRun) {
  TrainingCharts c;
  c.summary = std::to_string(r.runs.size()) + (r.runs.size() == 1 ? " run" : " runs") + kDot +
              recordSubtitle(r);
  c.loss = lossChart(r);
  c.split = stepSplit(r);
  const size_t t = timelineRunOf(r, timelineRun);
  if (t < r.runs.size()) {
    c.timeline = sampleStepTimeline(r.runs[t]);
  } else {
    c.timeline.title = "Sample step on every rank";
    c.timeline.note = "No run in this record has a sample step.";
  }
  c.spread = spreadChart(r);
  c.identicalCaption = identicalCaption(r);
  c.sweep = sweepChart(r);
  if (r.sweep.empty()) c.sweepMessage = kNoSweepMessage;
  return c;
}

}  // namespace arl::ui
