// Recordings (export.h): everything a replay needs, as one JSON object. Telemetry events are
// one text line each inside a string per run (kEventColumns): a recording holds up to a
// million events per run, and a JSON array per event would cost a parsed value per field.
//
// The reader takes files from elsewhere (recordings are shared between classrooms): the JSON
// goes through parseJsonLimited(), every field is checked for presence, type and range, and an
// error names the JSON path of the bad value ("recording.runs[2].request.dtype: missing").
#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "base/input_file.h"
#include "base/limits.h"
#include "export/export.h"
#include "export/json_in.h"
#include "export/session_json.h"

namespace arl {

namespace {

// Version 2 added "clock" (host or device, what timed t_ns); version 1 recordings have the
// first 11 columns, and their events were all timed by the host.
constexpr const char* kEventColumns[] = {"iteration", "rank", "step",       "kind",
                                         "phase",     "peer", "chunk",      "offset",
                                         "bytes",     "t_ns", "provenance", "clock"};
constexpr size_t kColumns = std::size(kEventColumns);
constexpr size_t kVersion1Columns = 11;

// Recordings nest 7 levels deep (a run's slow links); their size is what bounds the events they may
// hold.
constexpr JsonLimits kRecordingLimits{};

// Timestamps and durations stay within +-2^62 ns (146 years), so that differences of two of
// them never overflow.
constexpr int64_t kMaxAbsNs = int64_t{1} << 62;

// ---- Writing -------------------------------------------------------------------------------

template <typename T>
void appendNumber(std::string& out, T v, int base = 10) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, base);
  out.append(buf, r.ptr);
}

std::string eventsText(const std::vector<TelemetryEvent>& events) {
  std::string out;
  out.reserve(events.size() * 64);
  for (const TelemetryEvent& e : events) {
    appendNumber(out, e.iteration);
    out += ' ';
    appendNumber(out, e.rank);
    out += ' ';
    appendNumber(out, e.step);
    out += ' ';
    out += toString(e.kind);
    out += ' ';
    appendNumber(out, static_cast<unsigned>(e.phase));
    out += ' ';
    appendNumber(out, e.peer);
    out += ' ';
    appendNumber(out, e.chunk);
    out += ' ';
    appendNumber(out, e.offset);
    out += ' ';
    appendNumber(out, e.bytes);
    out += ' ';
    appendNumber(out, e.tNs);
    out += ' ';
    appendNumber(out, e.provenance, 16);
    out += ' ';
    out += toString(e.clock);
    out += '\n';
  }
  return out;
}

Json perRankJson(const std::vector<RankIteration>& perRank) {
  Json a = Json::array();
  for (const RankIteration& ri : perRank) a.push_back({ri.rank, ri.iteration, ri.timeNs, ri.wrong});
  return a;
}

Json metricsJson(const Metrics& m) {
  return Json{{"bytes", m.bytes},          {"time_us", m.timeUs},      {"algbw_gbps", m.algbwGBps},
              {"busbw_gbps", m.busbwGBps}, {"wrong", m.wrong},         {"p50_us", m.spread.p50Us},
              {"p90_us", m.spread.p90Us},  {"p99_us", m.spread.p99Us}, {"max_us", m.spread.maxUs}};
}

Json runJson(const BenchRow& row) {
  const RunResult& res = row.result;
  return Json{
      {"run_id", res.runId},
      {"state", str(toString(res.state))},
      {"error", res.error},
      {"failed_rank", res.failedRank},
      {"size_bytes", row.sizeBytes},
      {"count", row.count},
      {"predicted_us", row.predictedUs},
      {"predicted_method", row.predictedBy ? Json(str(toString(*row.predictedBy))) : Json(nullptr)},
      {"start_ns", row.startNs},
      {"end_ns", row.endNs},
      {"request", requestJson(res.request)},
      {"nranks", res.nranks},
      {"workers", workersJson(res.workers)},
      {"time_us", res.timeUs},
      {"wrong", res.wrong},
      {"metrics", metricsJson(row.metrics)},
      {"iteration_us", res.iterationUs},
      // [rank, iteration, time_ns, wrong] per rank and timed iteration.
      {"per_rank", perRankJson(res.perRank)},
      {"effective", effectiveJson(res.effective)},
      {"events_dropped", res.eventsDropped},
      {"event_count", static_cast<uint64_t>(res.events.size())},
      {"events", eventsText(res.events)}};
}

