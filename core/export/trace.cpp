// The Chrome trace-event file of a bench session (export.h), drawn from each run's Timeline.
// A trace can hold millions of events, so it is written as it goes: each event is one object
// built and written by the JSON library, the file is the array of them.
#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <queue>
#include <set>

#include "base/shaping.h"
#include "exec/nccl_events.h"
#include "exec/timeline.h"
#include "export/export.h"
#include "export/session_json.h"
#include "schedule/schedule.h"

namespace arl {

namespace {

// Lanes ("threads") of a rank's process in the trace, top to bottom.
// NCCL's lanes hold what NCCL's profiler plugin reported (exec/nccl_events.h), named as NCCL's.
enum Lane : int {
  kIterations,
  kSteps,
  kCompute,
  kSend,
  kRecv,
  kReduce,
  kNcclGroup,
  kNcclColl,
  kNcclKernel,
  kNcclSend,
  kNcclRecv,
  kRuns,
  kLaneCount
};
constexpr const char* kLaneNames[kLaneCount] = {
    "iterations",  "steps",           "compute",         "send",
    "recv",        "reduce",          "NCCL group",      "NCCL collective",
    "NCCL kernel", "NCCL proxy send", "NCCL proxy recv", "runs"};
constexpr bool isNcclLane(int lane) { return lane >= kNcclGroup && lane <= kNcclRecv; }
// Overlapping slices of one lane are spread over sub-lanes ("send", "send #2", ...), because
// a lane ("thread") in the trace-event format must hold properly nested slices; pipelined
// sends overlap without nesting.
constexpr int kMaxSubLanes = 10000;
constexpr int kBenchPid = 1000;  // the process that holds the "runs" lane
constexpr int64_t kCounterWindowNs = 1'000'000;
constexpr int64_t kMaxCounterWindows = 600'000;  // ten minutes
constexpr size_t kNoEvent = static_cast<size_t>(-1);

int rankPid(int rank) { return rank + 1; }
int64_t laneTid(int pid, int lane, int sub) {
  return static_cast<int64_t>(pid) * 100000 + lane * kMaxSubLanes + sub;
}

// Microseconds plus half a nanosecond: trace viewers convert with `us * 1000` in floating
// point and truncate, so 12.3455 becomes exactly 12345 ns where 12.345 could become 12344 and
// break the nesting of adjacent slices. The JSON library writes the shortest text that reads
// back as this double, "12.3455".
Json us(int64_t ns) { return (static_cast<double>(std::max<int64_t>(ns, 0)) + 0.5) / 1e3; }

Json provenanceList(uint64_t mask) {
  Json a = Json::array();
  for (int r = 0; r < 64; ++r) {
    if (mask >> r & 1) a.push_back(r);
  }
  return a;
}

Lane laneOf(Activity a) {
  switch (a) {
    case Activity::Iteration: return kIterations;
    case Activity::Step: return kSteps;
    case Activity::Send: return kSend;
    case Activity::Recv: return kRecv;
    case Activity::Reduce: return kReduce;
    case Activity::NcclGroup: return kNcclGroup;
    case Activity::NcclColl: return kNcclColl;
    case Activity::NcclKernel: return kNcclKernel;
    case Activity::NcclSend: return kNcclSend;
    case Activity::NcclRecv: return kNcclRecv;
    case Activity::Forward:
    case Activity::Backward:
    case Activity::Optimizer: return kCompute;
  }
  return kSteps;
}

// One complete event ("X"), on absolute times until written. Its name and arguments are made
// when it is written, from the run and the telemetry event it stands for.
struct Slice {
  int pid = 0;
  int lane = 0;
  int64_t start = 0;
  int64_t end = 0;
  const BenchRow* row = nullptr;
  size_t event = kNoEvent;
  int sub = -1;  // sub-lane after packing; -1 = dropped
  uint64_t flowOut = 0, flowIn = 0;
};

std::vector<IterationTime> iterationTimes(const RunResult& res) {
  std::vector<IterationTime> out;
  for (const RankIteration& ri : res.perRank) out.push_back({ri.rank, ri.iteration, ri.timeNs});
  return out;
}

class TraceBuilder {
 public:
  std::vector<Slice> slices;
  TraceStats stats;

