// nccl-tests' -J JSON (export/nccl_tests.h), key for key and in nccl-tests' order. Where
// nccl-tests writes a boolean it writes the string "true" or "false" (util.cu's jsonBool
// goes through jsonStr), and so does this file. Where the lab measured nothing that fits a
// field, the field says so ("unchecked", null) instead of a made-up figure.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>

#include "export/json.h"
#include "export/nccl_tests.h"
#include "export/session_json.h"
#include "model/metrics.h"

namespace arl {

namespace {

constexpr int kJsonFileVersion = 3;  // nccl-tests 2.19.6, util.cu JSON_FILE_VERSION

Json boolStr(bool b) { return Json(b ? "true" : "false"); }

// nccl-tests writes NaN as the string "nan" (util.cu, jsonDouble).
Json num(double v) { return std::isnan(v) ? Json("nan") : Json(v); }

Json numList(const std::vector<double>& v) {
  Json a = Json::array();
  for (double x : v) a.push_back(num(x));
  return a;
}

// nccl-tests' "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] NAME"
// fields. The lab's workers are one rank per process; a CPU worker has no device, and says so.
Json deviceJson(const WorkerInfo& w) {
  const bool gpu = w.device >= 0;
  const std::string info =
      gpu ? "GPU " + std::to_string(w.device) + " (allreduce-lab " + w.backend + " backend)"
          : "CPU, no GPU (allreduce-lab " + w.backend + " backend)";
  return Json{{"rank", w.rank},     {"group", 0},         {"pid", w.pid},
              {"hostname", w.host}, {"device", w.device}, {"device_hex", gpu ? "gpu" : "cpu"},
              {"device_info", info}};
}

Json configJsonOf(const BenchReport& r, const NcclTestsJsonInfo& info) {
  const BenchConfig& c = r.config;
  Json j{
      {"nthreads", 1}, {"ngpus", 1}, {"minimum_bytes", c.minBytes}, {"maximum_bytes", c.maxBytes}};
  if (c.stepFactor > 1) {
    j["step_factor"] = c.stepFactor;
  } else {
    j["step_bytes"] = c.stepBytes;
  }
  j["warmup_iters"] = c.warmup;
  j["iterations"] = c.iters;
  j["aggregated_iterations"] = 1;
  j["validation"] = c.check;
  j["graph"] = 0;
  j["blocking_collectives"] = boolStr(false);
  j["per_iter_timing"] = boolStr(info.perIterTiming);
  j["per_iter_skip"] = 0;
  j["parallel_init"] = boolStr(false);
  Json devices = Json::array();
  for (const WorkerInfo& w : r.workers) devices.push_back(deviceJson(w));
  j["devices"] = std::move(devices);
  return j;
}

Json perIterJson(const RunResult& res) {
  const NcclIterTimes t = ncclIterTimes(res);
  const NcclIterStats s = ncclIterStats(t.timesUs);
  Json j{{"skipped_iterations", 0},       {"min_us", num(s.minUs)},     {"max_us", num(s.maxUs)},
         {"avg_us", num(s.avgUs)},        {"p50_us", num(s.p50Us)},     {"p95_us", num(s.p95Us)},
         {"p99_us", num(s.p99Us)},        {"stdev_us", num(s.stdevUs)}, {"cv_pct", num(s.cvPct)},
         {"times_us", numList(t.timesUs)}};
  if (t.perRankUs.size() > 1) {
    Json rows = Json::array();
    for (const auto& times : t.perRankUs) rows.push_back(numList(times));
    j["per_process_max_times_us"] = std::move(rows);
  }
  return j;
}

std::string experimentName(const RunRequest& q) {
  return q.algorithm + " slice " + std::to_string(q.sliceBytes) + " inflight " +
         std::to_string(q.inflight);
}

Json resultJson(const BenchRow& row, const NcclTestsJsonInfo& info) {
  const RunRequest& q = row.result.request;
  const bool rooted = q.collective == Collective::Reduce || q.collective == Collective::Broadcast;
  char root[16];
  std::snprintf(root, sizeof root, "%6i", rooted ? q.root : -1);
  Json j{{"size", row.sizeBytes},
         {"count", row.count},
         {"type", str(toString(q.dtype))},
         {"redop", collectiveReduces(q.collective) ? str(toString(q.op)) : Json("none")},
         {"root", root}};
  const Metrics& m = row.metrics;
  const Json body{
      {"time", num(m.timeUs)},
      {"alg_bw", num(m.algbwGBps)},
      {"bus_bw", num(m.busbwGBps)},
      {"nwrong", q.checkedIterations() ? Json(static_cast<double>(m.wrong)) : Json(nullptr)}};
  // The lab runs one placement per session; nccl-tests' other one is absent.
  const char* place = q.inPlace ? "in_place" : "out_of_place";
  if (q.inPlace) j["out_of_place"] = nullptr;
  j[place] = body;
  if (info.perIterTiming) j[std::string(place) + "_per_iter"] = perIterJson(row.result);
  j["actual_iterations"] = q.iterations;
  j["experiment_name"] = experimentName(q);
  return j;
}

}  // namespace

NcclIterStats ncclIterStats(const std::vector<double>& timesUs) {
  NcclIterStats s;
  std::vector<double> v = timesUs;
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const int n = static_cast<int>(v.size());
  const auto at = [&](int p) {
    return v[static_cast<size_t>(std::min(n - 1, (n * p + 99) / 100 - 1))];
  };
  s.minUs = v.front();
  s.maxUs = v.back();
  s.p50Us = v[static_cast<size_t>(n / 2)];
  s.p95Us = at(95);
  s.p99Us = at(99);
  double sum = 0;
  for (double x : v) sum += x;
  s.avgUs = sum / n;
  double var = 0;
  for (double x : v) var += (x - s.avgUs) * (x - s.avgUs);
  s.stdevUs = std::sqrt(var / n);
  s.cvPct = s.avgUs > 0 ? s.stdevUs / s.avgUs * 100.0 : 0.0;
  return s;
}

NcclIterTimes ncclIterTimes(const RunResult& res) {
  NcclIterTimes t;
  const std::vector<std::vector<double>> byIter = perIterationPerRankUs(res);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  t.perRankUs.assign(static_cast<size_t>(std::max(res.nranks, 0)), {});
  for (const std::vector<double>& ranks : byIter) {
    double slowest = nan;
    for (size_t r = 0; r < t.perRankUs.size(); ++r) {
      const double us = r < ranks.size() && ranks[r] >= 0 ? ranks[r] : nan;
      t.perRankUs[r].push_back(us);
      if (!std::isnan(us) && !(us <= slowest)) slowest = us;
    }
    t.timesUs.push_back(slowest);
  }
  return t;
}

std::string ncclTestsJson(const BenchReport& r, const NcclTestsJsonInfo& info) {
  Json j{{"version", kJsonFileVersion},
         {"start_time", info.startTime},
         {"args", info.args},
         {"env", info.env},
         // No NCCL in the lab's own runs: 0, as nccl-tests' test_ncclVersion before NCCL is asked.
         {"nccl_version", 0},
         {"config", configJsonOf(r, info)}};
  Json results = Json::array();
  double busbw = 0;
  size_t done = 0;
  uint64_t wrong = 0;
  for (const BenchRow& row : r.rows) {
    if (row.result.state != RunState::Done) continue;
    results.push_back(resultJson(row, info));
    busbw += row.metrics.busbwGBps;
    wrong += row.metrics.wrong;
    ++done;
  }
  j["results"] = std::move(results);
  // nccl-tests counts writes beyond the buffers here; the lab does not check for them.
  j["out_of_bounds"] = Json{{"count", nullptr}, {"okay", "unchecked"}};
  j["average_bus_bandwidth"] =
      Json{{"bandwidth", done ? busbw / static_cast<double>(done) : 0.0}, {"okay", "unchecked"}};
  Json errors = Json::array();
  if (!r.error.empty()) errors.push_back(r.error);
  if (wrong) errors.push_back(std::to_string(wrong) + " wrong elements");
  j["errors"] = std::move(errors);
  j["end_time"] = info.endTime;
  std::string text = jsonText(j);
  text += '\n';
  return text;
}

std::vector<std::string> ncclTestsEnv(char** envp) {
  std::vector<std::string> out;
  for (char** e = envp; e && *e; ++e) {
    const std::string_view v(*e);
    if (v.starts_with("NCCL_") || v.starts_with("CUDA_") || v.starts_with("ARL_")) {
      out.emplace_back(v);
    }
  }
  return out;
}

}  // namespace arl
