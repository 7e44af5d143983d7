// Exporters of a bench session (export.h). The results JSON and the recording go through
// JsonWriter; the trace is assembled by hand because it can hold millions of events and its
// timestamps need a fixed textual form (see usText()).
#include "export/export.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "base/errors.h"
#include "base/limits.h"
#include "export/json.h"
#include "schedule/schedule.h"

namespace arl {

namespace {

// ---- Pieces shared by the results file and the recording -----------------------------------

// perIterationPerRank[i][r]: rank r's time in timed iteration i, in us, from a result's
// per-rank reports (ranks that did not report an iteration count as 0).
std::vector<std::vector<double>> perIterationPerRankUs(const RunResult& res) {
  std::vector<std::vector<double>> m;
  for (const RankIteration& ri : res.perRank) {
    if (ri.rank < 0 || ri.rank >= res.nranks) continue;
    if (m.size() <= ri.iteration) m.resize(ri.iteration + size_t{1});
    auto& row = m[ri.iteration];
    row.resize(static_cast<size_t>(res.nranks), 0.0);
    row[static_cast<size_t>(ri.rank)] = static_cast<double>(ri.timeNs) / 1e3;
  }
  return m;
}

void writeConfig(JsonWriter& j, const BenchConfig& c) {
  j.beginObject()
      .key("minbytes")
      .value(c.minBytes)
      .key("maxbytes")
      .value(c.maxBytes)
      .key("stepfactor")
      .value(c.stepFactor)
      .key("stepbytes")
      .value(c.stepBytes)
      .key("iters")
      .value(c.iters)
      .key("warmup_iters")
      .value(c.warmup)
      .key("check")
      .value(c.check)
      .key("op")
      .value(toString(c.op))
      .key("dtype")
      .value(toString(c.dtype))
      .key("collective")
      .value(toString(c.collective))
      .key("algorithms")
      .beginArray();
  for (const std::string& a : c.algorithms) j.value(a);
  j.endArray()
      .key("workers")
      .value(c.workers)
      .key("ranks_per_host")
      .value(c.ranksPerHost)
      .key("slice_sizes")
      .beginArray();
  for (uint64_t v : c.sliceSizes) j.value(v);
  j.endArray().key("inflights").beginArray();
  for (int v : c.inflights) j.value(v);
  j.endArray().key("ring_order").beginArray();
  for (int v : c.ringOrder) j.value(v);
  j.endArray()
      .key("backend")
      .value(c.backend)
      .key("listen")
      .value(c.listen)
      .key("expect")
      .value(c.expect)
      .key("telemetry")
      .value(toString(c.telemetry))
      .key("data_plane")
      .value(toString(c.dataPlane))
      .key("max_events")
      .value(c.maxEvents)
      .key("root")
      .value(c.root)
      .key("in_place")
      .value(c.inPlace)
      .key("json")
      .value(c.jsonPath)
      .key("csv")
      .value(c.csvPath)
      .key("trace")
      .value(c.tracePath)
      .key("record")
      .value(c.recordPath)
      .endObject();
}

void writeWorker(JsonWriter& j, const WorkerInfo& w) {
  j.beginObject()
      .key("rank")
      .value(w.rank)
      .key("name")
      .value(w.name)
      .key("host")
      .value(w.host)
      .key("pid")
      .value(w.pid)
      .key("local")
      .value(w.local)
      .key("backend")
      .value(w.backend)
      .key("device")
      .value(w.device)
      .key("clock_offset_ns")
      .value(w.clockOffsetNs)
      .key("data_endpoint")
      .value(w.dataEndpoint)
      .endObject();
}

void writeWorkers(JsonWriter& j, const std::vector<WorkerInfo>& ws) {
  j.beginArray();
  for (const WorkerInfo& w : ws) writeWorker(j, w);
  j.endArray();
}

void writeModel(JsonWriter& j, const BenchReport& r) {
  j.beginObject()
      .key("source")
      .value(r.modelSource)
      .key("alpha_s")
      .value(r.model.alpha)
      .key("beta_s_per_byte")
      .value(r.model.beta)
      .key("gamma_s_per_byte")
      .value(r.model.gamma)
      .endObject();
}

uint64_t totalEvents(const BenchReport& r) {
  uint64_t n = 0;
  for (const BenchRow& row : r.rows) n += eventCount(row);
  return n;
}

uint64_t totalDropped(const BenchReport& r) {
  uint64_t n = 0;
  for (const BenchRow& row : r.rows) n += row.result.eventsDropped;
  return n;
}

std::string csvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

// ---- Trace ---------------------------------------------------------------------------------

// Lanes ("threads") of a rank's process in the trace, top to bottom.
enum Lane : int { kIterations, kSteps, kSend, kRecv, kReduce, kRuns, kLaneCount };
constexpr const char* kLaneNames[kLaneCount] = {"iterations", "steps",  "send",
                                                "recv",       "reduce", "runs"};
// Overlapping slices of one lane are spread over sub-lanes ("send", "send #2", ...), because
// a lane ("thread") in the trace-event format must hold properly nested slices; pipelined
// sends overlap without nesting.
constexpr int kMaxSubLanes = 10000;
constexpr int kBenchPid = 1000;  // the process that holds the "runs" lane
constexpr int64_t kCounterWindowNs = 1'000'000;

int rankPid(int rank) { return rank + 1; }
int64_t laneTid(int pid, int lane, int sub) {
  return static_cast<int64_t>(pid) * 100000 + lane * kMaxSubLanes + sub;
}

// Microseconds with nanosecond digits and a trailing 5 (half a nanosecond): trace viewers
// convert with `us * 1000` in floating point and truncate, so "12.3455" becomes exactly
// 12345 ns where "12.345" could become 12344 and break the nesting of adjacent slices.
std::string usText(int64_t ns) {
  if (ns < 0) ns = 0;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%" PRId64 ".%03" PRId64 "5", ns / 1000, ns % 1000);
  return buf;
}

std::string provenanceList(uint64_t mask) {
  std::string s = "[";
  bool first = true;
  for (int r = 0; r < 64; ++r) {
    if (!(mask >> r & 1)) continue;
    s += (first ? "" : ",") + std::to_string(r);
    first = false;
  }
  return s + "]";
}

struct Slice {
  int pid = 0;
  int lane = 0;
  int64_t start = 0;  // ns, relative to the trace origin
  int64_t end = 0;
  std::string name;
  std::string args;  // a JSON object
  int sub = -1;      // sub-lane after packing; -1 = dropped
  uint64_t flowOut = 0, flowIn = 0;
};

std::string chunkArgs(const TelemetryEvent& e, int rank, int peer, uint64_t runId) {
  return "{\"rank\":" + std::to_string(rank) + ",\"peer\":" + std::to_string(peer) +
         ",\"chunk\":" + std::to_string(e.chunk) + ",\"bytes\":" + std::to_string(e.bytes) +
         ",\"step\":" + std::to_string(e.step) + ",\"offset\":" + std::to_string(e.offset) +
         ",\"provenance\":" + provenanceList(e.provenance) +
         ",\"iteration\":" + std::to_string(e.iteration) + ",\"run\":" + std::to_string(runId) +
         ",\"phase\":" + jsonQuote(toString(static_cast<Phase>(e.phase))) + "}";
}

struct TraceBuilder {
  int64_t origin = 0;
  std::vector<Slice> slices;
  std::vector<std::pair<size_t, size_t>> flows;            // (send slice, recv slice)
  std::map<int, std::map<int64_t, double>> sentPerWindow;  // pid -> window -> bytes
  TraceStats stats;