// ---- Reading -------------------------------------------------------------------------------

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw RecordingError("recording: " + path + ": " + what);
}

std::vector<int> ints(const In& a, int lo, int hi) {
  return readArray<int>(a, [&](const In& x) { return x.i32(lo, hi); });
}

// A rate in bytes per second: positive and finite, or 0 (not shaped) where `zeroOk`.
double readRate(const In& x, bool zeroOk) {
  const double r = x.num();
  if (!std::isfinite(r) || r < 0 || (r == 0 && !zeroOk)) {
    x.fail(x.path(), "rate " + x.raw().dump() +
                         (zeroOk ? " must be 0 (not shaped) or positive" : " must be positive"));
  }
  return r;
}

// The links' own latencies (a named topology's; files written before them have none).
void readLinkLatencies(const In& o, LinkShaping& s) {
  if (!o.has("link_latencies")) return;
  const In links = o["link_latencies"];
  for (size_t i = 0, n = links.size(); i < n; ++i) {
    const In l = links[i].object();
    const int from = l["from"].i32(0, kMaxRanks - 1), to = l["to"].i32(0, kMaxRanks - 1);
    const std::string name = std::to_string(from) + "-" + std::to_string(to);
    if (from == to) l.fail(l.path(), "link " + name + " joins a rank to itself");
    const In lat = l["latency_s"];
    const double seconds = lat.num();
    if (!std::isfinite(seconds) || seconds < 0) {
      lat.fail(lat.path(), "latency " + lat.raw().dump() + " must be 0 or more seconds");
    }
    if (!s.linkLatencySeconds.emplace(std::pair{from, to}, seconds).second) {
      l.fail(l.path(), "latency of link " + name + " is listed twice");
    }
  }
}

// The network's shaping (shapingJson); entries name ranks within the lab's limit, each rank
// and link once. Whether the ranks exist in the run's world is the run's to say, not the file's.
LinkShaping readShaping(const In& a) {
  const In o = a.object();
  LinkShaping s;
  s.portBytesPerSecond = readRate(o["port_bytes_per_s"], true);
  const In lat = o["added_latency_s"];
  s.addedLatencySeconds = lat.num();
  if (!std::isfinite(s.addedLatencySeconds) || s.addedLatencySeconds < 0) {
    lat.fail(lat.path(), "latency " + lat.raw().dump() + " must be 0 or more seconds");
  }
  const In ranks = o["slow_ranks"];
  for (size_t i = 0, n = ranks.size(); i < n; ++i) {
    const In r = ranks[i].object();
    const int rank = r["rank"].i32(0, kMaxRanks - 1);
    if (!s.rankPortBytesPerSecond.emplace(rank, readRate(r["bytes_per_s"], false)).second) {
      r.fail(r.path(), "rank " + std::to_string(rank) + " is listed twice");
    }
  }
  const In links = o["slow_links"];
  for (size_t i = 0, n = links.size(); i < n; ++i) {
    const In l = links[i].object();
    const int from = l["from"].i32(0, kMaxRanks - 1), to = l["to"].i32(0, kMaxRanks - 1);
    const std::string name = std::to_string(from) + "-" + std::to_string(to);
    if (from == to) l.fail(l.path(), "link " + name + " joins a rank to itself");
    if (!s.linkBytesPerSecond.emplace(std::pair{from, to}, readRate(l["bytes_per_s"], false))
             .second) {
      l.fail(l.path(), "link " + name + " is listed twice");
    }
  }
  readLinkLatencies(o, s);
  return s;
}

// Files written before the sweep over slice sizes and slices in flight hold one of each.
void readSweepLists(const In& o, BenchConfig& c) {
  if (o.has("chunk_bytes")) {
    c.sliceSizes = {o["chunk_bytes"].u64()};
    c.inflights = {o["inflight"].i32(1, static_cast<int>(kMaxInflight))};
    return;
  }
  c.sliceSizes = readArray<uint64_t>(o["slice_sizes"], [](const In& x) { return x.u64(); });
  c.inflights = ints(o["inflights"], 1, static_cast<int>(kMaxInflight));
  c.ringOrder = ints(o["ring_order"], 0, kMaxRanks - 1);
}

