// Training records as JSON and CSV (train_export.h): written with export/json.h, read back
// through the bounded parser and the checked reader of export/json_in.h.
#include "export/train_export.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "base/input_file.h"
#include "base/limits.h"
#include "export/fields.h"
#include "export/json.h"
#include "export/json_in.h"
#include "export/session_json.h"

namespace arl {

namespace {

// A record holds a few runs of up to 100000 steps and one step's spans per rank: 256 MiB and
// 20 million values are far above any the lab writes, and bound what a hostile file may cost.
constexpr JsonLimits kTrainLimits{size_t{256} << 20, 10, 20'000'000};
constexpr size_t kMaxRuns = 256;
constexpr size_t kMaxSteps = 100'000;  // checkTrainConfig's --steps limit
constexpr size_t kMaxBuckets = size_t{1} << 20;
// Per rank: forward and backward spans per layer, the optimizer, and a collective per bucket.
constexpr size_t kMaxSpans = 2 * kMaxBuckets;
constexpr size_t kMaxSweepPoints = 1024;
// Eleven days: a time beyond this is not a step's.
constexpr double kMaxUs = 1e12;

// ---- Writing ---------------------------------------------------------------------------------

// The double nearest the float's shortest decimal ("0.05", not 0.05000000074505806), when it
// reads back as the same float; else the float's exact value.
Json floatJson(float f) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  if (ec == std::errc()) {
    *end = '\0';
    const double d = std::strtod(buf, nullptr);
    if (static_cast<float>(d) == f) return Json(d);
  }
  return Json(static_cast<double>(f));
}

Json usOf(int64_t ns) { return Json(static_cast<double>(ns) / 1e3); }

Json spanJson(const TrainSpan& s) {
  return Json{{"kind", std::string(toString(s.kind))},
              {"index", s.index},
              {"start_us", usOf(s.startNs)},
              {"end_us", usOf(s.endNs)}};
}

Json rankStepJson(const TrainRankStep& r) {
  Json spans = Json::array();
  for (const TrainSpan& s : r.spans) spans.push_back(spanJson(s));
  return Json{{"rank", r.rank},
              {"step", r.step},
              {"loss", r.loss},
              {"step_us", usOf(r.stepNs)},
              {"compute_us", usOf(r.computeNs)},
              {"comm_us", usOf(r.commNs)},
              {"exposed_us", usOf(r.exposedNs)},
              {"hidden_us", usOf(r.hiddenNs)},
              {"digest", hexDigest(r.digest)},
              {"staleness", r.staleness},
              {"spread", r.spread},
              {"spans", std::move(spans)}};
}

Json stepJson(const TrainStepRow& s, bool psAsync) {
  Json j{{"step", s.step},          {"loss", s.loss},
         {"step_us", s.stepUs},     {"compute_us", s.computeUs},
         {"comm_us", s.commUs},     {"exposed_us", s.exposedUs},
         {"hidden_us", s.hiddenUs}, {"identical", s.identical},
         {"spread", s.spread}};
  if (psAsync) {
    j["staleness"] = s.staleness ? Json(*s.staleness) : Json(nullptr);
    j["max_staleness"] = s.maxStaleness;
  }
  return j;
}

}  // namespace

Json trainConfigJson(const TrainConfig& c) {
  return Json{{"model", formatLayers(c.layers)},
              {"steps_asked", c.steps},
              {"batch", c.batch},
              {"bucket_bytes", c.bucketBytes},
              {"overlap", c.overlap},
              {"sync", std::string(toString(c.sync))},
              {"optimizer", std::string(toString(c.optimizer))},
              {"lr", floatJson(c.lr)},
              {"momentum", floatJson(c.momentum)},
              {"seed", c.seed},
              {"slow_compute_rank", c.slowComputeRank},
              {"slow_compute_factor", c.slowComputeFactor}};
}