  void addRow(const BenchRow& row) {
    if (row.endNs > row.startNs && row.startNs != 0) {
      add({kBenchPid, kRuns, row.startNs, row.endNs, &row});
    }
    const Timeline tl(row.result.events, iterationTimes(row.result));
    slices.reserve(slices.size() + tl.intervals().size());
    std::vector<size_t> sendSlice(tl.transfers().size()), recvSlice(tl.transfers().size());
    for (const Interval& x : tl.intervals()) {
      const size_t idx =
          add({rankPid(x.rank), laneOf(x.activity), x.startNs, x.endNs, &row, x.event});
      if (x.activity == Activity::Send || x.activity == Activity::Recv ||
          x.activity == Activity::Reduce) {
        ++stats.slices;
      }
      if (isNcclActivity(x.activity)) ++stats.ncclSlices;
      if (isComputeActivity(x.activity)) ++stats.computeSlices;
      if (x.activity == Activity::NcclSend || x.activity == Activity::NcclRecv) {
        ++stats.ncclProxySteps;
      }
      if (x.transfer < 0) continue;
      (x.activity == Activity::Send ? sendSlice : recvSlice)[static_cast<size_t>(x.transfer)] = idx;
    }
    for (size_t t = 0; t < sendSlice.size(); ++t) flows_.emplace_back(sendSlice[t], recvSlice[t]);
    stats.unmatchedSends += tl.stats().unmatchedSends;
    stats.unmatchedRecvs += tl.stats().unmatchedRecvs;
  }

  // The earliest time of any slice (clocks of other hosts are aligned only as well as the ping
  // exchange at join allows, so this may precede the first run's start).
  int64_t origin() const {
    int64_t o = slices.empty() ? 0 : slices.front().start;
    for (const Slice& s : slices) o = std::min(o, s.start);
    return o;
  }

  // Spreads each lane's slices over sub-lanes so that no two in one sub-lane overlap.
  void pack() {
    std::map<std::pair<int, int>, std::vector<size_t>> byLane;
    for (size_t i = 0; i < slices.size(); ++i) {
      byLane[{slices[i].pid, slices[i].lane}].push_back(i);
    }
    for (auto& [lane, idx] : byLane) packLane(idx);
  }

  // A slice carries one bind_id: a send has one receiver, a receive one sender.
  void bindFlows() {
    uint64_t next = 1;
    for (const auto& [s, d] : flows_) {
      if (slices[s].sub < 0 || slices[d].sub < 0) continue;
      slices[s].flowOut = next;
      slices[d].flowIn = next;
      ++next;
      ++stats.flows;
    }
  }

  // Bytes each rank sent per counter window, a send's bytes spread over the windows its
  // interval covers. Windows count from `origin`.
  std::map<int, std::map<int64_t, double>> sentPerWindow(int64_t origin) const {
    std::map<int, std::map<int64_t, double>> out;
    for (const Slice& s : slices) {
      if (s.lane != kSend) continue;
      countSent(out[s.pid], s.start - origin, s.end - origin, s.row->result.events[s.event].bytes);
    }
    return out;
  }

 private:
  std::vector<std::pair<size_t, size_t>> flows_;  // (send slice, recv slice)

  size_t add(Slice s) {
    s.end = std::max(s.end, s.start);
    slices.push_back(s);
    return slices.size() - 1;
  }

