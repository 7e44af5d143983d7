#include "train_options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "base/errors.h"
#include "base/limits.h"
#include "base/shaping.h"
#include "schedule/generators.h"

namespace arl::app {

TrainOptions::TrainOptions(CLI::App& lab, const std::vector<std::string>& args)
    : app_(lab.add_subcommand("train",
                              "data-parallel training on the workers: a real model, gradient "
                              "buckets overlapped with the backward pass, all-reduce against a "
                              "parameter server (docs/training.md)")),
      o_(app_, args) {
  Options& o = o_;
  o.group("World");
  o.value("--workers", "N", "local worker processes, one rank each (default 4)");
  o.group("Model and data");
  o.value("--model", "WIDTHS",
          "layer widths, input first and classes last (default 784x512x512x10): ReLU between "
          "layers, softmax cross-entropy at the end");
  o.value("--steps", "N", "training steps (default 50)");
  o.value("--batch", "N", "samples per step over all ranks, a multiple of the ranks (default 256)");
  o.value("--optimizer", "NAME", "sgd (with momentum, default) or adam");
  o.value("--lr", "RATE", "learning rate (default 0.05)");
  o.value("--momentum", "M", "SGD momentum (default 0.9)");
  o.value("--seed", "N", "seed of the data set and the initial weights (default 1)");
  o.group("Gradient synchronisation");
  o.value("--sync", "MODES",
          "allreduce (default): every rank all-reduces its gradient buckets and applies the same "
          "update; ps: a parameter server (rank 0) sums them, synchronously; ps-async: ranks "
          "push gradients and pull weights without waiting for each other. A comma list runs "
          "each");
  o.value("--algo", "NAME", "the buckets' all-reduce algorithm (default ring): " + algorithmList());
  o.value("--slice", "SIZE", "the pipeline slice, most bytes one message carries (default 1M)");
  o.value("--inflight", "N", "slices a rank may have in flight (default 4)");
  o.value("--bucket", "SIZE", "gradient bucket size (default 25M, as PyTorch DDP)");
  o.value("--overlap", "WHEN",
          "on (default): a bucket's all-reduce starts as soon as its last gradient is "
          "computed, while the backward pass goes on; off: after the backward pass; both: a run "
          "of each, compared");
  o.value("--sweep-buckets", "SIZES",
          "also run each bucket size of the list (e.g. 64K,256K,1M,4M,16M,64M, or \"auto\" for "
          "that list) and report step time against bucket size");
  declareShaping(o);
  o.group("Teaching");
  o.value("--slow-compute", "R:F",
          "rank R takes F times as long for each compute span, as a slower device would (F in "
          "1..100; the rank sleeps the difference)");
  o.value("--stall-timeout", "TIME",
          "fail a run when no rank makes progress for TIME (default 60s)");
  o.group("Outputs");
  o.value("--telemetry", "LEVEL",
          "off, steps or chunks (default chunks): what each rank records of its steps, the "
          "compute spans at steps and chunks, the buckets' chunk events at chunks "
          "(docs/training.md, \"Telemetry\")");
  o.value("--record", "FILE",
          "a recording of the runs (FILE.arlrec) with every rank's compute and communication, "
          "which the window replays and export --trace turns into a Perfetto trace");
  o.value("--json", "FILE", "the record as JSON, which the window's Training view opens");
  o.value("--csv", "FILE", "one row per run and step");
  o.flag("--quiet", &quiet_, "no row per step, only each run's summary");
}

TrainArgs TrainOptions::check() const {
  TrainArgs a;
  a.quiet = quiet_;
  if (auto v = o_.get("--workers")) a.workers = parseInt(*v, 1, kMaxRanks);
  checkModel(a);
  checkModes(a);
  checkRun(a);
  a.base.shaping = parseShaping(o_, a.workers);
  for (SyncMode s : a.syncs) {
    TrainConfig c = a.cfg;
    c.sync = s;
    try {
      checkTrainConfig(c, a.workers);
    } catch (const TrainConfigError& e) {
      throw UsageError{e.what()};
    }
  }
  if (auto v = o_.get("--json")) a.json = v->text;
  if (auto v = o_.get("--record")) a.record = v->text;
  if (auto v = o_.get("--csv")) a.csv = v->text;
  return a;
}

void TrainOptions::checkModel(TrainArgs& a) const {
  TrainConfig& c = a.cfg;
  if (auto v = o_.get("--model")) {
    auto layers = parseLayers(v->text);
    if (!layers)
      throw refuse(*v, "expected 2 to 16 widths joined by x, each 1..65536 (784x512x10)");
    c.layers = *layers;
  }
  if (auto v = o_.get("--steps")) c.steps = static_cast<uint32_t>(parseInt(*v, 1, 100000));
  if (auto v = o_.get("--batch")) c.batch = static_cast<uint32_t>(parseInt(*v, 1, 65536));
  if (auto v = o_.get("--optimizer")) {
    auto k = parseOptimizerKind(v->text);
    if (!k) throw refuse(*v, "expected sgd or adam");
    c.optimizer = *k;
  }
  const auto number = [](const Arg& v, double lo, double hi, bool openLo) {
    char* end = nullptr;
    const double x = std::strtod(v.text.c_str(), &end);
    if (v.text.empty() || *end != '\0' || !std::isfinite(x) || x < lo || (openLo && x == lo) ||
        x > hi) {
      throw refuse(v, std::string("expected a number ") + (openLo ? "above " : "from ") +
                          printfString("%g", lo) + " to " + printfString("%g", hi));
    }
    return x;
  };
  if (auto v = o_.get("--lr")) c.lr = static_cast<float>(number(*v, 0, 10, true));
  if (auto v = o_.get("--momentum")) c.momentum = static_cast<float>(number(*v, 0, 0.999, false));
  if (auto v = o_.get("--seed")) c.seed = parseSize(*v);
  if (auto v = o_.get("--slow-compute")) {
    const size_t colon = v->text.find(':');
    if (colon == std::string::npos)
      throw refuse(*v, "expected R:F, e.g. 3:4 (rank 3, 4 times slower)");
    c.slowComputeRank = parseInt(Arg{v->flag, v->text.substr(0, colon)}, 0, a.workers - 1);
    c.slowComputeFactor = number(Arg{v->flag, v->text.substr(colon + 1)}, 1, 100, false);
  }
}

void TrainOptions::checkModes(TrainArgs& a) const {
  if (auto v = o_.get("--sync")) {
    a.syncs.clear();
    for (const std::string& name : parseNameList(*v)) {
      auto m = parseSyncMode(name);
      if (!m) throw refuse(*v, "expected allreduce, ps or ps-async (or a comma list of them)");
      a.syncs.push_back(*m);
    }
  }
  if (auto v = o_.get("--overlap")) {
    if (v->text == "on")
      a.overlaps = {true};
    else if (v->text == "off")
      a.overlaps = {false};
    else if (v->text == "both")
      a.overlaps = {true, false};
    else
      throw refuse(*v, "expected on, off or both");
  }
  if (auto v = o_.get("--bucket")) {
    a.cfg.bucketBytes = parseSize(*v);
    if (a.cfg.bucketBytes < 4) throw refuse(*v, "must be at least 4 bytes (one gradient)");
  }
  if (auto v = o_.get("--sweep-buckets")) {
    a.sweep = v->text == "auto"
                  ? std::vector<uint64_t>{64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20}
                  : parseSizeList(*v);
    for (uint64_t b : a.sweep)
      if (b < 4) throw refuse(*v, "every bucket size must be at least 4 bytes");
  }
}

void TrainOptions::checkRun(TrainArgs& a) const {
  RunRequest& r = a.base;
  r.telemetry = TelemetryLevel::Chunks;
  if (auto v = o_.get("--telemetry")) {
    const auto t = parseTelemetryLevel(v->text);
    if (!t) throw refuse(*v, "unknown level (known: off, steps, chunks)");
    r.telemetry = *t;
  }
  r.stallTimeout = std::chrono::milliseconds(60000);
  if (auto v = o_.get("--algo")) {
    const auto& known = algorithmNames();
    if (std::find(known.begin(), known.end(), v->text) == known.end())
      throw refuse(*v, "unknown algorithm; known: " + algorithmList());
    r.algorithm = v->text;
    if (std::find(a.syncs.begin(), a.syncs.end(), SyncMode::Ps) != a.syncs.end() &&
        v->text != "parameter-server")
      throw refuse(*v, "--sync ps reduces the buckets with the parameter-server algorithm");
  }
  if (auto v = o_.get("--slice")) {
    r.sliceBytes = parseSize(*v);
    if (r.sliceBytes < 4 || r.sliceBytes % 4 != 0)
      throw refuse(*v, "must be a whole number of floats (a multiple of 4 bytes)");
  }
  if (auto v = o_.get("--inflight")) r.inflight = parseInt(*v, 1, static_cast<int>(kMaxInflight));
  if (auto v = o_.get("--stall-timeout")) r.stallTimeout = parseMillis(*v, kMaxStallTimeoutMs);
}

}  // namespace arl::app