  int64_t rel(int64_t t) const { return t - origin; }

  size_t add(Slice s) {
    if (s.end < s.start) s.end = s.start;
    slices.push_back(std::move(s));
    return slices.size() - 1;
  }

  // Spreads a send's bytes over the counter windows its interval covers.
  void countSent(int pid, int64_t start, int64_t end, uint64_t bytes) {
    auto& w = sentPerWindow[pid];
    if (end <= start) {
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

  void addRow(const BenchRow& row) {
    const RunResult& res = row.result;
    const auto& ev = res.events;
    const uint64_t runId = res.runId;

    if (row.endNs > row.startNs && row.startNs != 0) {
      Slice s;
      s.pid = kBenchPid;
      s.lane = kRuns;
      s.start = rel(row.startNs);
      s.end = rel(row.endNs);
      s.name = res.request.algorithm + " " + std::string(toString(res.request.collective)) + " " +
               formatSize(row.sizeBytes);
      s.args = "{\"run\":" + std::to_string(runId) +
               ",\"algorithm\":" + jsonQuote(res.request.algorithm) +
               ",\"size_bytes\":" + std::to_string(row.sizeBytes) +
               ",\"time_us\":" + jsonNumber(row.metrics.timeUs) +
               ",\"busbw_gbps\":" + jsonNumber(row.metrics.busbwGBps) +
               ",\"state\":" + jsonQuote(toString(res.state)) + "}";
      add(std::move(s));
    }

    // Iterations: each rank's IterationEnd, back-dated by the time the rank measured.
    std::map<std::pair<int, uint32_t>, int64_t> iterNs;
    for (const RankIteration& ri : res.perRank) iterNs[{ri.rank, ri.iteration}] = ri.timeNs;
    std::map<std::pair<int, uint32_t>, int64_t> iterStart;
    for (const TelemetryEvent& e : ev) {
      if (e.kind != EventKind::IterationEnd) continue;
      auto it = iterNs.find({e.rank, e.iteration});
      if (it == iterNs.end()) continue;
      const int64_t start = e.tNs - it->second;
      iterStart[{e.rank, e.iteration}] = start;
      Slice s;
      s.pid = rankPid(e.rank);
      s.lane = kIterations;
      s.start = rel(start);
      s.end = rel(e.tNs);
      s.name = "iteration " + std::to_string(e.iteration);
      s.args = "{\"rank\":" + std::to_string(e.rank) +
               ",\"iteration\":" + std::to_string(e.iteration) +
               ",\"time_us\":" + jsonNumber(static_cast<double>(it->second) / 1e3) +
               ",\"bytes\":" + std::to_string(e.bytes) + ",\"run\":" + std::to_string(runId) + "}";
      add(std::move(s));
    }

    // Steps: from the rank's previous step end (or its iteration's start) to this step end.
    std::map<std::pair<int, uint32_t>, int64_t> lastStepEnd;
    // Sends: SendStart and SendEnd of one message share rank, iteration, peer, step, chunk
    // and offset; pair them first in, first out.
    using SendKey = std::tuple<int, uint32_t, int, uint32_t, uint32_t, uint64_t>;
    std::map<SendKey, std::vector<size_t>> openSends;  // -> indices into `ev`
    struct SendRec {
      size_t startEv;
      int64_t endNs;
      size_t slice = 0;
      bool matched = false;
    };
    std::vector<SendRec> sends;
    std::map<size_t, size_t> sendOfStartEv;
    // Receives pair with sends by channel sequence: the k-th message rank `src` sent to rank
    // `dst` for (iteration, step) is the k-th that `dst` received from `src` for that step.
    using ChanKey = std::tuple<int, int, uint32_t, uint32_t>;     // src, dst, iteration, step
    std::map<ChanKey, std::vector<size_t>> chanSends, chanRecvs;  // sends[] / ev indices
    // Reductions start when the receive they consume ended.
    using RecvKey = std::tuple<int, uint32_t, int, uint32_t, uint64_t>;
    std::map<RecvKey, int64_t> lastRecvEnd;
    // A receive's slice starts no earlier than the rank's previous arrival, so that a rank's
    // receives read as one sequence instead of dozens of overlapping in-flight intervals.
    std::map<int, int64_t> prevArrival;       // rank -> last RecvEnd so far
    std::map<size_t, int64_t> arrivalBefore;  // RecvEnd index -> the rank's previous RecvEnd

    for (size_t i = 0; i < ev.size(); ++i) {
      const TelemetryEvent& e = ev[i];
      switch (e.kind) {
        case EventKind::SendStart: {
          openSends[{e.rank, e.iteration, e.peer, e.step, e.chunk, e.offset}].push_back(i);
          sends.push_back({i, e.tNs});
          sendOfStartEv[i] = sends.size() - 1;
          chanSends[{e.rank, e.peer, e.iteration, e.step}].push_back(sends.size() - 1);
          break;
        }
        case EventKind::SendEnd: {
          auto it = openSends.find({e.rank, e.iteration, e.peer, e.step, e.chunk, e.offset});
          if (it == openSends.end() || it->second.empty()) break;
          sends[sendOfStartEv[it->second.front()]].endNs = e.tNs;
          it->second.erase(it->second.begin());
          break;
        }
        case EventKind::RecvEnd: {
          if (auto p = prevArrival.find(e.rank); p != prevArrival.end()) {
            arrivalBefore[i] = p->second;
          }
          prevArrival[e.rank] = e.tNs;
          chanRecvs[{e.peer, e.rank, e.iteration, e.step}].push_back(i);
          lastRecvEnd[{e.rank, e.iteration, e.peer, e.chunk, e.offset}] = e.tNs;
          break;
        }
        case EventKind::ReduceEnd: {
          Slice s;
          s.pid = rankPid(e.rank);
          s.lane = kReduce;
          s.end = rel(e.tNs);
          s.start = s.end;
          auto it = lastRecvEnd.find({e.rank, e.iteration, e.peer, e.chunk, e.offset});
          if (it != lastRecvEnd.end() && it->second <= e.tNs) {
            s.start = rel(it->second);
            lastRecvEnd.erase(it);
          }
          s.name = "reduce chunk " + std::to_string(e.chunk);
          s.args = chunkArgs(e, e.rank, e.peer, runId);
          add(std::move(s));
          ++stats.slices;
          break;
        }
        case EventKind::StepEnd: {
          const auto key = std::make_pair(static_cast<int>(e.rank), e.iteration);
          int64_t start = e.tNs;
          if (auto it = lastStepEnd.find(key); it != lastStepEnd.end()) {
            start = it->second;
          } else if (auto is = iterStart.find(key); is != iterStart.end()) {
            start = is->second;
          }
          lastStepEnd[key] = e.tNs;
          Slice s;
          s.pid = rankPid(e.rank);
          s.lane = kSteps;
          s.start = rel(std::min(start, e.tNs));
          s.end = rel(e.tNs);
          s.name = "step " + std::to_string(e.step) + " (" +
                   std::string(toString(static_cast<Phase>(e.phase))) + ")";
          s.args = "{\"rank\":" + std::to_string(e.rank) + ",\"step\":" + std::to_string(e.step) +
                   ",\"iteration\":" + std::to_string(e.iteration) +
                   ",\"bytes\":" + std::to_string(e.bytes) + ",\"run\":" + std::to_string(runId) +
                   "}";
          add(std::move(s));
          break;
        }
        case EventKind::IterationEnd: break;
      }
    }

    for (SendRec& sr : sends) {
      const TelemetryEvent& e = ev[sr.startEv];
      Slice s;
      s.pid = rankPid(e.rank);
      s.lane = kSend;
      s.start = rel(e.tNs);
      s.end = rel(std::max(sr.endNs, e.tNs));
      s.name = "send chunk " + std::to_string(e.chunk) + " to " + std::to_string(e.peer);
      s.args = chunkArgs(e, e.rank, e.peer, runId);
      countSent(s.pid, s.start, s.end, e.bytes);
      sr.slice = add(std::move(s));
      ++stats.slices;
    }

    for (auto& [key, recvs] : chanRecvs) {
      auto sit = chanSends.find(key);
      const std::vector<size_t> none;
      const std::vector<size_t>& cs = sit == chanSends.end() ? none : sit->second;
      bool inStep = true;  // stop pairing this channel at the first disagreement
      for (size_t k = 0; k < recvs.size(); ++k) {
        const TelemetryEvent& r = ev[recvs[k]];
        Slice s;
        s.pid = rankPid(r.rank);
        s.lane = kRecv;
        s.end = rel(r.tNs);
        s.start = s.end;
        s.name = "recv chunk " + std::to_string(r.chunk) + " from " + std::to_string(r.peer);
        s.args = chunkArgs(r, r.rank, r.peer, runId);
        SendRec* match = nullptr;
        if (inStep && k < cs.size()) {
          SendRec& cand = sends[cs[k]];
          if (ev[cand.startEv].bytes == r.bytes) {
            match = &cand;
          } else {
            inStep = false;
          }
        }
        if (match) {
          // In flight from the moment the sender started sending until it arrived (or, when
          // it waited behind earlier messages, since the previous arrival).
          int64_t start = ev[match->startEv].tNs;
          if (auto p = arrivalBefore.find(recvs[k]); p != arrivalBefore.end()) {
            start = std::max(start, p->second);
          }
          s.start = std::min(s.end, rel(start));
          match->matched = true;
        } else {
          ++stats.unmatchedRecvs;
        }
        const size_t idx = add(std::move(s));
        ++stats.slices;
        if (match) flows.emplace_back(match->slice, idx);
      }
    }
    for (const SendRec& sr : sends) {
      if (!sr.matched) ++stats.unmatchedSends;
    }
  }

  // Spreads each lane's slices over sub-lanes so that no two in one sub-lane overlap.
  void pack() {
    std::map<std::pair<int, int>, std::vector<size_t>> byLane;
    for (size_t i = 0; i < slices.size(); ++i) {
      byLane[{slices[i].pid, slices[i].lane}].push_back(i);
    }
    for (auto& [lane, idx] : byLane) {
      std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
        return std::tie(slices[a].start, slices[a].end) < std::tie(slices[b].start, slices[b].end);
      });
      std::vector<int64_t> lastEnd;  // per sub-lane, ns; slices start at 0 or later
      for (size_t i : idx) {
        Slice& s = slices[i];
        int sub = -1;
        for (size_t k = 0; k < lastEnd.size(); ++k) {
          // A slice may start where the previous one ends: viewers close a slice at its end
          // timestamp before opening the next (Perfetto's SliceTracker pops when end <= ts).
          if (lastEnd[k] <= s.start) {
            sub = static_cast<int>(k);
            break;
          }
        }
        if (sub < 0 && lastEnd.size() < static_cast<size_t>(kMaxSubLanes)) {
          lastEnd.push_back(0);
          sub = static_cast<int>(lastEnd.size()) - 1;
        }
        if (sub < 0) continue;  // dropped: more overlapping slices than sub-lanes
        s.sub = sub;
        lastEnd[static_cast<size_t>(sub)] = s.end;
      }
    }
  }
};

void appendEvent(std::string& out, bool& first, const std::string& body) {
  out += first ? "\n" : ",\n";
  first = false;
  out += body;
}

std::string metadata(const char* name, int pid, int64_t tid, const std::string& argKey,
                     const std::string& argValueJson) {
  return std::string("{\"ph\":\"M\",\"name\":\"") + name + "\",\"pid\":" + std::to_string(pid) +
         ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"" + argKey + "\":" + argValueJson + "}}";
}

// ---- Recording -----------------------------------------------------------------------------

constexpr const char* kEventColumns[] = {"iteration", "rank", "step",      "kind",
                                         "phase",     "peer", "chunk",     "offset",
                                         "bytes",     "t_ns", "provenance"};

void writeRequest(JsonWriter& j, const RunRequest& q) {
  j.beginObject()
      .key("algorithm")
      .value(q.algorithm)
      .key("collective")
      .value(toString(q.collective))
      .key("dtype")
      .value(toString(q.dtype))
      .key("op")
      .value(toString(q.op))
      .key("count")
      .value(q.count)
      .key("slice_bytes")
      .value(q.sliceBytes)
      .key("root")
      .value(q.root)
      .key("ranks_per_host")
      .value(q.ranksPerHost)
      .key("inflight")
      .value(q.inflight)
      .key("in_place")
      .value(q.inPlace)
      .key("warmup")
      .value(q.warmup)
      .key("iterations")
      .value(q.iterations)
      .key("check")
      .value(q.check)
      .key("telemetry")
      .value(toString(q.telemetry))
      .key("data_plane")
      .value(toString(q.dataPlane))
      .key("max_events")
      .value(q.maxEvents)
      .key("recv_timeout_ms")
      .value(static_cast<int64_t>(q.recvTimeout.count()))
      .endObject();
}

// One line per event, fields separated by spaces (kEventColumns): a recording holds up to
// maxEvents events per run, and a JSON array per event would cost a parsed value per field.
std::string eventsText(const std::vector<TelemetryEvent>& events) {
  std::string out;
  out.reserve(events.size() * 64);
  char buf[256];
  for (const TelemetryEvent& e : events) {
    const int n = std::snprintf(buf, sizeof buf,
                                "%" PRIu32 " %" PRId32 " %" PRIu32 " %s %u %" PRId32 " %" PRIu32
                                " %" PRIu64 " %" PRIu64 " %" PRId64 " %" PRIx64 "\n",
                                e.iteration, e.rank, e.step, std::string(toString(e.kind)).c_str(),
                                static_cast<unsigned>(e.phase), e.peer, e.chunk, e.offset, e.bytes,
                                e.tNs, e.provenance);
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw RecordingError("recording: " + path + ": " + what);
}

const char* typeName(JsonValue::Type t) {
  switch (t) {
    case JsonValue::Type::Null: return "null";
    case JsonValue::Type::Bool: return "a boolean";
    case JsonValue::Type::Number: return "a number";
    case JsonValue::Type::String: return "a string";
    case JsonValue::Type::Array: return "an array";
    case JsonValue::Type::Object: return "an object";
  }
  return "?";
}

// Typed access to the members of a parsed object, with errors that name the field's path.
class Obj {
 public:
  Obj(const JsonValue& v, std::string path) : v_(v), path_(std::move(path)) {
    if (v.type != JsonValue::Type::Object)
      bad(path_, std::string("expected an object, found ") + typeName(v.type));
  }
  const std::string& path() const { return path_; }
  std::string sub(std::string_view k) const { return path_ + "." + std::string(k); }

  const JsonValue& get(std::string_view k, JsonValue::Type t) const {
    auto it = v_.object.find(k);
    if (it == v_.object.end()) bad(sub(k), "missing");
    if (it->second.type != t) {
      bad(sub(k), std::string("expected ") + typeName(t) + ", found " + typeName(it->second.type));
    }
    return it->second;
  }
  Obj obj(std::string_view k) const { return Obj(get(k, JsonValue::Type::Object), sub(k)); }
  const std::vector<JsonValue>& arr(std::string_view k) const {
    return get(k, JsonValue::Type::Array).array;
  }
  const std::string& str(std::string_view k) const {
    return get(k, JsonValue::Type::String).string;
  }
  bool boolean(std::string_view k) const { return get(k, JsonValue::Type::Bool).boolean; }
  double num(std::string_view k) const {
    auto it = v_.object.find(k);
    // Non-finite numbers are written as null.
    if (it != v_.object.end() && it->second.type == JsonValue::Type::Null) {
      return std::numeric_limits<double>::quiet_NaN();
    }
    return get(k, JsonValue::Type::Number).number;
  }
  int64_t i64(std::string_view k) const {
    const JsonValue& v = get(k, JsonValue::Type::Number);
    if (!v.isInteger) bad(sub(k), "expected an integer");
    return v.integer;
  }
  uint64_t u64(std::string_view k) const {
    const int64_t x = i64(k);
    if (x < 0) bad(sub(k), "expected a non-negative integer");
    return static_cast<uint64_t>(x);
  }
  int i32(std::string_view k) const {
    const int64_t x = i64(k);
    if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) {
      bad(sub(k), "out of range");
    }
    return static_cast<int>(x);
  }
  bool has(std::string_view k) const { return v_.object.find(k) != v_.object.end(); }
  // An array of non-negative integers up to `max`.
  std::vector<uint64_t> u64s(std::string_view k, uint64_t max) const {
    std::vector<uint64_t> out;
    const auto& a = arr(k);
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string at = sub(k) + "[" + std::to_string(i) + "]";
      if (a[i].type != JsonValue::Type::Number || !a[i].isInteger || a[i].integer < 0 ||
          static_cast<uint64_t>(a[i].integer) > max) {
        bad(at, "expected an integer in 0.." + std::to_string(max));
      }
      out.push_back(static_cast<uint64_t>(a[i].integer));
    }
    return out;
  }
  template <typename T, typename Parse>
  T parsed(std::string_view k, Parse parse) const {
    const std::string& s = str(k);
    auto x = parse(s);
    if (!x) bad(sub(k), "unknown value '" + s + "'");
    return *x;
  }