  // Each slice goes to the lowest-numbered sub-lane free at its start: O(n log lanes).
  void packLane(std::vector<size_t>& idx) {
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      return std::tie(slices[a].start, slices[a].end) < std::tie(slices[b].start, slices[b].end);
    });
    using Busy = std::pair<int64_t, int>;  // (end, sub-lane)
    std::priority_queue<Busy, std::vector<Busy>, std::greater<>> busy;
    std::set<int> free;
    int lanes = 0;
    for (size_t i : idx) {
      Slice& s = slices[i];
      // A slice may start where the previous one ends: viewers close a slice at its end
      // timestamp before opening the next (Perfetto's SliceTracker pops when end <= ts).
      while (!busy.empty() && busy.top().first <= s.start) {
        free.insert(busy.top().second);
        busy.pop();
      }
      if (!free.empty()) {
        s.sub = *free.begin();
        free.erase(free.begin());
      } else if (lanes < kMaxSubLanes) {
        s.sub = lanes++;
      } else {
        continue;  // dropped: more overlapping slices than sub-lanes
      }
      busy.emplace(s.end, s.sub);
    }
  }

  static void countSent(std::map<int64_t, double>& w, int64_t start, int64_t end, uint64_t bytes) {
    if (end <= start) {
      w[start / kCounterWindowNs] += static_cast<double>(bytes);
      return;
    }
    // A send longer than kMaxCounterWindows windows is not a real one (a damaged recording):
    // its bytes count where it started rather than costing a sample per millisecond.
    if ((end - start) / kCounterWindowNs > kMaxCounterWindows) {
      w[start / kCounterWindowNs] += static_cast<double>(bytes);
      return;
    }
    const double perNs = static_cast<double>(bytes) / static_cast<double>(end - start);
    for (int64_t win = start / kCounterWindowNs; win * kCounterWindowNs < end; ++win) {
      const int64_t lo = std::max(start, win * kCounterWindowNs);
      const int64_t hi = std::min(end, (win + 1) * kCounterWindowNs);
      if (hi > lo) w[win] += perNs * static_cast<double>(hi - lo);
    }
  }
};

Json chunkArgs(const TelemetryEvent& e) {
  return Json{{"rank", e.rank},
              {"peer", e.peer},
              {"chunk", e.chunk},
              {"bytes", e.bytes},
              {"step", e.step},
              {"offset", e.offset},
              {"provenance", provenanceList(e.provenance)},
              {"iteration", e.iteration},
              {"run", e.runId},
              {"phase", str(toString(static_cast<Phase>(e.phase)))},
              {"clock", str(toString(e.clock))}};
}

// NCCL's slices: named as NCCL's, with what NCCL reported.
std::pair<std::string, Json> describeNccl(int lane, const TelemetryEvent& e) {
  Json args{{"source", "NCCL profiler plugin"},
            {"rank", e.rank},
            {"iteration", e.iteration},
            {"run", e.runId}};
  switch (lane) {
    case kNcclGroup: return {"NCCL group", std::move(args)};
    case kNcclColl: {
      const NcclCollInfo i = unpackNcclCollInfo(e.provenance);
      args["algorithm"] = str(toString(i.algo));
      args["protocol"] = str(toString(i.proto));
      args["channels"] = i.nChannels;
      args["warps"] = i.nWarps;
      args["count"] = e.offset;
      args["bytes"] = e.bytes;
      return {"NCCL " + std::string(toString(i.algo)) + "/" + std::string(toString(i.proto)) +
                  ", " + std::to_string(i.nChannels) + " channels",
              std::move(args)};
    }
    case kNcclKernel:
      args["channel"] = e.chunk;
      args["clock"] = "GPU global timer, mapped to the coordinator's clock";
      return {"NCCL kernel, channel " + std::to_string(e.chunk), std::move(args)};
    default: {
      const bool send = lane == kNcclSend;
      args["channel"] = e.chunk;
      args["step"] = e.step;
      args["peer"] = e.peer;
      args["bytes"] = e.bytes;
      return {"NCCL " + std::string(send ? "send" : "recv") + " step " + std::to_string(e.step) +
                  (send ? " to " : " from ") + std::to_string(e.peer),
              std::move(args)};
    }
  }
}