namespace {

Json runJson(const TrainRun& run) {
  const TrainConfig& c = run.cfg;
  Json steps = Json::array();
  for (const TrainStepRow& s : run.steps) steps.push_back(stepJson(s, c.sync == SyncMode::PsAsync));
  Json sample = Json::array();
  for (const TrainRankStep& r : run.sampleStep) sample.push_back(rankStepJson(r));
  Json j = trainConfigJson(c);
  j["label"] = run.label;
  j["workers"] = run.workers;
  j["algorithm"] = run.algorithm;
  j["slice_bytes"] = run.sliceBytes;
  j["shaping"] = run.shaping;
  j["backend"] = run.backend;
  j["bucket_floats"] = run.bucketFloats;
  j["steps"] = std::move(steps);
  j["sample_step"] = std::move(sample);
  return j;
}

Json sweepJson(const BucketSweepPoint& p) {
  return Json{{"bucket_bytes", p.bucketBytes},
              {"buckets", p.buckets},
              {"step_us", p.stepUs},
              {"compute_us", p.computeUs},
              {"exposed_us", p.exposedUs}};
}

// ---- Reading ---------------------------------------------------------------------------------

[[noreturn]] void bad(const In& v, const std::string& what) { v.fail(v.path(), what); }

// The items of list `a`, refused past `max` before any is read.
template <typename T, typename F>
std::vector<T> boundedList(const In& a, size_t max, F item) {
  const size_t n = a.size();
  if (n > max) {
    bad(a, "holds " + std::to_string(n) + " items, more than the " + std::to_string(max) +
               " a training record may hold");
  }
  return readArray<T>(a, item);
}

double timeUs(const In& v) {
  const double x = v.num();
  if (!(x >= 0) || !(x <= kMaxUs)) {
    bad(v, "must be a time in microseconds from 0 to 1e12, not " + v.raw().dump());
  }
  return x;
}

int64_t nsOf(const In& v) { return std::llround(timeUs(v) * 1e3); }

// A loss or a distance between weights: 0 or more, or null (NaN) for a run that diverged.
double nonNegativeOrNull(const In& v) {
  const double x = v.num();
  if (std::isnan(x)) return x;
  if (!(x >= 0) || !std::isfinite(x)) bad(v, "must be a finite number, 0 or more, or null");
  return x;
}

uint32_t u32(const In& v, uint32_t lo = 0) {
  return static_cast<uint32_t>(v.i64(lo, std::numeric_limits<uint32_t>::max()));
}

// A float field (lr, momentum) in [lo, hi) or [lo, hi].
float floatIn(const In& v, double lo, double hi, bool hiOpen, const std::string& rule) {
  const double x = v.num();
  if (!(x >= lo) || !(hiOpen ? x < hi : x <= hi)) bad(v, rule + ", not " + v.raw().dump());
  return static_cast<float>(x);
}

uint64_t digestOf(const In& v) {
  const std::string& s = v.str();
  uint64_t d = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d, 16);
  if (s.size() != 16 || ec != std::errc() || end != s.data() + s.size()) {
    bad(v, "'" + s + "' is not 16 hex digits");
  }
  return d;
}

TrainSpan::Kind spanKindOf(const In& v) {
  using K = TrainSpan::Kind;
  const std::string& s = v.str();
  for (K k : {K::Forward, K::Backward, K::Optimizer, K::Reduce, K::Push, K::Pull}) {
    if (s == toString(k)) return k;
  }
  bad(v, "unknown span kind '" + s + "' (forward, backward, optimizer, reduce, push, pull)");
}

TrainSpan readSpan(const In& a) {
  const In o = a.object();
  TrainSpan s;
  s.kind = spanKindOf(o["kind"]);
  s.index = u32(o["index"]);
  s.startNs = nsOf(o["start_us"]);
  s.endNs = nsOf(o["end_us"]);
  if (s.endNs < s.startNs) bad(o["end_us"], "ends before the span's start_us");
  return s;
}

TrainRankStep readRankStep(const In& a, int workers) {
  const In o = a.object();
  TrainRankStep r;
  r.rank = o["rank"].i32(0, workers - 1);
  r.step = u32(o["step"]);
  r.loss = nonNegativeOrNull(o["loss"]);
  r.stepNs = nsOf(o["step_us"]);
  r.computeNs = nsOf(o["compute_us"]);
  r.commNs = nsOf(o["comm_us"]);
  r.exposedNs = nsOf(o["exposed_us"]);
  r.hiddenNs = nsOf(o["hidden_us"]);
  r.digest = digestOf(o["digest"]);
  r.staleness = u32(o["staleness"]);
  r.spread = nonNegativeOrNull(o["spread"]);
  r.spans = boundedList<TrainSpan>(o["spans"], kMaxSpans, readSpan);
  return r;
}