 private:
  const JsonValue& v_;
  std::string path_;
};

BenchConfig readConfig(const Obj& o) {
  BenchConfig c;
  c.minBytes = o.u64("minbytes");
  c.maxBytes = o.u64("maxbytes");
  c.stepFactor = o.u64("stepfactor");
  c.stepBytes = o.u64("stepbytes");
  c.iters = o.i32("iters");
  c.warmup = o.i32("warmup_iters");
  c.check = o.boolean("check");
  c.op = o.parsed<RedOp>("op", parseRedOp);
  c.dtype = o.parsed<DataType>("dtype", parseDataType);
  c.collective = o.parsed<Collective>("collective", parseCollective);
  c.algorithms.clear();
  const auto& algos = o.arr("algorithms");
  for (size_t i = 0; i < algos.size(); ++i) {
    if (algos[i].type != JsonValue::Type::String) {
      bad(o.sub("algorithms") + "[" + std::to_string(i) + "]", "expected a string");
    }
    c.algorithms.push_back(algos[i].string);
  }
  c.workers = o.i32("workers");
  c.ranksPerHost = o.i32("ranks_per_host");
  // Files written before the sweep over slice sizes and slices in flight hold one of each.
  if (o.has("chunk_bytes")) {
    c.sliceSizes = {o.u64("chunk_bytes")};
    c.inflights = {o.i32("inflight")};
  } else {
    constexpr uint64_t kIntMax = std::numeric_limits<int>::max();
    c.sliceSizes = o.u64s("slice_sizes", std::numeric_limits<uint64_t>::max());
    c.inflights.clear();
    for (uint64_t v : o.u64s("inflights", kIntMax)) c.inflights.push_back(static_cast<int>(v));
    c.ringOrder.clear();
    for (uint64_t v : o.u64s("ring_order", kIntMax)) c.ringOrder.push_back(static_cast<int>(v));
  }
  c.backend = o.str("backend");
  c.listen = o.str("listen");
  c.expect = o.i32("expect");
  c.telemetry = o.parsed<TelemetryLevel>("telemetry", parseTelemetryLevel);
  // Absent from files written before the shared-memory data plane existed.
  if (o.has("data_plane")) c.dataPlane = o.parsed<DataPlaneKind>("data_plane", parseDataPlaneKind);
  c.maxEvents = o.u64("max_events");
  c.root = o.i32("root");
  c.inPlace = o.boolean("in_place");
  c.jsonPath = o.str("json");
  c.csvPath = o.str("csv");
  c.tracePath = o.str("trace");
  c.recordPath = o.str("record");
  return c;
}

WorkerInfo readWorker(const Obj& o) {
  WorkerInfo w;
  w.rank = o.i32("rank");
  w.name = o.str("name");
  w.host = o.str("host");
  w.pid = o.i64("pid");
  w.local = o.boolean("local");
  w.backend = o.str("backend");
  w.device = o.i32("device");
  w.clockOffsetNs = o.i64("clock_offset_ns");
  w.dataEndpoint = o.str("data_endpoint");
  return w;
}

std::vector<WorkerInfo> readWorkers(const Obj& o, std::string_view k) {
  std::vector<WorkerInfo> ws;
  const auto& a = o.arr(k);
  for (size_t i = 0; i < a.size(); ++i) {
    ws.push_back(readWorker(Obj(a[i], o.sub(k) + "[" + std::to_string(i) + "]")));
  }
  return ws;
}

RunRequest readRequest(const Obj& o) {
  RunRequest q;
  q.algorithm = o.str("algorithm");
  q.collective = o.parsed<Collective>("collective", parseCollective);
  q.dtype = o.parsed<DataType>("dtype", parseDataType);
  q.op = o.parsed<RedOp>("op", parseRedOp);
  q.count = o.u64("count");
  q.sliceBytes = o.u64("slice_bytes");
  q.root = o.i32("root");
  q.ranksPerHost = o.i32("ranks_per_host");
  q.inflight = o.i32("inflight");
  q.inPlace = o.boolean("in_place");
  q.warmup = o.i32("warmup");
  q.iterations = o.i32("iterations");
  q.check = o.boolean("check");
  q.telemetry = o.parsed<TelemetryLevel>("telemetry", parseTelemetryLevel);
  if (o.has("data_plane")) q.dataPlane = o.parsed<DataPlaneKind>("data_plane", parseDataPlaneKind);
  q.maxEvents = o.u64("max_events");
  q.recvTimeout = std::chrono::milliseconds(o.i64("recv_timeout_ms"));
  return q;
}

std::optional<RunState> parseRunState(std::string_view s) {
  for (RunState st : {RunState::Idle, RunState::Queued, RunState::Configuring, RunState::Running,
                      RunState::Done, RunState::Failed, RunState::Aborted, RunState::Refused}) {
    if (toString(st) == s) return st;
  }
  return std::nullopt;
}

std::optional<EventKind> parseEventKind(std::string_view s) {
  for (EventKind k : {EventKind::SendStart, EventKind::SendEnd, EventKind::RecvEnd,
                      EventKind::ReduceEnd, EventKind::StepEnd, EventKind::IterationEnd}) {
    if (toString(k) == s) return k;
  }
  return std::nullopt;
}

// Parses eventsText() output.
std::vector<TelemetryEvent> parseEvents(const std::string& text, uint64_t runId,
                                        const std::string& path) {
  std::vector<TelemetryEvent> out;
  const char* p = text.data();
  const char* const end = p + text.size();
  size_t line = 0;
  while (p < end) {
    ++line;
    const char* eol = std::find(p, end, '\n');
    auto fail = [&](const std::string& what) { bad(path + " line " + std::to_string(line), what); };
    std::vector<std::string_view> f;
    const char* q = p;
    while (q < eol) {
      const char* sp = std::find(q, eol, ' ');
      f.emplace_back(q, static_cast<size_t>(sp - q));
      q = sp == eol ? eol : sp + 1;
    }
    if (f.size() != std::size(kEventColumns)) {
      fail("expected " + std::to_string(std::size(kEventColumns)) + " fields, found " +
           std::to_string(f.size()));
    }
    auto num = [&](size_t i, auto& x, int base = 10) {
      const auto r = std::from_chars(f[i].data(), f[i].data() + f[i].size(), x, base);
      if (r.ec != std::errc() || r.ptr != f[i].data() + f[i].size()) {
        fail(std::string(kEventColumns[i]) + ": bad number '" + std::string(f[i]) + "'");
      }
    };
    TelemetryEvent e;
    e.runId = runId;
    unsigned phase = 0;
    num(0, e.iteration);
    num(1, e.rank);
    num(2, e.step);
    auto kind = parseEventKind(f[3]);
    if (!kind) fail("kind: unknown event kind '" + std::string(f[3]) + "'");
    e.kind = *kind;
    num(4, phase);
    if (phase > static_cast<unsigned>(Phase::Local)) fail("phase: out of range");
    e.phase = static_cast<uint8_t>(phase);
    num(5, e.peer);
    num(6, e.chunk);
    num(7, e.offset);
    num(8, e.bytes);
    num(9, e.tNs);
    num(10, e.provenance, 16);
    out.push_back(e);
    p = eol == end ? end : eol + 1;
  }
  return out;
}

}  // namespace