// A training step's compute span: which pass of which layer, or the optimizer.
std::pair<std::string, Json> describeCompute(const TelemetryEvent& e) {
  Json args{{"rank", e.rank},
            {"training_step", e.iteration},
            {"time_us", static_cast<double>(e.offset) / 1e3},
            {"run", e.runId},
            {"clock", str(toString(e.clock))}};
  if (e.kind == EventKind::ComputeOptimizer) return {"optimizer", std::move(args)};
  args["layer"] = e.chunk;
  const char* pass = e.kind == EventKind::ComputeForward ? "forward" : "backward";
  return {std::string(pass) + " layer " + std::to_string(e.chunk), std::move(args)};
}

std::string phaseName(const TelemetryEvent& e) {
  return std::string(toString(static_cast<Phase>(e.phase)));
}

// A training run's slice in the "runs" lane: what it trained, not a collective's bandwidth.
std::pair<std::string, Json> describeTrainingRun(const BenchRow& row) {
  const RunResult& res = row.result;
  const TrainConfig& t = *res.request.train;
  const std::string sync(toString(t.sync));
  return {"training: " + sync + ", " + res.request.algorithm + ", " + std::to_string(t.steps) +
              " steps",
          Json{{"run", res.runId},
               {"training", true},
               {"model", formatLayers(t.layers)},
               {"sync", sync},
               {"overlap", t.overlap},
               {"algorithm", res.request.algorithm},
               {"network", describeShaping(res.request.shaping)},
               {"state", str(toString(res.state))}}};
}

// The slice's name and arguments, from what it stands for.
std::pair<std::string, Json> describe(const Slice& s) {
  const RunResult& res = s.row->result;
  if (s.lane == kRuns && res.request.train) return describeTrainingRun(*s.row);
  if (s.lane == kRuns) {
    return {res.request.algorithm + " " + std::string(toString(res.request.collective)) + " " +
                formatSize(s.row->sizeBytes),
            Json{{"run", res.runId},
                 {"algorithm", res.request.algorithm},
                 {"size_bytes", s.row->sizeBytes},
                 {"time_us", s.row->metrics.timeUs},
                 {"busbw_gbps", s.row->metrics.busbwGBps},
                 {"network", describeShaping(res.request.shaping)},
                 {"state", str(toString(res.state))}}};
  }
  const TelemetryEvent& e = res.events[s.event];
  if (isNcclLane(s.lane)) return describeNccl(s.lane, e);
  if (s.lane == kCompute) return describeCompute(e);
  const std::string chunk = std::to_string(e.chunk), peer = std::to_string(e.peer);
  switch (s.lane) {
    case kIterations:
      return {"iteration " + std::to_string(e.iteration),
              Json{{"rank", e.rank},
                   {"iteration", e.iteration},
                   {"time_us", static_cast<double>(s.end - s.start) / 1e3},
                   {"bytes", e.bytes},
                   {"run", e.runId},
                   {"clock", str(toString(e.clock))}}};
    case kSteps:
      return {"step " + std::to_string(e.step) + " (" + phaseName(e) + ")",
              Json{{"rank", e.rank},
                   {"step", e.step},
                   {"iteration", e.iteration},
                   {"bytes", e.bytes},
                   {"run", e.runId},
                   {"clock", str(toString(e.clock))}}};
    case kSend: return {"send chunk " + chunk + " to " + peer, chunkArgs(e)};
    case kRecv: return {"recv chunk " + chunk + " from " + peer, chunkArgs(e)};
    default: return {"reduce chunk " + chunk, chunkArgs(e)};
  }
}