// The iterations checked: "check_iterations", or, in files written before -c counted them,
// 1 for a "check" that is true.
uint32_t checkIterations(const In& o) {
  if (o.has("check_iterations")) {
    return static_cast<uint32_t>(o["check_iterations"].u64(kMaxIterations));
  }
  return o["check"].boolean() ? 1 : 0;
}

BenchConfig readConfig(const In& o) {
  BenchConfig c;
  c.minBytes = o["minbytes"].u64();
  c.maxBytes = o["maxbytes"].u64();
  c.stepFactor = o["stepfactor"].u64();
  c.stepBytes = o["stepbytes"].u64();
  c.iters = o["iters"].i32();
  c.warmup = o["warmup_iters"].i32();
  c.check = checkIterations(o);
  c.op = o["op"].parsed<RedOp>(parseRedOp);
  c.dtype = o["dtype"].parsed<DataType>(parseDataType);
  c.collective = o["collective"].parsed<Collective>(parseCollective);
  c.algorithms = readArray<std::string>(o["algorithms"], [](const In& x) { return x.str(); });
  c.workers = o["workers"].i32();
  c.ranksPerHost = o["ranks_per_host"].i32();
  if (o.has("radix")) c.radix = o["radix"].i32(0, kMaxRanks);  // absent before protocol 14
  // Absent before protocol 15: every ring took its slices one by one.
  if (o.has("window")) c.window = o["window"].i32(1, static_cast<int>(kMaxInflight));
  readSweepLists(o, c);
  c.backend = o["backend"].str();
  // Absent from files written before the backend list and Open MPI.
  const auto text = [](const In& x) { return x.str(); };
  if (o.has("backends")) c.backends = readArray<std::string>(o["backends"], text);
  if (o.has("mpi_mca")) c.mpiMca = readArray<std::string>(o["mpi_mca"], text);
  c.listen = o["listen"].str();
  c.expect = o["expect"].i32();
  c.telemetry = o["telemetry"].parsed<TelemetryLevel>(parseTelemetryLevel);
  // Absent from files written before the shared-memory data plane existed.
  if (o.has("data_plane")) c.dataPlane = o["data_plane"].parsed<DataPlaneKind>(parseDataPlaneKind);
  // Absent from files written before CUDA IPC: it was off then.
  c.cudaIpc = o.has("cuda_ipc") && o["cuda_ipc"].boolean();
  c.maxEvents = o["max_events"].u64();
  if (o.has("stall_timeout_ms")) {
    c.stallTimeout = std::chrono::milliseconds(o["stall_timeout_ms"].i64(1, kMaxStallTimeoutMs));
  }
  // Absent from files written before the network could be shaped: the machine's own.
  if (o.has("shaping")) c.shaping = readShaping(o["shaping"]);
  if (o.has("topology") && !o["topology"].raw().is_null()) c.topology = o["topology"].str();
  c.root = o["root"].i32();
  c.inPlace = o["in_place"].boolean();
  c.jsonPath = o["json"].str();
  c.csvPath = o["csv"].str();
  c.tracePath = o["trace"].str();
  c.recordPath = o["record"].str();
  return c;
}

WorkerInfo readWorker(const In& a) {
  const In o = a.object();
  WorkerInfo w;
  w.rank = o["rank"].i32(-1, kMaxRanks - 1);
  w.name = o["name"].str();
  w.host = o["host"].str();
  w.pid = o["pid"].i64();
  w.local = o["local"].boolean();
  w.backend = o["backend"].str();
  w.device = o["device"].i32();
  w.clockOffsetNs = o["clock_offset_ns"].i64(-kMaxAbsNs, kMaxAbsNs);
  w.dataEndpoint = o["data_endpoint"].str();
  return w;
}

std::vector<WorkerInfo> readWorkers(const In& a) { return readArray<WorkerInfo>(a, readWorker); }