TrainStepRow readStep(const In& a) {
  const In o = a.object();
  TrainStepRow s;
  s.step = u32(o["step"]);
  s.loss = nonNegativeOrNull(o["loss"]);
  s.stepUs = timeUs(o["step_us"]);
  s.computeUs = timeUs(o["compute_us"]);
  s.commUs = timeUs(o["comm_us"]);
  s.exposedUs = timeUs(o["exposed_us"]);
  s.hiddenUs = timeUs(o["hidden_us"]);
  s.identical = o["identical"].boolean();
  s.spread = nonNegativeOrNull(o["spread"]);
  if (o.has("staleness") && !o["staleness"].raw().is_null()) {
    const double x = o["staleness"].num();
    if (!(x >= 0) || !std::isfinite(x)) bad(o["staleness"], "must be a finite number, 0 or more");
    s.staleness = x;
  }
  if (o.has("max_staleness")) s.maxStaleness = u32(o["max_staleness"]);
  return s;
}

}  // namespace

TrainConfig readTrainConfig(const In& o) {
  TrainConfig c;
  const std::string& model = o["model"].str();
  const auto layers = parseLayers(model);
  if (!layers) {
    bad(o["model"],
        "'" + model + "' is not a model: 2 to 16 layer widths of 1..65536 (784x512x10)");
  }
  c.layers = *layers;
  c.steps = static_cast<uint32_t>(o["steps_asked"].i64(1, static_cast<int64_t>(kMaxSteps)));
  c.batch = static_cast<uint32_t>(o["batch"].i64(1, 65536));
  c.bucketBytes = o["bucket_bytes"].u64();
  if (c.bucketBytes < 4) bad(o["bucket_bytes"], "must be at least 4 bytes");
  c.overlap = o["overlap"].boolean();
  c.sync = o["sync"].parsed<SyncMode>(parseSyncMode);
  c.optimizer = o["optimizer"].parsed<OptimizerKind>(parseOptimizerKind);
  c.lr = floatIn(o["lr"], std::numeric_limits<float>::min(), 10, false,
                 "must be above 0 and at most 10");
  c.momentum = floatIn(o["momentum"], 0, 1, true, "must be in [0, 1)");
  c.seed = o["seed"].u64();
  c.slowComputeRank = o["slow_compute_rank"].i32(-1, kMaxRanks - 1);
  const In factor = o["slow_compute_factor"];
  c.slowComputeFactor = factor.num();
  if (!(c.slowComputeFactor >= 1) || !(c.slowComputeFactor <= 100)) {
    bad(factor, "must be 1..100, not " + factor.raw().dump());
  }
  return c;
}

