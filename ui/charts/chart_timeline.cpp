// The per-step timeline and the link heat map of one run, from its Timeline.
#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "charts/chart_data.h"
#include "exec/nccl_events.h"

namespace arl::ui {
namespace {

// The timed iteration whose slowest-rank time is the median of the run's, from the ranks'
// reports; -1 when the run has none.
int medianIteration(const RunResult& res) {
  std::map<uint32_t, int64_t> slowest;
  for (const RankIteration& r : res.perRank) {
    int64_t& t = slowest[r.iteration];
    t = std::max(t, r.timeNs);
  }
  if (slowest.empty()) return -1;
  std::vector<std::pair<int64_t, uint32_t>> byTime;
  for (const auto& [it, t] : slowest) byTime.emplace_back(t, it);
  std::sort(byTime.begin(), byTime.end());
  return static_cast<int>(byTime[(byTime.size() - 1) / 2].second);
}

// The lane of an activity within its rank's lanes; a training run's compute lane comes first.
int laneOf(Activity a, bool training) {
  const int below = training ? 1 : 0;
  switch (a) {
    case Activity::Forward:
    case Activity::Backward:
    case Activity::Optimizer: return training ? 0 : -1;
    case Activity::Send:
    case Activity::NcclColl: return below;
    case Activity::Recv:
    case Activity::NcclKernel: return below + 1;
    case Activity::Reduce:
    case Activity::NcclSend:
    case Activity::NcclRecv: return below + 2;
    default: return -1;
  }
}

bool isTraining(const RunResult& res) {
  return res.request.train.has_value() ||
         std::any_of(res.events.begin(), res.events.end(),
                     [](const TelemetryEvent& e) { return isComputeKind(e.kind); });
}

std::vector<std::pair<double, double>> merged(std::vector<std::pair<double, double>> iv) {
  std::sort(iv.begin(), iv.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& x : iv) {
    if (!out.empty() && x.first <= out.back().second) {
      out.back().second = std::max(out.back().second, x.second);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

// Per rank, where a compute bar and a communication bar (send, recv, reduce) share time.
std::vector<OverlapSpan> overlapsOf(const std::vector<TimelineBar>& bars, int nranks) {
  std::vector<OverlapSpan> out;
  for (int r = 0; r < nranks; ++r) {
    std::vector<std::pair<double, double>> compute, comm;
    for (const TimelineBar& b : bars) {
      if (b.rank != r) continue;
      (isComputeActivity(b.activity) ? compute : comm).emplace_back(b.startUs, b.endUs);
    }
    const auto a = merged(std::move(compute)), c = merged(std::move(comm));
    for (size_t i = 0, j = 0; i < a.size() && j < c.size();) {
      const double lo = std::max(a[i].first, c[j].first), hi = std::min(a[i].second, c[j].second);
      if (lo < hi) out.push_back({r, lo, hi});
      (a[i].second < c[j].second ? i : j) += 1;
    }
  }
  return out;
}

std::vector<std::string> laneNamesOf(bool nccl, bool training) {
  if (nccl) return {"NCCL collective", "NCCL kernel", "NCCL proxy"};
  if (training) return {"compute", "send", "recv", "reduce"};
  return {"send", "recv", "reduce"};
}

constexpr const char* kTrainingNote =
    "Measured telemetry of one training step (the median by its slowest rank): each rank's "
    "forward and backward pass per layer and its optimizer on the compute lane, its buckets' "
    "all-reduces as chunk events below. Shaded: the rank computed while its communication was "
    "in flight, the overlap that hides the all-reduce.";

bool hasNcclEvents(const RunResult& res) {
  return std::any_of(res.events.begin(), res.events.end(),
                     [](const TelemetryEvent& e) { return isNcclKind(e.kind); });
}

std::string ncclNote(const Timeline& tl) {
  const bool steps =
      std::any_of(tl.intervals().begin(), tl.intervals().end(), [](const Interval& x) {
        return x.activity == Activity::NcclSend || x.activity == Activity::NcclRecv;
      });
  std::string note =
      "NCCL's own events of one timed iteration, as NCCL's profiler plugin reported them: the "
      "collective from its start on the host to its last kernel channel's end, each channel's "
      "kernel on the GPU's timer (mapped to the coordinator's clock).";
  if (!steps) note += " " + std::string(kNcclNoChunksNote) + ".";
  return note;
}

std::string linkName(int a, int b) { return std::to_string(a) + "\u2192" + std::to_string(b); }

// What the pace of a shaped bottleneck says: near its rate (80% or more) the link's own rate
// holds the run back; far below it (under half) its messages wait at its ends, on the sender's
// port shared with its other links or on a receiver late to take them.
std::string paceReading(const LinkLoad& x) {
  if (x.configuredBytesPerSecond <= 0) return {};
  if (x.pace >= 0.8) return "; its own rate holds the run back";
  if (x.pace < 0.5) {
    return "; far below its rate: it waits on its sender's port or its receiver";
  }
  return {};
}

// Links measured faster than they are shaped to (more than 5% over, beyond rounding and the
// stamps' microsecond grain): the reader must know before trusting their paces.
std::string overPaceNote(const LinkLoads& l) {
  std::string names;
  for (int a = 0; a < l.nranks; ++a) {
    for (int b = 0; b < l.nranks; ++b) {
      if (l.at(a, b).pace <= 1.05) continue;
      names += (names.empty() ? "" : ", ") + linkName(a, b);
    }
  }
  if (names.empty()) return {};
  return " Over 100% (" + names +
         "): measured faster than shaped; a flight starts on the sender's clock and ends on the "
         "receiver's, so either the shaping did not hold or the two clocks disagree.";
}

// The busiest link, named as the bottleneck when it stands out from the median link.
std::string bottleneckHeadline(const LinkLoads& l) {
  if (l.busiestSender < 0) return {};
  const LinkLoad& x = l.at(l.busiestSender, l.busiestReceiver);
  const std::string name = linkName(l.busiestSender, l.busiestReceiver);
  std::string pace = " at " + rateLabel(x.bytesPerSecond);
  if (x.configuredBytesPerSecond > 0) {
    pace += " (" + percentLabel(x.pace) + " of its " + rateLabel(x.configuredBytesPerSecond) + ")";
  }
  if (l.bottleneck) {
    return "bottleneck: " + name + ", busy " + percentLabel(x.busy) + pace +
           "; the median link is busy " + percentLabel(l.medianBusy) + paceReading(x);
  }
  const auto carried =
      std::count_if(l.links.begin(), l.links.end(), [](const LinkLoad& y) { return y.bytes > 0; });
  if (carried == 1) {
    return "one link carried data: " + name + ", busy " + percentLabel(x.busy) + pace;
  }
  return "no single bottleneck: the busiest link, " + name + ", is busy " + percentLabel(x.busy) +
         ", the median link " + percentLabel(l.medianBusy);
}

// The run's events of the iteration shown, and its title.
std::vector<TelemetryEvent> iterationEvents(const SweepRow& row, int iteration, TimelineData& d) {
  const RunResult& res = row.result;
  if (iteration < 0) iteration = medianIteration(res);
  if (iteration < 0 && !res.events.empty())
    iteration = static_cast<int>(res.events.back().iteration);
  d.iteration = static_cast<uint32_t>(std::max(iteration, 0));
  d.title = d.training
                ? "Training step " + std::to_string(d.iteration) + ": compute and the " +
                      "buckets' " + res.request.algorithm + " all-reduces"
                : "Per-step timeline: " + res.request.algorithm + " " + formatSize(row.sizeBytes) +
                      ", iteration " + std::to_string(d.iteration);
  std::vector<TelemetryEvent> events;
  for (const TelemetryEvent& e : res.events) {
    if (e.iteration == d.iteration) events.push_back(e);
  }
  return events;
}

// The bars and step ends of `tl`, in microseconds from its first interval or event.
void placeBars(const Timeline& tl, const std::vector<TelemetryEvent>& events, TimelineData& d) {
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  for (const Interval& iv : tl.intervals()) {
    t0 = std::min(t0, iv.startNs);
    t1 = std::max(t1, iv.endNs);
  }
  for (const TelemetryEvent& e : events) {
    t0 = std::min(t0, e.tNs);
    t1 = std::max(t1, e.tNs);
  }
  const int perRank = static_cast<int>(d.laneNames.size());
  for (const Interval& iv : tl.intervals()) {
    const double s = static_cast<double>(iv.startNs - t0) / 1e3;
    const double e = static_cast<double>(iv.endNs - t0) / 1e3;
    // A training step's buckets each end steps of their own: no one step to tick.
    if (iv.activity == Activity::Step) {
      if (!d.training) d.stepEnds.push_back({iv.rank, events[iv.event].step, e});
      continue;
    }
    const int lane = laneOf(iv.activity, d.training);
    if (lane < 0 || iv.rank < 0 || iv.rank >= d.nranks) continue;
    d.bars.push_back({iv.rank * perRank + lane, iv.rank, iv.activity, iv.peer, s, e});
  }
  d.endUs = static_cast<double>(t1 - t0) / 1e3;
}

}  // namespace

TimelineData stepTimeline(const SweepRow& row, int iteration) {
  TimelineData d;
  const RunResult& res = row.result;
  d.nranks = res.nranks;
  for (const TelemetryEvent& e : res.events) d.nranks = std::max(d.nranks, e.rank + 1);
  d.nccl = hasNcclEvents(res);
  d.training = !d.nccl && isTraining(res);
  d.laneNames = laneNamesOf(d.nccl, d.training);
  for (int r = 0; r < d.nranks; ++r) {
    for (const std::string& lane : d.laneNames) {
      d.lanes.push_back("rank " + std::to_string(r) + " " + lane);
      d.laneRank.push_back(r);
    }
  }
  const std::vector<TelemetryEvent> events = iterationEvents(row, iteration, d);
  if (events.empty()) {
    d.note = "No telemetry for this run (telemetry off, or not kept).";
    return d;
  }
  const Timeline tl(events);
  placeBars(tl, events, d);
  if (d.training) d.overlaps = overlapsOf(d.bars, d.nranks);
  d.note = d.nccl       ? ncclNote(tl)
           : d.training ? kTrainingNote
                        : "Measured telemetry of one timed iteration (the median one by its "
                          "slowest rank). Ticks: each rank's step ends.";
  return d;
}

HeatMapData linkHeatMap(const SweepRow& row) {
  HeatMapData d;
  const RunResult& res = row.result;
  d.title = "Link load: " + res.request.algorithm + " " + formatSize(row.sizeBytes);
  d.loads = linkLoads(res.events, res.nranks, res.request.shaping, timedIterations(res));
  if (res.events.empty()) {
    d.note = "No telemetry for this run (telemetry off, or not kept).";
    return d;
  }
  d.headline = bottleneckHeadline(d.loads);
  const int its = d.loads.iterations;
  d.note =
      "Colour: the share of the time a link had a message in flight (send start to receive "
      "end), over " +
      std::to_string(its) + (its == 1 ? " iteration" : " iterations") +
      " of the run; measured telemetry. In each cell: that share, the link's throughput "
      "while busy";
  if (d.loads.shaped()) d.note += ", and its pace against the rate it is shaped to";
  d.note +=
      ". A link busy nearly all the time at its configured pace is the bottleneck; a link "
      "idle part of the time waits on others.";
  d.note += overPaceNote(d.loads);
  return d;
}

}  // namespace arl::ui