RunRequest readRequest(const In& a) {
  const In o = a.object();
  RunRequest q;
  q.algorithm = o["algorithm"].str();
  q.collective = o["collective"].parsed<Collective>(parseCollective);
  q.dtype = o["dtype"].parsed<DataType>(parseDataType);
  q.op = o["op"].parsed<RedOp>(parseRedOp);
  q.count = o["count"].u64();
  q.sliceBytes = o["slice_bytes"].u64();
  q.root = o["root"].i32(0, kMaxRanks - 1);
  q.ranksPerHost = o["ranks_per_host"].i32(0, kMaxRanks);
  if (o.has("radix")) q.radix = o["radix"].i32(0, kMaxRanks);  // absent before protocol 14
  if (o.has("window")) q.window = o["window"].i32(1, static_cast<int>(kMaxInflight));  // 15
  // Absent from files written before the ring order was editable.
  if (o.has("ring_order")) q.ringOrder = ints(o["ring_order"], 0, kMaxRanks - 1);
  q.inflight = o["inflight"].i32(1, static_cast<int>(kMaxInflight));
  q.inPlace = o["in_place"].boolean();
  q.warmup = o["warmup"].i32(0, static_cast<int>(kMaxIterations));
  q.iterations = o["iterations"].i32(1, static_cast<int>(kMaxIterations));
  q.check = checkIterations(o);
  q.telemetry = o["telemetry"].parsed<TelemetryLevel>(parseTelemetryLevel);
  if (o.has("data_plane")) q.dataPlane = o["data_plane"].parsed<DataPlaneKind>(parseDataPlaneKind);
  q.cudaIpc = o.has("cuda_ipc") && o["cuda_ipc"].boolean();
  q.maxEvents = o["max_events"].u64();
  // Absent from files written before runs had a stall timeout (they had a receive timeout).
  if (o.has("stall_timeout_ms")) {
    q.stallTimeout = std::chrono::milliseconds(o["stall_timeout_ms"].i64(1, kMaxStallTimeoutMs));
  }
  // Absent from files written before the network could be shaped: the run was not.
  if (o.has("shaping")) q.shaping = readShaping(o["shaping"]);
  // Only a training run's request has it; files written before training was recorded, none.
  if (o.has("train")) q.train = readTrainConfig(o["train"].object());
  return q;
}

std::optional<RunState> parseRunState(std::string_view s) {
  for (RunState st : {RunState::Idle, RunState::Queued, RunState::Configuring, RunState::Running,
                      RunState::Done, RunState::Failed, RunState::Aborted, RunState::Refused}) {
    if (toString(st) == s) return st;
  }
  return std::nullopt;
}

std::optional<PredictionMethod> parsePredictionMethod(std::string_view s) {
  for (PredictionMethod m :
       {PredictionMethod::ClosedForm, PredictionMethod::Simulation, PredictionMethod::SharedMemory,
        PredictionMethod::SharedMemoryCached}) {
    if (toString(m) == s) return m;
  }
  return std::nullopt;
}

std::optional<EventKind> parseEventKind(std::string_view s) {
  for (unsigned i = 0; i <= static_cast<unsigned>(kLastEventKind); ++i) {
    const auto k = static_cast<EventKind>(i);
    if (toString(k) == s) return k;
  }
  return std::nullopt;
}

RankIteration readPerRank(const In& a) {
  if (a.size() != 4) bad(a.path(), "expected [rank, iteration, time_ns, wrong]");
  RankIteration ri;
  ri.rank = a[0].i32(0, kMaxRanks - 1);
  ri.iteration = static_cast<uint32_t>(a[1].u64(kMaxIterations - 1));
  ri.timeNs = a[2].i64(-kMaxAbsNs, kMaxAbsNs);
  ri.wrong = a[3].u64();
  return ri;
}

// One line of the events text: the fields of kEventColumns, separated by single spaces.
class EventLine {
 public:
  EventLine(std::string_view line, const std::string& path, size_t number, size_t columns)
      : rest_(line), path_(path), number_(number), columns_(columns) {}

  TelemetryEvent read(uint64_t runId) {
    TelemetryEvent e;
    e.runId = runId;
    num(e.iteration);
    num(e.rank, 0, kMaxRanks - 1);
    num(e.step);
    const std::string_view kind = field();
    const auto k = parseEventKind(kind);
    if (!k) fail("kind: unknown event kind '" + std::string(kind) + "'");
    e.kind = *k;
    unsigned phase = 0;
    num(phase, 0u, static_cast<unsigned>(Phase::Local));
    e.phase = static_cast<uint8_t>(phase);
    num(e.peer, -1, kMaxRanks - 1);
    num(e.chunk);
    num(e.offset);
    num(e.bytes);
    num(e.tNs, -kMaxAbsNs, kMaxAbsNs);
    num(e.provenance, uint64_t{0}, std::numeric_limits<uint64_t>::max(), 16);
    if (columns_ > kVersion1Columns) {
      const std::string_view clock = field();
      const auto c = parseClockSource(clock);
      if (!c) fail("clock: neither host nor device: '" + std::string(clock.substr(0, 40)) + "'");
      e.clock = *c;
    }
    if (!rest_.empty() || !lastField_) fail("more than " + std::to_string(columns_) + " fields");
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    bad(path_ + " line " + std::to_string(number_), what);
  }