// ---- Results -------------------------------------------------------------------------------

uint64_t eventCount(const BenchRow& row) {
  return std::max<uint64_t>(row.eventsKept, row.result.events.size());
}

namespace {

// What the run resolved to (RunResult::effective): {"ranks_per_host", "ring_order", "steps",
// "bytes_sent"} (bytes_sent per rank, one collective).
void writeEffective(JsonWriter& j, const ResolvedRun& e) {
  j.key("effective").beginObject().key("ranks_per_host").value(e.ranksPerHost);
  j.key("ring_order").beginArray();
  for (int r : e.ringOrder) j.value(r);
  j.endArray().key("steps").value(e.steps).key("bytes_sent").beginArray();
  for (uint64_t b : e.bytesSent) j.value(b);
  j.endArray().endObject();
}

ResolvedRun readEffective(const Obj& o, int nranks) {
  ResolvedRun e;
  e.nranks = nranks;
  e.ranksPerHost = o.i32("ranks_per_host");
  for (uint64_t r : o.u64s("ring_order", kMaxRanks - 1)) e.ringOrder.push_back(static_cast<int>(r));
  e.steps = static_cast<uint32_t>(o.u64("steps"));
  e.bytesSent = o.u64s("bytes_sent", std::numeric_limits<uint64_t>::max());
  return e;
}

}  // namespace