Json sliceJson(const Slice& s, int64_t origin) {
  auto [name, args] = describe(s);
  Json j{{"ph", "X"},
         {"cat", isNcclLane(s.lane) ? "NCCL" : kLaneNames[s.lane]},
         {"name", std::move(name)},
         {"pid", s.pid},
         {"tid", laneTid(s.pid, s.lane, s.sub)},
         {"ts", us(s.start - origin)},
         {"dur", us(s.end - s.start)}};
  if (s.flowOut) {
    j["bind_id"] = s.flowOut;
    j["flow_out"] = true;
  }
  if (s.flowIn) {
    j["bind_id"] = s.flowIn;
    j["flow_in"] = true;
  }
  j["args"] = std::move(args);
  return j;
}

Json metadata(const char* name, int pid, int64_t tid, const char* argKey, Json argValue) {
  return Json{{"ph", "M"},
              {"name", name},
              {"pid", pid},
              {"tid", tid},
              {"args", Json{{argKey, std::move(argValue)}}}};
}

Json counter(int pid, int64_t windowIndex, double bytesPerMs) {
  return Json{{"ph", "C"},
              {"name", "sent"},
              {"pid", pid},
              {"tid", laneTid(pid, kSend, 0)},
              {"ts", us(windowIndex * kCounterWindowNs)},
              {"args", Json{{"bytes/ms", bytesPerMs}}}};
}

// Writes the events of the array "traceEvents", one per line.
class EventWriter {
 public:
  explicit EventWriter(std::string& out) : out_(out) {}
  void operator()(const Json& e) {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    out_ += jsonText(e);
  }

 private:
  std::string& out_;
  bool first_ = true;
};

// The network every run of the session was shaped to; none when the runs differ. Without runs,
// the one the session was configured with.
std::optional<LinkShaping> sessionShaping(const BenchReport& r) {
  if (r.rows.empty()) return r.config.shaping;
  const LinkShaping& first = r.rows.front().result.request.shaping;
  for (const BenchRow& row : r.rows) {
    if (row.result.request.shaping != first) return std::nullopt;
  }
  return first;
}

std::string networkText(const std::optional<LinkShaping>& s) {
  return s ? describeShaping(*s) : "shaped differently per run (each run's args say how)";
}

// Process names: every rank known from the workers, the runs or the slices; a rank whose port
// the session's shaping paced says at what rate.
std::map<int, std::string> processNames(const BenchReport& r, const std::vector<Slice>& slices,
                                        const std::optional<LinkShaping>& shaping) {
  std::map<int, std::string> names;
  auto nameRank = [&](const WorkerInfo& w) {
    if (w.rank < 0 || names.count(rankPid(w.rank))) return;
    const double port = shaping ? shaping->portRate(w.rank) : 0;
    names[rankPid(w.rank)] = "rank " + std::to_string(w.rank) + " (" + w.host + ", pid " +
                             std::to_string(w.pid) +
                             (port > 0 ? ", port " + describeRate(port) : "") + ")";
  };
  for (const WorkerInfo& w : r.workers) nameRank(w);
  for (const BenchRow& row : r.rows) {
    for (const WorkerInfo& w : row.result.workers) nameRank(w);
  }
  for (const Slice& s : slices) {
    if (s.pid != kBenchPid && !names.count(s.pid))
      names[s.pid] = "rank " + std::to_string(s.pid - 1);
  }
  return names;
}