  std::string_view field() {
    if (lastField_) {
      fail("expected " + std::to_string(columns_) + " fields, found " + std::to_string(index_));
    }
    const size_t sp = rest_.find(' ');
    const std::string_view f = rest_.substr(0, sp);
    lastField_ = sp == std::string_view::npos;
    rest_ = lastField_ ? std::string_view() : rest_.substr(sp + 1);
    ++index_;
    return f;
  }

  template <typename T>
  void num(T& x, T lo = std::numeric_limits<T>::min(), T hi = std::numeric_limits<T>::max(),
           int base = 10) {
    const char* column = kEventColumns[index_];
    const std::string_view f = field();
    const auto r = std::from_chars(f.data(), f.data() + f.size(), x, base);
    if (r.ec != std::errc() || r.ptr != f.data() + f.size() || x < lo || x > hi) {
      fail(std::string(column) + ": bad number '" + std::string(f.substr(0, 40)) + "'");
    }
  }

  std::string_view rest_;
  const std::string& path_;
  size_t number_;
  size_t columns_;
  size_t index_ = 0;
  bool lastField_ = false;
};

std::vector<TelemetryEvent> parseEvents(std::string_view text, uint64_t runId,
                                        const std::string& path, size_t columns) {
  std::vector<TelemetryEvent> out;
  // One event per line: the text bounds what this may reserve.
  out.reserve(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1);
  size_t line = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    out.push_back(EventLine(text.substr(0, eol), path, ++line, columns).read(runId));
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
  }
  return out;
}

ResolvedRun readEffective(const In& a, int nranks) {
  const In o = a.object();
  ResolvedRun e;
  // The collective's ranks: the workers less the switch's (absent before protocol 14: all; 0:
  // a result that never resolved, as a run refused before it started).
  e.nranks = o.has("ranks") ? o["ranks"].i32(0, nranks) : nranks;
  e.ranksPerHost = o["ranks_per_host"].i32(0, kMaxRanks);
  // Absent before protocol 14: such runs used the default; 0 with nothing resolved.
  e.radix =
      o.has("radix") ? o["radix"].i32(e.nranks == 0 ? 0 : 2, kMaxRanks) : resolveRadix(0, nranks);
  e.ringOrder = ints(o["ring_order"], 0, kMaxRanks - 1);
  e.steps = static_cast<uint32_t>(o["steps"].u64(std::numeric_limits<uint32_t>::max()));
  e.bytesSent = readArray<uint64_t>(o["bytes_sent"], [](const In& x) { return x.u64(); });
  if (e.ringOrder.size() > static_cast<size_t>(kMaxRanks) ||
      e.bytesSent.size() > static_cast<size_t>(kMaxRanks)) {
    bad(a.path(), "names more than " + std::to_string(kMaxRanks) + " ranks");
  }
  return e;
}

// `iterationUs`: the run's iteration times, which recordings written before the metrics
// carried their spread hold all the same; the spread is computed from them then.
Metrics readMetrics(const In& a, const std::vector<double>& iterationUs) {
  const In m = a.object();
  Metrics x;
  x.bytes = m["bytes"].u64();
  x.timeUs = m["time_us"].num();
  x.algbwGBps = m["algbw_gbps"].num();
  x.busbwGBps = m["busbw_gbps"].num();
  x.wrong = m["wrong"].u64();
  if (m.has("p50_us")) {
    x.spread.p50Us = m["p50_us"].num();
    x.spread.p90Us = m["p90_us"].num();
    x.spread.p99Us = m["p99_us"].num();
    x.spread.maxUs = m["max_us"].num();
  } else {
    x.spread = iterationSpread(iterationUs);
  }
  return x;
}

