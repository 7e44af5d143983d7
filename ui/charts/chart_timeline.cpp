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
  d.nranks = res.nranks;
  for (const TelemetryEvent& e : res.events) {
    d.nranks = std::max({d.nranks, e.rank + 1, e.peer + 1});
  }
  d.title = "Per-link throughput: " + res.request.algorithm + " " + formatSize(row.sizeBytes);
  const size_t n = static_cast<size_t>(d.nranks);
  d.bytesPerSecond.assign(n * n, 0.0);
  d.bytes.assign(n * n, 0);
  if (res.events.empty()) {
    d.note = "No telemetry for this run (telemetry off, or not kept).";
    return d;
  }
  const Timeline tl(res.events);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> flights(n * n);
  for (const Transfer& x : tl.transfers()) {
    if (x.sender < 0 || x.receiver < 0 || x.sender >= d.nranks || x.receiver >= d.nranks) continue;
    const size_t k = static_cast<size_t>(x.sender) * n + static_cast<size_t>(x.receiver);
    d.bytes[k] += x.bytes;
    flights[k].emplace_back(x.sendStartNs, std::max(x.recvEndNs, x.sendStartNs));
  }
  d.minBytesPerSecond = 0;
  for (size_t k = 0; k < n * n; ++k) {
    auto& f = flights[k];
    if (f.empty()) continue;
    std::sort(f.begin(), f.end());
    int64_t busy = 0, curS = f[0].first, curE = f[0].second;
    for (const auto& [s, e] : f) {
      if (s > curE) {
        busy += curE - curS;
        curS = s;
      }
      curE = std::max(curE, e);
    }
    busy += curE - curS;
    if (busy <= 0) continue;
    d.bytesPerSecond[k] = static_cast<double>(d.bytes[k]) * 1e9 / static_cast<double>(busy);
    d.maxBytesPerSecond = std::max(d.maxBytesPerSecond, d.bytesPerSecond[k]);
    d.minBytesPerSecond = d.minBytesPerSecond == 0
                              ? d.bytesPerSecond[k]
                              : std::min(d.minBytesPerSecond, d.bytesPerSecond[k]);
  }
  d.note =
      "Bytes a link carried over the time it had a message in flight (send start to "
      "receive end), all timed iterations of the run; measured telemetry.";
  return d;
}

}  // namespace arl::ui
