// Results of a bench session as JSON and CSV (export.h), and the file writer every exporter
// uses. The trace is in trace.cpp, the recording in recording.cpp.
#include "export/export.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "base/errors.h"
#include "base/input_file.h"
#include "exec/collective_library.h"
#include "export/fields.h"
#include "export/flight_json.h"
#include "export/session_json.h"
#include "schedule/generators.h"

namespace arl {

namespace {

// perIterationPerRank[i][r]: rank r's time in timed iteration i, in us, from a result's
// per-rank reports (ranks that did not report an iteration count as 0).

uint64_t totalEvents(const BenchReport& r) {
  uint64_t n = 0;
  for (const BenchRow& row : r.rows) n += eventCount(row);
  return n;
}

Json telemetryJson(const BenchReport& r) {
  return Json{{"level", str(toString(r.config.telemetry))},
              {"max_events_per_run", r.config.maxEvents},
              {"events", totalEvents(r)},
              {"events_dropped", totalDropped(r)}};
}

// "nccl" for a row of NCCL's own collectives (timed whole; its telemetry is NCCL's own
// events, exec/nccl_events.h); null for the lab's algorithms.
Json library(const std::string& algorithm) {
  const LibraryAlgorithm* a = findLibraryAlgorithm(algorithm);
  return a != nullptr ? Json(str(a->library)) : Json(nullptr);
}

// With random data: "digests", each rank's output digest (16 hex digits), "sample_at", the
// elements sampled, and "sample", their bits per rank (hex, two digits per byte).
Json outputJson(const RunResult& res) {
  if (res.outputDigests.empty()) return Json(nullptr);
  Json digests = Json::array();
  Json heads = Json::array();
  const size_t es = dtypeSize(res.request.dtype);
  for (size_t r = 0; r < res.outputDigests.size(); ++r) {
    digests.push_back(hexDigest(res.outputDigests[r]));
    Json h = Json::array();
    const std::string& b = r < res.outputSamples.size() ? res.outputSamples[r] : std::string();
    for (size_t at = 0; at + es <= b.size(); at += es) {
      std::string hex = "0x";
      static constexpr char kHex[] = "0123456789abcdef";
      for (size_t i = es; i-- > 0;) {  // little-endian bytes, most significant first
        const auto byte = static_cast<unsigned char>(b[at + i]);
        hex += kHex[byte >> 4];
        hex += kHex[byte & 15];
      }
      h.push_back(hex);
    }
    heads.push_back(h);
  }
  Json at = Json::array();
  const uint64_t n = outputElemsFor(res.request.collective, res.nranks, res.request.count);
  const size_t k = heads.empty() ? 0 : heads[0].size();
  for (size_t j = 0; j < k; ++j) at.push_back(j * n / k);
  return Json{{"digests", digests}, {"sample_at", at}, {"sample", heads}};
}

// Per rank, the bytes it sent in one timed iteration as its IterationEnd events say; null for
// a rank none of whose arrived (telemetry off, or dropped by the rank).
Json sentJson(const std::vector<RankSent>& sent) {
  Json a = Json::array();
  for (const RankSent& r : sent) a.push_back(r.iterations > 0 ? Json(r.bytes) : Json(nullptr));
  return a;
}

// `workers`: the local workers' backend (BenchConfig::backend), for the row's backend field.
Json resultJson(const BenchRow& row, const std::string& workers) {
  const RunResult& res = row.result;
  const RunRequest& q = res.request;
  const Json method = row.predictedBy ? Json(str(toString(*row.predictedBy))) : Json(nullptr);
  return Json{{"size_bytes", row.sizeBytes},
              {"count", row.count},
              {"dtype", str(toString(q.dtype))},
              {"op", collectiveReduces(q.collective) ? str(toString(q.op)) : Json("none")},
              {"root", q.root},
              {"algorithm", q.algorithm},
              {"library", library(q.algorithm)},
              {"backend", rowBackend(q.algorithm, workers)},
              {"collective", str(toString(q.collective))},
              {"ranks", res.nranks},
              {"in_place", q.inPlace},
              {"slice_bytes", q.sliceBytes},
              {"inflight", q.inflight},
              {"window", slicesWindowOf(q.algorithm, q.window)},
              {"time_us", row.metrics.timeUs},
              {"time_nccl_us", meanOfRankMeansUs(perIterationPerRankUs(res))},
              {"time_rank_mean_us", slowestOfRankMeansUs(perIterationPerRankUs(res))},
              {"p50_us", row.metrics.spread.p50Us},
              {"p90_us", row.metrics.spread.p90Us},
              {"p99_us", row.metrics.spread.p99Us},
              {"max_us", row.metrics.spread.maxUs},
              {"algbw_gbps", row.metrics.algbwGBps},
              {"busbw_gbps", row.metrics.busbwGBps},
              {"wrong", q.checkedIterations() ? Json(row.metrics.wrong) : Json(nullptr)},
              {"data", q.randomData ? "random" : "checkable"},
              {"output", outputJson(res)},
              {"predicted_us", row.predictedUs},
              {"predicted_method", method},
              {"iterations", res.iterationUs},
              {"state", str(toString(res.state))},
              {"error", res.error},
              {"failed_rank", res.failedRank},
              {"run_id", res.runId},
              {"events", eventCount(row)},
              {"events_dropped", res.eventsDropped},
              {"events_dropped_slow_client", res.telemetry.droppedSlowClient},
              {"sent_bytes", sentJson(res.sent)},
              {"flight_record", flightRecordJson(res.flight, res.runId)},
              {"effective", effectiveJson(res.effective)}};
}

std::vector<std::string> csvFields(const BenchRow& row, const std::string& workers) {
  const RunResult& res = row.result;
  const RunRequest& q = res.request;
  return {std::to_string(row.sizeBytes),
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
          csvNumber(row.metrics.timeUs),
          csvNumber(meanOfRankMeansUs(perIterationPerRankUs(res))),
          csvNumber(row.metrics.spread.p50Us),
          csvNumber(row.metrics.spread.p90Us),
          csvNumber(row.metrics.spread.p99Us),
          csvNumber(row.metrics.spread.maxUs),
          csvNumber(row.metrics.algbwGBps),
          csvNumber(row.metrics.busbwGBps),
          q.checkedIterations() ? std::to_string(row.metrics.wrong) : "",
          csvNumber(row.predictedUs),
          std::to_string(res.iterationUs.size()),
          std::to_string(eventCount(row)),
          std::to_string(res.eventsDropped),
          std::string(toString(res.state)),
          res.error,
          row.predictedBy ? std::string(toString(*row.predictedBy)) : "",
          rowBackend(q.algorithm, workers)};
}

// Which plane the pairs used: inside a host, across hosts (each worker names its host).
Json dataPlaneJson(const BenchReport& r) {
  const DataPlaneUse u = dataPlaneUse(r.config.dataPlane, r.workers);
  return Json{{"inside_hosts", u.insideHosts},
              {"across_hosts", u.acrossHosts},
              {"hosts", u.hosts},
              {"text", u.text}};
}

}  // namespace

uint64_t eventCount(const BenchRow& row) {
  return std::max<uint64_t>(row.eventsKept, row.result.events.size());
}

std::string benchResultsJson(const BenchReport& r) {
  Json results = Json::array();
  for (size_t i = 0; i < r.rows.size(); ++i) {
    results.push_back(resultJson(r.rows[i], r.config.backend));
    if (r.fit && i < r.fit->fittedUs.size()) results.back()["fitted_us"] = r.fit->fittedUs[i];
  }
  const Json j{{"config", configJson(r.config)}, {"workers", workersJson(r.workers)},
               {"data_plane", dataPlaneJson(r)}, {"model", modelJson(r)},
               {"telemetry", telemetryJson(r)},  {"error", r.error},
               {"results", std::move(results)}};
  std::string text = jsonText(j);
  text += '\n';  // appended, not concatenated: a recording is tens of megabytes
  return text;
}

std::string benchResultsCsv(const BenchReport& r) {
  std::string out =
      "size_bytes,count,dtype,op,root,algorithm,collective,ranks,in_place,slice_bytes,"
      "inflight,"
      "time_us,time_nccl_us,p50_us,p90_us,p99_us,max_us,algbw_gbps,busbw_gbps,wrong,predicted_us,"
      "iterations,events,events_dropped,state,error,predicted_method,backend\n";
  for (const BenchRow& row : r.rows) {
    const std::vector<std::string> f = csvFields(row, r.config.backend);
    for (size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + csvField(f[i]);
    out += "\n";
  }
  return out;
}

std::string csvNumber(double d) {
  if (!std::isfinite(d)) return "null";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  ARL_ENFORCE(ec == std::errc(), "to_chars failed for " << d);
  return std::string(buf, end);
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

std::string hexDigest(uint64_t v) {
  char d[17];
  std::snprintf(d, sizeof d, "%016llx", static_cast<unsigned long long>(v));
  return d;
}

void writeTextFile(const std::string& path, std::string_view text) {
  try {
    writeFileAtomically(path, text);
  } catch (const std::runtime_error& e) {
    throw ConfigError(e.what());
  }
}

}  // namespace arl