namespace {

TrainRun readRun(const In& a) {
  const In o = a.object();
  TrainRun run;
  run.label = o["label"].str();
  run.cfg = readTrainConfig(o);
  run.workers = o["workers"].i32(1, kMaxRanks);
  run.algorithm = o["algorithm"].str();
  run.sliceBytes = o["slice_bytes"].u64();
  run.shaping = o["shaping"].str();
  run.backend = o["backend"].str();
  run.bucketFloats =
      boundedList<uint32_t>(o["bucket_floats"], kMaxBuckets, [](const In& v) { return u32(v, 1); });
  run.steps = boundedList<TrainStepRow>(o["steps"], kMaxSteps, readStep);
  const int workers = run.workers;
  run.sampleStep =
      boundedList<TrainRankStep>(o["sample_step"], static_cast<size_t>(kMaxRanks),
                                 [workers](const In& v) { return readRankStep(v, workers); });
  return run;
}

BucketSweepPoint readSweepPoint(const In& a) {
  const In o = a.object();
  BucketSweepPoint p;
  p.bucketBytes = o["bucket_bytes"].u64();
  if (p.bucketBytes < 4) bad(o["bucket_bytes"], "must be at least 4 bytes");
  p.buckets = u32(o["buckets"], 1);
  p.stepUs = timeUs(o["step_us"]);
  p.computeUs = timeUs(o["compute_us"]);
  p.exposedUs = timeUs(o["exposed_us"]);
  return p;
}

TrainRecord readTop(const In& top) {
  const std::string& format = top["format"].str();
  if (format != kTrainFormat) {
    bad(top["format"], "'" + format + "' is not " + std::string(kTrainFormat));
  }
  const int version = top["version"].i32();
  if (version != kTrainVersion) {
    bad(top["version"], "version " + std::to_string(version) +
                            " is not supported (this build reads version " +
                            std::to_string(kTrainVersion) + ")");
  }
  TrainRecord r;
  r.runs = boundedList<TrainRun>(top["runs"], kMaxRuns, readRun);
  r.sweep = boundedList<BucketSweepPoint>(top["sweep"], kMaxSweepPoints, readSweepPoint);
  const In best = top["best_bucket_bytes"];  // derived from the sweep; checked, not kept
  if (!best.raw().is_null()) best.u64();
  return r;
}

}  // namespace

std::string writeTrainJson(const TrainRecord& r) {
  Json runs = Json::array();
  for (const TrainRun& run : r.runs) runs.push_back(runJson(run));
  Json sweep = Json::array();
  for (const BucketSweepPoint& p : r.sweep) sweep.push_back(sweepJson(p));
  const auto best = bestBucket(r.sweep);
  const Json j{{"format", std::string(kTrainFormat)},
               {"version", kTrainVersion},
               {"runs", std::move(runs)},
               {"sweep", std::move(sweep)},
               {"best_bucket_bytes", best ? Json(best->bucketBytes) : Json(nullptr)}};
  return jsonText(j) + "\n";
}

TrainRecord readTrainJson(std::string_view text) {
  JsonIn root;
  try {
    root = parseJsonLimited(text, kTrainLimits);
  } catch (const JsonInputError& e) {
    throw TrainRecordError(e.what());
  }
  // Paths read from the record's top: "runs[0].steps[3].loss".
  const JsonFail fail = [](const std::string& path, const std::string& what) {
    const std::string p = path.empty() ? "top level" : path.substr(path[0] == '.' ? 1 : 0);
    throw TrainRecordError(p + ": " + what);
  };
  return readTop(In(root, "", fail).object());
}

TrainRecord readTrainFile(const std::string& path) {
  const std::string origin = "training record " + path;
  std::string text;
  try {
    text = readInputFile(path, kTrainLimits.maxBytes);
  } catch (const InputFileError& e) {
    throw TrainRecordError(std::string("training record ") + e.what());
  }
  try {
    return readTrainJson(text);
  } catch (const TrainRecordError& e) {
    throw TrainRecordError(origin + ": " + e.what());
  }
}

std::string writeTrainCsv(const TrainRecord& r) {
  std::string out =
      "run,label,sync,overlap,bucket_bytes,step,loss,step_us,compute_us,comm_us,exposed_us,"
      "hidden_us,identical,spread,staleness\n";
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const TrainRun& run = r.runs[i];
    const std::string head =
        std::to_string(i) + "," + csvField(run.label) + "," + std::string(toString(run.cfg.sync)) +
        "," + (run.cfg.overlap ? "1" : "0") + "," + std::to_string(run.cfg.bucketBytes) + ",";
    for (const TrainStepRow& s : run.steps) {
      out += head + std::to_string(s.step) + "," + csvNumber(s.loss) + "," + csvNumber(s.stepUs) +
             "," + csvNumber(s.computeUs) + "," + csvNumber(s.commUs) + "," +
             csvNumber(s.exposedUs) + "," + csvNumber(s.hiddenUs) + "," +
             (s.identical ? "1" : "0") + "," + csvNumber(s.spread) + "," +
             (s.staleness ? csvNumber(*s.staleness) : "") + "\n";
    }
  }
  return out;
}

}  // namespace arl