std::string benchResultsJson(const BenchReport& r) {
  JsonWriter j;
  j.beginObject().key("config");
  writeConfig(j, r.config);
  j.key("workers");
  writeWorkers(j, r.workers);
  j.key("model");
  writeModel(j, r);
  j.key("telemetry")
      .beginObject()
      .key("level")
      .value(toString(r.config.telemetry))
      .key("max_events_per_run")
      .value(r.config.maxEvents)
      .key("events")
      .value(totalEvents(r))
      .key("events_dropped")
      .value(totalDropped(r))
      .endObject();
  j.key("error").value(r.error);
  j.key("results").beginArray();
  for (const BenchRow& row : r.rows) {
    const RunResult& res = row.result;
    const RunRequest& q = res.request;
    j.beginObject()
        .key("size_bytes")
        .value(row.sizeBytes)
        .key("count")
        .value(row.count)
        .key("dtype")
        .value(toString(q.dtype))
        .key("op")
        .value(collectiveReduces(q.collective) ? toString(q.op) : std::string_view("none"))
        .key("root")
        .value(q.root)
        .key("algorithm")
        .value(q.algorithm)
        .key("collective")
        .value(toString(q.collective))
        .key("ranks")
        .value(res.nranks)
        .key("in_place")
        .value(q.inPlace)
        .key("chunk_bytes")
        .value(q.sliceBytes)
        .key("inflight")
        .value(q.inflight)
        .key("time_us")
        .value(row.metrics.timeUs)
        .key("time_rank_mean_us")
        .value(slowestOfRankMeansUs(perIterationPerRankUs(res)))
        .key("algbw_gbps")
        .value(row.metrics.algbwGBps)
        .key("busbw_gbps")
        .value(row.metrics.busbwGBps)
        .key("wrong");
    if (q.check) {
      j.value(row.metrics.wrong);
    } else {
      j.null();
    }
    j.key("predicted_us").value(row.predictedUs);
    j.key("iterations").beginArray();
    for (double us : res.iterationUs) j.value(us);
    j.endArray()
        .key("state")
        .value(toString(res.state))
        .key("error")
        .value(res.error)
        .key("failed_rank")
        .value(res.failedRank)
        .key("run_id")
        .value(res.runId)
        .key("events")
        .value(eventCount(row))
        .key("events_dropped")
        .value(res.eventsDropped)
        .key("events_dropped_slow_client")
        .value(res.telemetry.droppedSlowClient);
    writeEffective(j, res.effective);
    j.endObject();
  }
  j.endArray().endObject();
  return j.str() + "\n";
}