// A time or a rate: never negative (null, a run that has none, reads as NaN).
void notNegative(const In& o, double x) {
  if (x < 0) bad(o.path(), std::to_string(x) + " is negative");
}

// What one field of a run says must agree with the others: a recording that contradicts
// itself (times below zero, events of ranks the run did not have, more ranks than workers)
// would draw a chart or a heat map of things that never happened.
void checkRunAgrees(const In& o, const BenchRow& row) {
  const RunResult& res = row.result;
  notNegative(o["time_us"], res.timeUs);
  const In m = o["metrics"];
  notNegative(m["time_us"], row.metrics.timeUs);
  notNegative(m["algbw_gbps"], row.metrics.algbwGBps);
  notNegative(m["busbw_gbps"], row.metrics.busbwGBps);
  for (size_t i = 0; i < res.iterationUs.size(); ++i) {
    notNegative(o["iteration_us"][i], res.iterationUs[i]);
  }
  const int n = res.nranks;
  if (n == 0) {
    if (res.state == RunState::Done) bad(o["nranks"].path(), "0 ranks in a run that completed");
    return;
  }
  int ranked = 0;
  for (size_t i = 0; i < res.workers.size(); ++i) {
    if (res.workers[i].rank >= n) {
      bad(o["workers"][i]["rank"].path(),
          "rank " + std::to_string(res.workers[i].rank) + " in a run of " + std::to_string(n));
    }
    ranked += res.workers[i].rank >= 0 ? 1 : 0;
  }
  if (!res.workers.empty() && ranked != n) {
    bad(o["nranks"].path(),
        std::to_string(n) + " ranks, but the run's workers hold " + std::to_string(ranked));
  }
  if (res.failedRank >= n) bad(o["failed_rank"].path(), "is not a rank of the run");
  for (size_t i = 0; i < res.perRank.size(); ++i) {
    if (res.perRank[i].rank >= n) bad(o["per_rank"][i].path(), "names a rank the run had not");
  }
  for (size_t i = 0; i < res.events.size(); ++i) {
    const TelemetryEvent& e = res.events[i];
    if (e.rank >= n || e.peer >= n) {
      bad(o["events"].path() + " line " + std::to_string(i + 1),
          "rank " + std::to_string(std::max(e.rank, e.peer)) + " in a run of " + std::to_string(n) +
              " ranks");
    }
  }
}

// `columns`: event columns of the recording's version.
BenchRow readRun(const In& a, size_t columns) {
  const In o = a.object();
  BenchRow row;
  RunResult& res = row.result;
  res.runId = o["run_id"].u64();
  res.state = o["state"].parsed<RunState>(parseRunState);
  res.error = o["error"].str();
  res.failedRank = o["failed_rank"].i32(-1, kMaxRanks - 1);
  row.sizeBytes = o["size_bytes"].u64();
  row.count = o["count"].u64();
  row.predictedUs = o["predicted_us"].num();
  // Absent from files written before predictions said how they were made; null: no prediction.
  if (o.has("predicted_method") && !o["predicted_method"].raw().is_null()) {
    row.predictedBy = o["predicted_method"].parsed<PredictionMethod>(parsePredictionMethod);
  }
  row.startNs = o["start_ns"].i64(-kMaxAbsNs, kMaxAbsNs);
  row.endNs = o["end_ns"].i64(-kMaxAbsNs, kMaxAbsNs);
  res.request = readRequest(o["request"]);
  res.nranks = o["nranks"].i32(0, kMaxRanks);
  res.workers = readWorkers(o["workers"]);
  res.timeUs = o["time_us"].num();
  res.wrong = o["wrong"].u64();
  res.iterationUs = readArray<double>(o["iteration_us"], [](const In& x) { return x.num(); });
  row.metrics = readMetrics(o["metrics"], res.iterationUs);
  res.perRank = readArray<RankIteration>(o["per_rank"], readPerRank);
  // Absent from recordings written before runs carried what they resolved to.
  if (o.has("effective")) res.effective = readEffective(o["effective"], res.nranks);
  res.eventsDropped = o["events_dropped"].u64();
  const In events = o["events"];
  res.events = parseEvents(events.str(), res.runId, events.path(), columns);
  const uint64_t expected = o["event_count"].u64();
  if (res.events.size() != expected) {
    bad(events.path(), "holds " + std::to_string(res.events.size()) + " events, event_count says " +
                           std::to_string(expected));
  }
  checkRunAgrees(o, row);
  // Not stored: the events say it (those the recording kept; the live count saw every one).
  res.sent = sentOf(res.events, res.nranks);
  return row;
}

