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

int laneOf(Activity a) {
  switch (a) {
    case Activity::Send:
    case Activity::NcclColl: return 0;
    case Activity::Recv:
    case Activity::NcclKernel: return 1;
    case Activity::Reduce:
    case Activity::NcclSend:
    case Activity::NcclRecv: return 2;
    default: return -1;
  }
}

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

}  // namespace

TimelineData stepTimeline(const SweepRow& row, int iteration) {
  TimelineData d;
  const RunResult& res = row.result;
  d.nranks = res.nranks;
  for (const TelemetryEvent& e : res.events) d.nranks = std::max(d.nranks, e.rank + 1);
  if (iteration < 0) iteration = medianIteration(res);
  if (iteration < 0 && !res.events.empty())
    iteration = static_cast<int>(res.events.back().iteration);
  d.iteration = static_cast<uint32_t>(std::max(iteration, 0));
  d.title = "Per-step timeline: " + res.request.algorithm + " " + formatSize(row.sizeBytes) +
            ", iteration " + std::to_string(d.iteration);
  d.nccl = hasNcclEvents(res);
  const auto laneNames =
      d.nccl ? std::vector<const char*>{"NCCL collective", "NCCL kernel", "NCCL proxy"}
             : std::vector<const char*>{"send", "recv", "reduce"};
  for (int r = 0; r < d.nranks; ++r) {
    for (const char* lane : laneNames) {
      d.lanes.push_back("rank " + std::to_string(r) + " " + lane);
      d.laneRank.push_back(r);
    }
  }
  std::vector<TelemetryEvent> events;
  for (const TelemetryEvent& e : res.events) {
    if (e.iteration == d.iteration) events.push_back(e);
  }
  if (events.empty()) {
    d.note = "No telemetry for this run (telemetry off, or not kept).";
    return d;
  }
  const Timeline tl(events);
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  for (const Interval& iv : tl.intervals()) {
    t0 = std::min(t0, iv.startNs);
    t1 = std::max(t1, iv.endNs);
  }
  for (const TelemetryEvent& e : events) {
    t0 = std::min(t0, e.tNs);
    t1 = std::max(t1, e.tNs);
  }
  for (const Interval& iv : tl.intervals()) {
    const double s = static_cast<double>(iv.startNs - t0) / 1e3;
    const double e = static_cast<double>(iv.endNs - t0) / 1e3;
    if (iv.activity == Activity::Step) {
      d.stepEnds.push_back({iv.rank, events[iv.event].step, e});
      continue;
    }
    const int lane = laneOf(iv.activity);
    if (lane < 0 || iv.rank < 0 || iv.rank >= d.nranks) continue;
    d.bars.push_back({iv.rank * 3 + lane, iv.rank, iv.activity, iv.peer, s, e});
  }
  d.endUs = static_cast<double>(t1 - t0) / 1e3;
  d.note = d.nccl ? ncclNote(tl)
                  : "Measured telemetry of one timed iteration (the median one by its slowest "
                    "rank). Ticks: each rank's step ends.";
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
