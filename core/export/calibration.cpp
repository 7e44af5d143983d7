// Calibration files (calibration.h): written with export/json.h, read back through the bounded
// parser and the checked reader of export/json_in.h.
#include "export/calibration.h"

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/errors.h"
#include "base/input_file.h"
#include "export/export.h"
#include "export/json.h"
#include "export/json_in.h"
#include "transport/transport.h"

namespace arl {

namespace {

// A calibration holds a few dozen runs; anything much larger is not one.
constexpr JsonLimits kCalibrationLimits{size_t{1} << 20, 8, 100'000};
// The most runs a calibration may list.
constexpr size_t kMaxRuns = 10'000;

[[noreturn]] void bad(const In& v, const std::string& what) { v.fail(v.path(), what); }

// A number that must be positive and finite (parameters, times).
double positive(const In& v) {
  const double x = v.num();
  if (!(x > 0) || !std::isfinite(x)) bad(v, "must be a positive finite number");
  return x;
}

// A parameter a real machine can have: within [lo, hi], so that a hand-edited 1e300 or a
// denormal is refused instead of steering every prediction.
double plausible(const In& v, double lo, double hi, const char* range) {
  const double x = positive(v);
  if (x < lo || x > hi) bad(v, std::string("is outside what a machine measures (") + range + ")");
  return x;
}

// Time per message: 1 ns to 1 s.
double messageCost(const In& v) { return plausible(v, 1e-9, 1.0, "1 ns to 1 s per message"); }

// Time per byte: 1 PB/s (1e-15 s/B) to 1 KB/s (1e-3 s/B).
double byteCost(const In& v) { return plausible(v, 1e-15, 1e-3, "1e-15 to 1e-3 s per byte"); }

double nonNegative(const In& v) {
  const double x = v.num();
  if (!(x >= 0) || !std::isfinite(x)) bad(v, "must be a finite number, 0 or more");
  return x;
}

Json runJson(const CalibrationRun& r) {
  return Json{{"algorithm", r.algorithm},
              {"size_bytes", r.sizeBytes},
              {"time_us", r.measuredUs},
              {"p50_us", r.p50Us},
              {"fitted_us", r.fittedUs}};
}

Json reduceJson(const ReduceMeasurement& m) {
  return Json{{"buffer_bytes", m.bufferBytes},
              {"slice_bytes", m.sliceBytes},
              {"passes", m.passes},
              {"median_pass_s", m.medianPassSeconds},
              {"kernels", m.kernels}};
}

Json copyJson(const CopyMeasurement& m) {
  return Json{{"buffer_bytes", m.bufferBytes},
              {"slice_bytes", m.sliceBytes},
              {"passes", m.passes},
              {"median_pass_s", m.medianPassSeconds}};
}

CalibrationRun readRun(const In& a) {
  const In o = a.object();
  CalibrationRun r;
  r.algorithm = o["algorithm"].str();
  r.sizeBytes = o["size_bytes"].u64();
  r.measuredUs = positive(o["time_us"]);
  r.p50Us = nonNegative(o["p50_us"]);
  r.fittedUs = nonNegative(o["fitted_us"]);
  return r;
}

ReduceMeasurement readReduce(const In& a) {
  const In o = a.object();
  ReduceMeasurement m;
  m.bufferBytes = o["buffer_bytes"].u64();
  m.sliceBytes = o["slice_bytes"].u64();
  m.passes = o["passes"].i32(1);
  m.medianPassSeconds = positive(o["median_pass_s"]);
  m.kernels = o["kernels"].str();
  return m;
}

CopyMeasurement readCopy(const In& a) {
  const In o = a.object();
  CopyMeasurement m;
  m.bufferBytes = o["buffer_bytes"].u64();
  m.sliceBytes = o["slice_bytes"].u64();
  m.passes = o["passes"].i32(1);
  m.medianPassSeconds = positive(o["median_pass_s"]);
  return m;
}

SendMeasurement readSend(const In& a) {
  const In o = a.object();
  SendMeasurement m;
  m.ringBytes = o["ring_bytes"].u64();
  m.fromBuffer = readCopy(o["from_buffer"]);
  m.fresh = readCopy(o["fresh"]);
  return m;
}

void readHeader(const In& top) {
  const std::string& format = top["format"].str();
  if (format != kCalibrationFormat) {
    bad(top["format"], "'" + format + "' is not " + std::string(kCalibrationFormat));
  }
  const int version = top["version"].i32();
  if (version < 1 || version > kCalibrationVersion) {
    bad(top["version"], "version " + std::to_string(version) + " is not supported (this " +
                            "build reads versions 1 to " + std::to_string(kCalibrationVersion) +
                            ")");
  }
}

// The cache-resident rates (version 3): all of them with the cache's size and their
// measurements, or none.
void readCacheRates(const In& top, const In& m, Calibration& c) {
  if (m.has("copy_cached")) c.copyCached = readCopy(m["copy_cached"]);
  if (m.has("reduce_cached")) c.reduceCached = readReduce(m["reduce_cached"]);
  if (m.has("llc_source")) c.llcSource = m["llc_source"].str();
  const ModelParams& p = c.params;
  const bool any = p.shmCopyCached || p.gammaCached || p.llcBytes > 0 || c.copyCached ||
                   c.reduceCached || !c.llcSource.empty();
  const bool all = p.shmCopyCached && p.gammaCached && p.llcBytes > 0 && c.copyCached &&
                   c.reduceCached && !c.llcSource.empty() && p.shmCopy;
  if (any && !all) {
    bad(top["params"],
        "the cache-resident rates (shm_copy_cached_s_per_byte, gamma_cached_s_per_byte) come "
        "together, with llc_bytes above 0, a shared-memory copy rate, and their measurements "
        "(measurements.copy_cached, reduce_cached, llc_source)");
  }
}

Calibration readTop(const In& top) {
  readHeader(top);
  Calibration c;
  const In p = top["params"].object();
  c.params.alpha = messageCost(p["alpha_s"]);
  c.params.beta = byteCost(p["beta_s_per_byte"]);
  c.params.gamma = byteCost(p["gamma_s_per_byte"]);
  if (p.has("shm_copy_s_per_byte")) c.params.shmCopy = byteCost(p["shm_copy_s_per_byte"]);
  if (p.has("cores")) c.params.cores = p["cores"].i32(1, 1 << 16);
  if (p.has("shm_work_scale")) c.params.shmWorkScale = positive(p["shm_work_scale"]);
  if (p.has("shm_alpha_s")) c.params.shmAlpha = messageCost(p["shm_alpha_s"]);
  if (p.has("shm_send_s_per_byte")) c.params.shmSend = byteCost(p["shm_send_s_per_byte"]);
  if (p.has("shm_send_fresh_s_per_byte")) {
    c.params.shmSendFresh = byteCost(p["shm_send_fresh_s_per_byte"]);
  }
  if (p.has("shm_copy_cached_s_per_byte")) {
    c.params.shmCopyCached = byteCost(p["shm_copy_cached_s_per_byte"]);
  }
  if (p.has("gamma_cached_s_per_byte")) {
    c.params.gammaCached = byteCost(p["gamma_cached_s_per_byte"]);
  }
  if (p.has("llc_bytes")) c.params.llcBytes = p["llc_bytes"].u64();
  c.machine = top["machine"].str();
  c.date = top["date"].str();
  c.dataPlane = top["data_plane"].str();
  if (const auto plane = parseDataPlaneKind(c.dataPlane); !plane || *plane == DataPlaneKind::Auto) {
    bad(top["data_plane"], "'" + c.dataPlane + "' is not a data plane (shm or zmq)");
  }
  c.workers = top["workers"].i32(1);
  const In m = top["measurements"].object();
  c.collective = m["collective"].str();
  c.dtype = m["dtype"].str();
  c.sliceBytes = m["slice_bytes"].u64();
  c.inflight = m["inflight"].i32(1);
  c.iterations = m["iterations"].i32(1);
  c.warmup = m["warmup"].i32(0);
  if (m.has("rounds")) c.rounds = m["rounds"].i32(1, 100);
  if (m.has("round_slowness")) {
    const In rs = m["round_slowness"];
    if (rs.size() != static_cast<size_t>(c.rounds)) {
      bad(rs, "has " + std::to_string(rs.size()) + " entries for " + std::to_string(c.rounds) +
                  " rounds");
    }
    c.roundSlowness = readArray<double>(rs, [](const In& x) { return positive(x); });
  }
  c.rmsRelativeResidual = nonNegative(m["rms_relative_residual"]);
  const In runs = m["runs"];
  if (runs.size() > kMaxRuns) bad(runs, "more than " + std::to_string(kMaxRuns) + " runs");
  c.runs = readArray<CalibrationRun>(runs, readRun);
  c.reduce = readReduce(m["reduce"]);
  if (m.has("copy")) c.copy = readCopy(m["copy"]);
  if (c.params.shmCopy.has_value() != c.copy.has_value()) {
    bad(top["params"], "a shared-memory copy rate comes with its measurement (measurements.copy)");
  }
  if (m.has("send")) c.send = readSend(m["send"]);
  const bool sendRates = c.params.shmSend && c.params.shmSendFresh;
  if ((c.params.shmSend || c.params.shmSendFresh || c.send) &&
      !(sendRates && c.send && c.params.shmCopy)) {
    bad(top["params"],
        "the send rates (shm_send_s_per_byte, shm_send_fresh_s_per_byte) come together, with a "
        "shared-memory copy rate and their measurement (measurements.send)");
  }
  if (c.params.shmAlpha && !c.params.shmCopy) {
    bad(top["params"]["shm_alpha_s"],
        "is the shared-memory model's and comes with its copy rate (shm_copy_s_per_byte)");
  }
  readCacheRates(top, m, c);
  return c;
}

}  // namespace

std::string calibrationJson(const Calibration& c) {
  Json runs = Json::array();
  for (const CalibrationRun& r : c.runs) runs.push_back(runJson(r));
  Json params{{"alpha_s", c.params.alpha},
              {"beta_s_per_byte", c.params.beta},
              {"gamma_s_per_byte", c.params.gamma}};
  if (c.params.shmCopy) params["shm_copy_s_per_byte"] = *c.params.shmCopy;
  if (c.params.cores > 0) params["cores"] = c.params.cores;
  if (c.params.shmCopy) params["shm_work_scale"] = c.params.shmWorkScale;
  if (c.params.shmAlpha) params["shm_alpha_s"] = *c.params.shmAlpha;
  if (c.params.shmSend) params["shm_send_s_per_byte"] = *c.params.shmSend;
  if (c.params.shmSendFresh) params["shm_send_fresh_s_per_byte"] = *c.params.shmSendFresh;
  if (c.params.shmCopyCached) params["shm_copy_cached_s_per_byte"] = *c.params.shmCopyCached;
  if (c.params.gammaCached) params["gamma_cached_s_per_byte"] = *c.params.gammaCached;
  if (c.params.llcBytes > 0) params["llc_bytes"] = c.params.llcBytes;
  Json j{{"format", kCalibrationFormat},
         {"version", kCalibrationVersion},
         {"machine", c.machine},
         {"date", c.date},
         {"data_plane", c.dataPlane},
         {"workers", c.workers},
         {"params", params},
         {"measurements",
          {{"collective", c.collective},
           {"dtype", c.dtype},
           {"slice_bytes", c.sliceBytes},
           {"inflight", c.inflight},
           {"iterations", c.iterations},
           {"warmup", c.warmup},
           {"rounds", c.rounds},
           {"rms_relative_residual", c.rmsRelativeResidual},
           {"runs", runs},
           {"reduce", reduceJson(c.reduce)}}}};
  if (!c.roundSlowness.empty()) j["measurements"]["round_slowness"] = c.roundSlowness;
  if (c.copy) j["measurements"]["copy"] = copyJson(*c.copy);
  if (c.send) {
    j["measurements"]["send"] = Json{{"ring_bytes", c.send->ringBytes},
                                     {"from_buffer", copyJson(c.send->fromBuffer)},
                                     {"fresh", copyJson(c.send->fresh)}};
  }
  if (c.copyCached) j["measurements"]["copy_cached"] = copyJson(*c.copyCached);
  if (c.reduceCached) j["measurements"]["reduce_cached"] = reduceJson(*c.reduceCached);
  if (!c.llcSource.empty()) j["measurements"]["llc_source"] = c.llcSource;
  return jsonText(j) + "\n";
}

Calibration parseCalibration(std::string_view text, const std::string& origin) {
  JsonIn root;
  try {
    root = parseJsonLimited(text, kCalibrationLimits);
  } catch (const JsonInputError& e) {
    throw CalibrationError("calibration file " + origin + ": " + e.what());
  }
  const JsonFail fail = [&origin](const std::string& path, const std::string& what) {
    throw CalibrationError("calibration file " + origin + ": " + path + ": " + what);
  };
  return readTop(In(root, "calibration", fail).object());
}

Calibration readCalibration(const std::string& path) {
  std::string text;
  try {
    text = readInputFile(path, kCalibrationLimits.maxBytes);
  } catch (const InputFileError& e) {
    throw CalibrationError(std::string("calibration file ") + e.what());
  }
  return parseCalibration(text, path);
}

void writeCalibration(const std::string& path, const Calibration& c) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw ConfigError("cannot create folder '" + dir.string() + "': " + ec.message());
  }
  writeTextFile(path, calibrationJson(c));
}

std::string calibrationPath() {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  if (const std::string p = env("ARL_CALIBRATION"); !p.empty()) return p;
  if (const std::string x = env("XDG_CONFIG_HOME"); !x.empty()) {
    return x + "/allreduce-lab/calibration.json";
  }
  if (const std::string h = env("HOME"); !h.empty()) {
    return h + "/.config/allreduce-lab/calibration.json";
  }
  return "";
}

std::string utcTimestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace arl