std::string benchResultsCsv(const BenchReport& r) {
  std::string out =
      "size_bytes,count,dtype,op,root,algorithm,collective,ranks,in_place,chunk_bytes,inflight,"
      "time_us,algbw_gbps,busbw_gbps,wrong,predicted_us,iterations,events,events_dropped,state,"
      "error\n";
  for (const BenchRow& row : r.rows) {
    const RunResult& res = row.result;
    const RunRequest& q = res.request;
    const std::vector<std::string> f = {
        std::to_string(row.sizeBytes),
        std::to_string(row.count),
        std::string(toString(q.dtype)),
        collectiveReduces(q.collective) ? std::string(toString(q.op)) : "none",
        std::to_string(q.root),
        q.algorithm,
        std::string(toString(q.collective)),
        std::to_string(res.nranks),
        q.inPlace ? "1" : "0",
        std::to_string(q.sliceBytes),
        std::to_string(q.inflight),
        jsonNumber(row.metrics.timeUs),
        jsonNumber(row.metrics.algbwGBps),
        jsonNumber(row.metrics.busbwGBps),
        q.check ? std::to_string(row.metrics.wrong) : "",
        jsonNumber(row.predictedUs),
        std::to_string(res.iterationUs.size()),
        std::to_string(eventCount(row)),
        std::to_string(res.eventsDropped),
        std::string(toString(res.state)),
        res.error};
    for (size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + csvField(f[i]);
    out += "\n";
  }
  return out;
}

// ---- Trace ---------------------------------------------------------------------------------

std::string chromeTraceJson(const BenchReport& r, TraceStats* statsOut) {
  TraceBuilder b;
  // The origin: the first run's start, or anything earlier (clocks of other hosts are aligned
  // only as well as the ping exchange at join allows), so that no timestamp is negative.
  bool haveOrigin = false;
  auto lower = [&](int64_t t) {
    if (!haveOrigin || t < b.origin) b.origin = t;
    haveOrigin = true;
  };
  for (const BenchRow& row : r.rows) {
    if (row.startNs != 0) lower(row.startNs);
    std::map<std::pair<int, uint32_t>, int64_t> iterNs;
    for (const RankIteration& ri : row.result.perRank) iterNs[{ri.rank, ri.iteration}] = ri.timeNs;
    for (const TelemetryEvent& e : row.result.events) {
      lower(e.tNs);
      // Iterations are back-dated by the time their rank measured.
      if (e.kind != EventKind::IterationEnd) continue;
      if (auto it = iterNs.find({e.rank, e.iteration}); it != iterNs.end()) {
        lower(e.tNs - it->second);
      }
    }
  }
  for (const BenchRow& row : r.rows) b.addRow(row);
  b.pack();

  uint64_t nextFlow = 1;
  for (const auto& [s, d] : b.flows) {
    if (b.slices[s].sub < 0 || b.slices[d].sub < 0) continue;
    // A slice carries one bind_id: a send has one receiver, a receive one sender.
    b.slices[s].flowOut = nextFlow;
    b.slices[d].flowIn = nextFlow;
    ++nextFlow;
    ++b.stats.flows;
  }

  // Process and lane names: every rank known from the workers or the events.
  std::map<int, std::string> procNames;
  auto nameRank = [&](const WorkerInfo& w) {
    if (w.rank < 0) return;
    procNames[rankPid(w.rank)] =
        "rank " + std::to_string(w.rank) + " (" + w.host + ", pid " + std::to_string(w.pid) + ")";
  };
  for (const WorkerInfo& w : r.workers) nameRank(w);
  for (const BenchRow& row : r.rows) {
    for (const WorkerInfo& w : row.result.workers) {
      if (!procNames.count(rankPid(w.rank))) nameRank(w);
    }
  }
  std::map<std::pair<int, int>, int> subLanes;  // (pid, lane) -> sub-lanes used
  for (const Slice& s : b.slices) {
    if (s.sub < 0) continue;
    int& n = subLanes[{s.pid, s.lane}];
    n = std::max(n, s.sub + 1);
    if (s.pid != kBenchPid && !procNames.count(s.pid)) {
      procNames[s.pid] = "rank " + std::to_string(s.pid - 1);
    }
  }
  for (const auto& [pid, w] : b.sentPerWindow) {
    if (!procNames.count(pid)) procNames[pid] = "rank " + std::to_string(pid - 1);
  }

  std::string out = "{\"traceEvents\":[";
  bool first = true;
  if (subLanes.count({kBenchPid, kRuns})) {
    appendEvent(out, first,
                metadata("process_name", kBenchPid, 0, "name", jsonQuote("allreduce-lab bench")));
    appendEvent(out, first, metadata("process_sort_index", kBenchPid, 0, "sort_index", "-1"));
  }
  for (const auto& [pid, name] : procNames) {
    appendEvent(out, first, metadata("process_name", pid, 0, "name", jsonQuote(name)));
    appendEvent(out, first,
                metadata("process_sort_index", pid, 0, "sort_index", std::to_string(pid)));
  }
  for (const auto& [pl, n] : subLanes) {
    for (int sub = 0; sub < n; ++sub) {
      const int64_t tid = laneTid(pl.first, pl.second, sub);
      std::string name = kLaneNames[pl.second];
      if (sub > 0) name += " #" + std::to_string(sub + 1);
      appendEvent(out, first, metadata("thread_name", pl.first, tid, "name", jsonQuote(name)));
      appendEvent(out, first,
                  metadata("thread_sort_index", pl.first, tid, "sort_index",
                           std::to_string(pl.second * kMaxSubLanes + sub)));
    }
  }

  std::vector<size_t> order;
  for (size_t i = 0; i < b.slices.size(); ++i) {
    if (b.slices[i].sub >= 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return b.slices[x].start < b.slices[y].start; });
  for (size_t i : order) {
    const Slice& s = b.slices[i];
    std::string e = "{\"ph\":\"X\",\"cat\":\"" + std::string(kLaneNames[s.lane]) +
                    "\",\"name\":" + jsonQuote(s.name) + ",\"pid\":" + std::to_string(s.pid) +
                    ",\"tid\":" + std::to_string(laneTid(s.pid, s.lane, s.sub)) +
                    ",\"ts\":" + usText(s.start) + ",\"dur\":" + usText(s.end - s.start);
    if (s.flowOut) e += ",\"bind_id\":" + std::to_string(s.flowOut) + ",\"flow_out\":true";
    if (s.flowIn) e += ",\"bind_id\":" + std::to_string(s.flowIn) + ",\"flow_in\":true";
    e += ",\"args\":" + (s.args.empty() ? std::string("{}") : s.args) + "}";
    appendEvent(out, first, e);
  }

  for (const auto& [pid, windows] : b.sentPerWindow) {
    for (auto it = windows.begin(); it != windows.end(); ++it) {
      const double perMs = it->second * 1e6 / static_cast<double>(kCounterWindowNs);
      appendEvent(out, first,
                  "{\"ph\":\"C\",\"name\":\"sent\",\"pid\":" + std::to_string(pid) +
                      ",\"tid\":" + std::to_string(laneTid(pid, kSend, 0)) +
                      ",\"ts\":" + usText(it->first * kCounterWindowNs) +
                      ",\"args\":{\"bytes/ms\":" + jsonNumber(perMs) + "}}");
      ++b.stats.counterSamples;
      auto next = std::next(it);
      if (next == windows.end() || next->first != it->first + 1) {
        appendEvent(out, first,
                    "{\"ph\":\"C\",\"name\":\"sent\",\"pid\":" + std::to_string(pid) +
                        ",\"tid\":" + std::to_string(laneTid(pid, kSend, 0)) + ",\"ts\":" +
                        usText((it->first + 1) * kCounterWindowNs) + ",\"args\":{\"bytes/ms\":0}}");
        ++b.stats.counterSamples;
      }
    }
  }

  JsonWriter other;
  other.beginObject()
      .key("generator")
      .value("allreduce-lab bench")
      .key("clock")
      .value("coordinator steady clock; ts in microseconds from the first run's start")
      .key("origin_ns")
      .value(b.origin)
      .key("runs")
      .value(static_cast<uint64_t>(r.rows.size()))
      .key("flows")
      .value(b.stats.flows)
      .key("unmatched_sends")
      .value(b.stats.unmatchedSends)
      .key("unmatched_recvs")
      .value(b.stats.unmatchedRecvs)
      .key("events_dropped")
      .value(totalDropped(r))
      .endObject();
  out += "\n],\"otherData\":" + other.str() + "}\n";
  if (statsOut) *statsOut = b.stats;
  return out;
}

// ---- Recording -----------------------------------------------------------------------------

std::string recordingJson(const BenchReport& r) {
  JsonWriter j;
  j.beginObject()
      .key("format")
      .value(kRecordingFormat)
      .key("version")
      .value(kRecordingVersion)
      .key("clock")
      .value("coordinator steady clock, nanoseconds")
      .key("config");
  writeConfig(j, r.config);
  j.key("workers");
  writeWorkers(j, r.workers);
  j.key("model");
  writeModel(j, r);
  j.key("error").value(r.error);
  j.key("event_columns").beginArray();
  for (const char* c : kEventColumns) j.value(c);
  j.endArray();
  j.key("runs").beginArray();
  for (const BenchRow& row : r.rows) {
    const RunResult& res = row.result;
    j.beginObject()
        .key("run_id")
        .value(res.runId)
        .key("state")
        .value(toString(res.state))
        .key("error")
        .value(res.error)
        .key("failed_rank")
        .value(res.failedRank)
        .key("size_bytes")
        .value(row.sizeBytes)
        .key("count")
        .value(row.count)
        .key("predicted_us")
        .value(row.predictedUs)
        .key("start_ns")
        .value(row.startNs)
        .key("end_ns")
        .value(row.endNs)
        .key("request");
    writeRequest(j, res.request);
    j.key("nranks").value(res.nranks).key("workers");
    writeWorkers(j, res.workers);
    j.key("time_us")
        .value(res.timeUs)
        .key("wrong")
        .value(res.wrong)
        .key("metrics")
        .beginObject()
        .key("bytes")
        .value(row.metrics.bytes)
        .key("time_us")
        .value(row.metrics.timeUs)
        .key("algbw_gbps")
        .value(row.metrics.algbwGBps)
        .key("busbw_gbps")
        .value(row.metrics.busbwGBps)
        .key("wrong")
        .value(row.metrics.wrong)
        .endObject();
    j.key("iteration_us").beginArray();
    for (double us : res.iterationUs) j.value(us);
    j.endArray();
    // [rank, iteration, time_ns, wrong] per rank and timed iteration.
    j.key("per_rank").beginArray();
    for (const RankIteration& ri : res.perRank) {
      j.beginArray().value(ri.rank).value(ri.iteration).value(ri.timeNs).value(ri.wrong).endArray();
    }
    writeEffective(j.endArray(), res.effective);
    j.key("events_dropped")
        .value(res.eventsDropped)
        .key("event_count")
        .value(static_cast<uint64_t>(res.events.size()))
        .key("events")
        .value(eventsText(res.events))
        .endObject();
  }
  j.endArray().endObject();
  return j.str() + "\n";
}

BenchReport parseRecording(std::string_view text) {
  JsonValue root;
  try {
    root = parseJson(text);
  } catch (const JsonParseError& e) {
    throw RecordingError(std::string("recording: not valid JSON: ") + e.what());
  }
  const Obj top(root, "recording");
  if (top.str("format") != kRecordingFormat) {
    bad("recording.format", "'" + top.str("format") + "' is not " + std::string(kRecordingFormat));
  }
  const int64_t version = top.i64("version");
  if (version != kRecordingVersion) {
    bad("recording.version", "version " + std::to_string(version) +
                                 " is not supported (this build reads version " +
                                 std::to_string(kRecordingVersion) + ")");
  }
  const auto& cols = top.arr("event_columns");
  bool colsOk = cols.size() == std::size(kEventColumns);
  for (size_t i = 0; colsOk && i < cols.size(); ++i) {
    colsOk = cols[i].type == JsonValue::Type::String && cols[i].string == kEventColumns[i];
  }
  if (!colsOk) bad("recording.event_columns", "columns differ from this version's");

  BenchReport r;
  r.config = readConfig(top.obj("config"));
  r.workers = readWorkers(top, "workers");
  const Obj model = top.obj("model");
  r.modelSource = model.str("source");
  r.model.alpha = model.num("alpha_s");
  r.model.beta = model.num("beta_s_per_byte");
  r.model.gamma = model.num("gamma_s_per_byte");
  r.error = top.str("error");
  const auto& runs = top.arr("runs");
  for (size_t i = 0; i < runs.size(); ++i) {
    const Obj o(runs[i], "recording.runs[" + std::to_string(i) + "]");
    BenchRow row;
    RunResult& res = row.result;
    res.runId = o.u64("run_id");
    res.state = o.parsed<RunState>("state", parseRunState);
    res.error = o.str("error");
    res.failedRank = o.i32("failed_rank");
    row.sizeBytes = o.u64("size_bytes");
    row.count = o.u64("count");
    row.predictedUs = o.num("predicted_us");
    row.startNs = o.i64("start_ns");
    row.endNs = o.i64("end_ns");
    res.request = readRequest(o.obj("request"));
    res.nranks = o.i32("nranks");
    res.workers = readWorkers(o, "workers");
    res.timeUs = o.num("time_us");
    res.wrong = o.u64("wrong");
    const Obj m = o.obj("metrics");
    row.metrics.bytes = m.u64("bytes");
    row.metrics.timeUs = m.num("time_us");
    row.metrics.algbwGBps = m.num("algbw_gbps");
    row.metrics.busbwGBps = m.num("busbw_gbps");
    row.metrics.wrong = m.u64("wrong");
    const auto& its = o.arr("iteration_us");
    for (size_t k = 0; k < its.size(); ++k) {
      if (its[k].type != JsonValue::Type::Number) {
        bad(o.sub("iteration_us") + "[" + std::to_string(k) + "]", "expected a number");
      }
      res.iterationUs.push_back(its[k].number);
    }
    const auto& pr = o.arr("per_rank");
    for (size_t k = 0; k < pr.size(); ++k) {
      const std::string p = o.sub("per_rank") + "[" + std::to_string(k) + "]";
      const JsonValue& a = pr[k];
      if (a.type != JsonValue::Type::Array || a.array.size() != 4 ||
          !std::all_of(a.array.begin(), a.array.end(),
                       [](const JsonValue& x) { return x.isInteger; })) {
        bad(p, "expected [rank, iteration, time_ns, wrong] as integers");
      }
      RankIteration ri;
      ri.rank = static_cast<int>(a.array[0].integer);
      ri.iteration = static_cast<uint32_t>(a.array[1].integer);
      ri.timeNs = a.array[2].integer;
      ri.wrong = static_cast<uint64_t>(a.array[3].integer);
      res.perRank.push_back(ri);
    }
    res.eventsDropped = o.u64("events_dropped");
    if (o.has("effective")) res.effective = readEffective(o.obj("effective"), res.nranks);
    res.events = parseEvents(o.str("events"), res.runId, o.sub("events"));
    const uint64_t expected = o.u64("event_count");
    if (res.events.size() != expected) {
      bad(o.sub("events"), "holds " + std::to_string(res.events.size()) +
                               " events, event_count says " + std::to_string(expected));
    }
    r.rows.push_back(std::move(row));
  }
  return r;
}

BenchReport readRecording(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw RecordingError("cannot read recording '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return parseRecording(ss.str());
  } catch (const RecordingError& e) {
    throw RecordingError(path + ": " + e.what());
  }
}

void writeTextFile(const std::string& path, std::string_view text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw ConfigError("cannot write '" + path + "'");
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  f.flush();
  if (!f) throw ConfigError("writing '" + path + "' failed (disk full?)");
}

}  // namespace arl