// Returns the number of event columns of the recording's version.
size_t checkHeader(const In& top) {
  const std::string& format = top["format"].str();
  if (format != kRecordingFormat) {
    bad("recording.format", "'" + format + "' is not " + std::string(kRecordingFormat));
  }
  const int64_t version = top["version"].i64();
  if (version != kRecordingVersion && version != 1) {
    bad("recording.version", "version " + std::to_string(version) +
                                 " is not supported (this build reads versions 1 and " +
                                 std::to_string(kRecordingVersion) + ")");
  }
  const size_t columns = version == 1 ? kVersion1Columns : kColumns;
  const In cols = top["event_columns"];
  bool colsOk = cols.size() == columns;
  for (size_t i = 0; colsOk && i < columns; ++i) {
    const JsonIn& c = cols[i].raw();
    colsOk = c.is_string() && c.get_ref<const std::string&>() == kEventColumns[i];
  }
  if (!colsOk) bad("recording.event_columns", "columns differ from this version's");
  return columns;
}

}  // namespace

std::string recordingJson(const BenchReport& r) {
  Json runs = Json::array();
  for (const BenchRow& row : r.rows) runs.push_back(runJson(row));
  const Json j{{"format", str(kRecordingFormat)},
               {"version", kRecordingVersion},
               {"clock", "coordinator steady clock, nanoseconds"},
               {"config", configJson(r.config)},
               {"workers", workersJson(r.workers)},
               {"model", modelJson(r)},
               {"error", r.error},
               {"source", r.source},
               {"event_columns", kEventColumns},
               {"runs", std::move(runs)}};
  std::string text = jsonText(j);
  text += '\n';  // appended, not concatenated: a recording is tens of megabytes
  return text;
}

BenchReport parseRecording(std::string_view text) {
  JsonIn root;
  try {
    root = parseJsonLimited(text, kRecordingLimits);
  } catch (const JsonInputError& e) {
    throw RecordingError(std::string("recording: ") + e.what());
  }
  const JsonFail fail = bad;
  const In top = In(root, "recording", fail).object();
  const size_t columns = checkHeader(top);
  BenchReport r;
  r.config = readConfig(top["config"].object());
  r.workers = readWorkers(top["workers"]);
  const In model = top["model"].object();
  r.modelSource = model["source"].str();
  r.model.alpha = model["alpha_s"].num();
  r.model.beta = model["beta_s_per_byte"].num();
  r.model.gamma = model["gamma_s_per_byte"].num();
  if (model.has("shm_copy_s_per_byte")) {
    r.model.shmCopy = model["shm_copy_s_per_byte"].num();
    r.model.cores = model["cores"].i32(0);
    if (model.has("shm_work_scale")) r.model.shmWorkScale = model["shm_work_scale"].num();
    if (model.has("shm_alpha_s")) r.model.shmAlpha = model["shm_alpha_s"].num();
    if (model.has("shm_send_s_per_byte")) {
      r.model.shmSend = model["shm_send_s_per_byte"].num();
      r.model.shmSendFresh = model["shm_send_fresh_s_per_byte"].num();
    }
  }
  if (model.has("llc_bytes")) {
    r.model.shmCopyCached = model["shm_copy_cached_s_per_byte"].num();
    r.model.gammaCached = model["gamma_cached_s_per_byte"].num();
    r.model.llcBytes = model["llc_bytes"].u64();
  }
  r.error = top["error"].str();
  // Absent from recordings written before sessions could be imported.
  if (top.has("source")) r.source = top["source"].str();
  r.rows = readArray<BenchRow>(top["runs"], [columns](const In& a) { return readRun(a, columns); });
  return r;
}

BenchReport readRecording(const std::string& path) {
  std::string text;
  try {
    text = readInputFile(path, kRecordingLimits.maxBytes);
  } catch (const InputFileError& e) {
    throw RecordingError(e.what());
  }
  try {
    return parseRecording(text);
  } catch (const RecordingError& e) {
    throw RecordingError(path + ": " + e.what());
  }
}

}  // namespace arl