// The bench process is named with the network when the runs were shaped, so a trace of a
// shaped run says so where it is opened.
void writeNames(EventWriter& write, const BenchReport& r, const std::vector<Slice>& slices) {
  std::map<std::pair<int, int>, int> subLanes;  // (pid, lane) -> sub-lanes used
  for (const Slice& s : slices) {
    if (s.sub >= 0) subLanes[{s.pid, s.lane}] = std::max(subLanes[{s.pid, s.lane}], s.sub + 1);
  }
  const std::optional<LinkShaping> shaping = sessionShaping(r);
  if (subLanes.count({kBenchPid, kRuns})) {
    const bool training = std::any_of(r.rows.begin(), r.rows.end(),
                                      [](const BenchRow& x) { return x.result.request.train; });
    std::string bench = training ? "allreduce-lab train" : "allreduce-lab bench";
    if (!shaping || !shaping->empty()) bench += " (network: " + networkText(shaping) + ")";
    write(metadata("process_name", kBenchPid, 0, "name", bench));
    write(metadata("process_sort_index", kBenchPid, 0, "sort_index", -1));
  }
  for (const auto& [pid, name] : processNames(r, slices, shaping)) {
    write(metadata("process_name", pid, 0, "name", name));
    write(metadata("process_sort_index", pid, 0, "sort_index", pid));
  }
  for (const auto& [pl, n] : subLanes) {
    for (int sub = 0; sub < n; ++sub) {
      const int64_t tid = laneTid(pl.first, pl.second, sub);
      std::string name = kLaneNames[pl.second];
      if (sub > 0) name += " #" + std::to_string(sub + 1);
      write(metadata("thread_name", pl.first, tid, "name", name));
      write(metadata("thread_sort_index", pl.first, tid, "sort_index",
                     pl.second * kMaxSubLanes + sub));
    }
  }
}

void writeSlices(EventWriter& write, const std::vector<Slice>& slices, int64_t origin) {
  std::vector<size_t> order;
  for (size_t i = 0; i < slices.size(); ++i) {
    if (slices[i].sub >= 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return slices[x].start < slices[y].start; });
  for (size_t i : order) write(sliceJson(slices[i], origin));
}

// A sample per window with bytes sent, and a 0 after each run of windows so the counter drops.
uint64_t writeCounters(EventWriter& write, const std::map<int, std::map<int64_t, double>>& sent) {
  uint64_t samples = 0;
  for (const auto& [pid, windows] : sent) {
    for (auto it = windows.begin(); it != windows.end(); ++it) {
      write(counter(pid, it->first, it->second * 1e6 / static_cast<double>(kCounterWindowNs)));
      ++samples;
      auto next = std::next(it);
      if (next == windows.end() || next->first != it->first + 1) {
        write(counter(pid, it->first + 1, 0));
        ++samples;
      }
    }
  }
  return samples;
}

}  // namespace

std::string chromeTraceJson(const BenchReport& r, TraceStats* statsOut) {
  TraceBuilder b;
  for (const BenchRow& row : r.rows) b.addRow(row);
  b.pack();
  b.bindFlows();
  const int64_t origin = b.origin();

  std::string out;
  out.reserve(b.slices.size() * 200);  // about what a slice takes: one growth, not twenty
  out = "{\"traceEvents\":[";
  EventWriter write(out);
  writeNames(write, r, b.slices);
  writeSlices(write, b.slices, origin);
  b.stats.counterSamples = writeCounters(write, b.sentPerWindow(origin));

  Json otherData{
      {"generator", "allreduce-lab bench"},
      {"clock", "coordinator steady clock; ts in microseconds from the first run's start"},
      {"origin_ns", origin},
      {"runs", static_cast<uint64_t>(r.rows.size())},
      {"network", networkText(sessionShaping(r))},
      {"flows", b.stats.flows},
      {"unmatched_sends", b.stats.unmatchedSends},
      {"unmatched_recvs", b.stats.unmatchedRecvs},
      {"events_dropped", totalDropped(r)}};
  if (b.stats.computeSlices > 0) otherData["compute_slices"] = b.stats.computeSlices;
  if (b.stats.ncclSlices > 0) {
    otherData["nccl_slices"] = b.stats.ncclSlices;
    otherData["nccl_proxy_steps"] = b.stats.ncclProxySteps;
    if (b.stats.ncclProxySteps == 0) otherData["nccl_note"] = std::string(kNcclNoChunksNote);
  }
  out += "\n],\"otherData\":" + jsonText(otherData) + "}\n";
  if (statsOut) *statsOut = b.stats;
  return out;
}

}  // namespace arl
