// allreduce-lab train: data-parallel training on the lab's workers (core/train, the worker's
// training run in core/runtime/train_job.cpp). Each run trains the model for --steps steps;
// the command prints a row per step (step time split into compute and communication, the
// loss, how far the replicas are apart), a summary per run, the comparison of the runs when
// it made several (overlap on against off, one sync mode against another), and a bucket-size
// sweep when asked. --json writes the record the window's Training view opens.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/errors.h"
#include "base/shaping.h"
#include "cli_util.h"
#include "commands.h"
#include "export/train_export.h"
#include "runtime/coordinator.h"
#include "runtime/run_plan.h"
#include "schedule/generators.h"
#include "signal_watch.h"
#include "train/replica.h"
#include "train/train_summary.h"

namespace arl::app {

namespace {

constexpr const char* kProg = "allreduce-lab train";
constexpr std::chrono::seconds kJoinTimeout{20};

struct TrainArgs {
  int workers = 4;
  RunRequest base;  // algorithm, slice, inflight, shaping, data plane, stall timeout
  TrainConfig cfg;
  std::vector<bool> overlaps = {true};
  std::vector<SyncMode> syncs = {SyncMode::AllReduce};
  std::vector<uint64_t> sweep;  // bucket sizes; empty: no sweep
  std::string json, csv;
  bool quiet = false;  // no per-step rows
};

std::string onOff(bool b) { return b ? "on" : "off"; }

class TrainOptions {
 public:
  TrainOptions(CLI::App& lab, const std::vector<std::string>& args);
  CLI::App* app() const { return app_; }
  TrainArgs check() const;

 private:
  void checkModel(TrainArgs& a) const;
  void checkModes(TrainArgs& a) const;
  void checkRun(TrainArgs& a) const;
  CLI::App* app_;
  Options o_;
  bool quiet_ = false;
};

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
  r.telemetry = TelemetryLevel::Off;
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

// ---- The session ----------------------------------------------------------------------------

class Trainer {
 public:
  explicit Trainer(TrainArgs a) : a_(std::move(a)) {}
  int run();

 private:
  bool waitForWorkers(Coordinator& coord);
  // Runs one training run; false when it did not complete (error_ says why).
  bool runOne(Coordinator& coord, const TrainConfig& cfg, const std::string& label, bool rows,
              TrainRun& out);
  void printRow(const TrainStepRow& r, SyncMode sync);
  void printSummary(const TrainRun& run);
  void compareOverlap();
  void printSweep();
  bool writeOutputs();
  bool interrupted() const { return signals_.signal() != 0; }

  TrainArgs a_;
  SignalWatch signals_{kProg};
  TrainRecord record_;
  std::string error_;
  bool diverged_ = false;
};

bool Trainer::waitForWorkers(Coordinator& coord) {
  const auto deadline = SteadyClock::now() + kJoinTimeout;
  std::vector<CoordinatorEvent> evs;
  while (coord.workers().size() < static_cast<size_t>(a_.workers)) {
    if (interrupted()) return false;
    evs.clear();
    coord.takeEvents(evs, std::chrono::milliseconds(20));
    for (const auto& ev : evs) {
      if (const auto* w = std::get_if<WorkerLeft>(&ev); w != nullptr && !w->joined) {
        error_ = "local worker (pid " + std::to_string(w->worker.pid) + ") " + w->reason.text;
        return false;
      }
    }
    if (SteadyClock::now() > deadline) {
      error_ = std::to_string(coord.workers().size()) + " of " + std::to_string(a_.workers) +
               " workers joined within " + std::to_string(kJoinTimeout.count()) + " s";
      return false;
    }
  }
  return true;
}

std::string runLabel(const TrainConfig& c) {
  if (c.sync == SyncMode::PsAsync) {
    std::string s = "ps-async";
    if (c.slowComputeRank >= 0)
      s += printfString(", rank %d %gx slower", c.slowComputeRank, c.slowComputeFactor);
    return s;
  }
  return std::string(toString(c.sync)) + ", overlap " + onOff(c.overlap);
}

bool Trainer::runOne(Coordinator& coord, const TrainConfig& cfg, const std::string& label,
                     bool rows, TrainRun& out) {
  const RunRequest req = trainingRequest(a_.base, cfg);
  out = TrainRun{};
  out.label = label;
  out.cfg = cfg;
  out.workers = a_.workers;
  out.algorithm = cfg.sync == SyncMode::PsAsync ? "ps-async (push/pull)" : req.algorithm;
  out.sliceBytes = req.sliceBytes;
  out.shaping = req.shaping.empty() ? "" : describeShaping(req.shaping);
  out.backend = "cpu";
  for (const Bucket& b : planBuckets(cfg.layers, cfg.bucketBytes))
    out.bucketFloats.push_back(static_cast<uint32_t>(b.end - b.begin));
  std::printf(
      "\n# %s: %d workers, model %s (%" PRIu64
      " parameters), batch %u, %s lr %g, %zu "
      "bucket(s) of up to %s, %s, slice %s%s%s\n",
      label.c_str(), a_.workers, formatLayers(cfg.layers).c_str(), parameterCount(cfg.layers),
      cfg.batch, std::string(toString(cfg.optimizer)).c_str(), static_cast<double>(cfg.lr),
      out.bucketFloats.size(), formatSize(cfg.bucketBytes).c_str(), out.algorithm.c_str(),
      formatSize(req.sliceBytes).c_str(), out.shaping.empty() ? "" : ", ", out.shaping.c_str());
  if (rows) {
    std::printf(
        "#  step   step ms compute ms    comm ms  hidden ms exposed ms     loss  replicas%s\n",
        cfg.sync == SyncMode::PsAsync ? "            staleness" : "");
  }
  const uint64_t id = coord.submit(req);
  std::vector<TrainRankStep> steps;
  std::map<uint32_t, int> reported;
  std::vector<CoordinatorEvent> evs;
  bool stopSent = false;
  for (;;) {
    evs.clear();
    coord.takeEvents(evs, std::chrono::milliseconds(20));
    for (auto& ev : evs) {
      if (auto* it = std::get_if<IterationEvent>(&ev); it && it->runId == id && it->result.train) {
        steps.push_back(*it->result.train);
        if (++reported[it->result.train->step] == a_.workers && rows) {
          const auto one =
              trainRows(cfg, a_.workers, stepOfEveryRank(steps, it->result.train->step));
          if (!one.empty()) printRow(one.front(), cfg.sync);
        }
      } else if (auto* l = std::get_if<LogEvent>(&ev); l && l->level >= 1) {
        std::fprintf(stderr, "%s: %s\n", kProg, l->text.c_str());
      } else if (auto* f = std::get_if<RunFinished>(&ev); f && f->result.runId == id) {
        std::string divergence;
        out.steps = trainRows(cfg, a_.workers, steps, &divergence);
        out.sampleStep = stepOfEveryRank(steps, sampleStepIndex(cfg.steps));
        if (!divergence.empty() && cfg.sync != SyncMode::PsAsync) {
          diverged_ = true;
          std::fprintf(stderr, "%s: %s: %s, though %s keeps every replica identical\n", kProg,
                       label.c_str(), divergence.c_str(), std::string(toString(cfg.sync)).c_str());
        }
        if (f->result.state == RunState::Done) return true;
        error_ = label + " " + std::string(toString(f->result.state)) + ": " + f->result.error;
        return false;
      }
    }
    if (interrupted() && !stopSent) {
      coord.abort("interrupted");
      stopSent = true;
    }
  }
}

void Trainer::printRow(const TrainStepRow& r, SyncMode sync) {
  std::string replicas = r.identical ? "identical" : (std::isnan(r.spread) ? "DIFFER" : "");
  if (sync == SyncMode::PsAsync) replicas = printfString("spread %.3g", r.spread);
  std::string stale;
  if (r.staleness) stale = printfString("  mean %.1f, max %u", *r.staleness, r.maxStaleness);
  std::printf("%7u %9.2f %10.2f %10.2f %10.2f %10.2f %8.4f  %s%s\n", r.step, r.stepUs / 1e3,
              r.computeUs / 1e3, r.commUs / 1e3, r.hiddenUs / 1e3, r.exposedUs / 1e3, r.loss,
              replicas.c_str(), stale.c_str());
  std::fflush(stdout);
}

void Trainer::printSummary(const TrainRun& run) {
  if (run.steps.empty()) return;
  const StepSplit s = meanSplit(run.steps);
  const bool allSame = std::all_of(run.steps.begin(), run.steps.end(),
                                   [](const TrainStepRow& r) { return r.identical; });
  std::printf(
      "# %s: loss %.4f -> %.4f over %zu steps; per step (mean after the first): %.2f ms = "
      "compute %.2f + exposed communication %.2f; communication %.2f ms, of which %.2f "
      "hidden behind compute\n",
      run.label.c_str(), run.steps.front().loss, run.steps.back().loss, run.steps.size(),
      s.stepUs / 1e3, s.computeUs / 1e3, s.exposedUs / 1e3, s.commUs / 1e3, s.hiddenUs / 1e3);
  if (run.cfg.sync == SyncMode::PsAsync) {
    double maxSpread = 0, stale = 0;
    uint32_t maxStale = 0;
    for (const TrainStepRow& r : run.steps) {
      maxSpread = std::max(maxSpread, r.spread);
      stale += r.staleness.value_or(0);
      maxStale = std::max(maxStale, r.maxStaleness);
    }
    std::printf(
        "# %s: replicas apart: spread %.3g at the first step, %.3g at the last, at most "
        "%.3g; staleness mean %.2f, max %u\n",
        run.label.c_str(), run.steps.front().spread, run.steps.back().spread, maxSpread,
        stale / static_cast<double>(run.steps.size()), maxStale);
  } else {
    std::printf("# %s: replicas bitwise identical after %s\n", run.label.c_str(),
                allSame ? "every step (checked by digest)" : "NOT every step");
  }
}

void Trainer::compareOverlap() {
  const TrainRun* on = nullptr;
  const TrainRun* off = nullptr;
  for (const TrainRun& r : record_.runs) {
    if (r.cfg.sync == SyncMode::PsAsync) continue;
    (r.cfg.overlap ? on : off) = &r;
  }
  if (on == nullptr || off == nullptr || on->steps.empty() || off->steps.empty()) return;
  const StepSplit a = meanSplit(on->steps), b = meanSplit(off->steps);
  std::printf(
      "\n# overlap on against off: exposed communication %.2f ms against %.2f ms per step "
      "(%.0f%% less); step %.2f ms against %.2f ms (%.2fx); on takes %.2fx max(compute "
      "%.2f, communication %.2f), off %.2fx\n",
      a.exposedUs / 1e3, b.exposedUs / 1e3,
      b.exposedUs > 0 ? 100.0 * (1 - a.exposedUs / b.exposedUs) : 0.0, a.stepUs / 1e3,
      b.stepUs / 1e3, a.stepUs > 0 ? b.stepUs / a.stepUs : 0.0,
      a.stepUs / std::max(a.computeUs, a.commUs), a.computeUs / 1e3, a.commUs / 1e3,
      b.stepUs / std::max(b.computeUs, b.commUs));
}

void Trainer::printSweep() {
  if (record_.sweep.empty()) return;
  std::printf(
      "\n# bucket sweep (median step after the first)\n#   bucket buckets   step ms "
      "compute ms exposed ms\n");
  for (const BucketSweepPoint& p : record_.sweep) {
    std::printf("%10s %7u %9.2f %10.2f %10.2f\n", formatSize(p.bucketBytes).c_str(), p.buckets,
                p.stepUs / 1e3, p.computeUs / 1e3, p.exposedUs / 1e3);
  }
  const auto best = bestBucket(record_.sweep);
  std::printf("# best bucket: %s (%.2f ms per step)\n", formatSize(best->bucketBytes).c_str(),
              best->stepUs / 1e3);
}

bool writeFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) {
    std::fprintf(stderr, "%s: cannot write %s\n", kProg, path.c_str());
    return false;
  }
  return true;
}

bool Trainer::writeOutputs() {
  bool ok = true;
  if (!a_.json.empty()) ok = writeFile(a_.json, writeTrainJson(record_)) && ok;
  if (!a_.csv.empty()) ok = writeFile(a_.csv, writeTrainCsv(record_)) && ok;
  return ok;
}

int Trainer::run() {
  CoordinatorOptions opt;
  opt.localWorkers = a_.workers;
  opt.joinTimeout = kJoinTimeout;
  std::unique_ptr<Coordinator> coord;
  try {
    coord = std::make_unique<Coordinator>(opt);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s: %s\n", kProg, e.what());
    return 2;
  }
  if (!waitForWorkers(*coord)) {
    coord.reset();
    if (interrupted()) return 128 + signals_.signal();
    std::fprintf(stderr, "%s: %s\n", kProg, error_.c_str());
    return 1;
  }
  bool ok = true;
  for (SyncMode s : a_.syncs) {
    for (bool overlap : a_.overlaps) {
      if (!ok || interrupted()) break;
      // ps-async pushes the whole gradient after the backward pass: overlap changes nothing.
      if (s == SyncMode::PsAsync && overlap != a_.overlaps.front()) continue;
      TrainConfig c = a_.cfg;
      c.sync = s;
      c.overlap = overlap;
      TrainRun run;
      ok = runOne(*coord, c, runLabel(c), !a_.quiet, run);
      if (!run.steps.empty()) {
        printSummary(run);
        record_.runs.push_back(std::move(run));
      }
    }
  }
  compareOverlap();
  for (uint64_t bucket : a_.sweep) {
    if (!ok || interrupted()) break;
    TrainConfig c = a_.cfg;
    c.sync = a_.syncs.front();
    c.overlap = a_.overlaps.front();
    c.bucketBytes = bucket;
    TrainRun run;
    ok = runOne(*coord, c, "sweep: bucket " + formatSize(bucket), false, run);
    if (!run.steps.empty()) record_.sweep.push_back(sweepPoint(run));
  }
  printSweep();
  const bool written = writeOutputs();
  coord.reset();
  if (interrupted()) {
    std::fprintf(stderr, "%s: interrupted; the run was aborted and the workers shut down\n", kProg);
    return 128 + signals_.signal();
  }
  if (!ok) {
    std::fprintf(stderr, "%s: %s\n", kProg, error_.c_str());
    return 1;
  }
  return diverged_ || !written ? 1 : 0;
}

class TrainCommand final : public Command {
 public:
  TrainCommand(CLI::App& lab, const std::vector<std::string>& args) : options_(lab, args) {
    app = options_.app();
  }
  int run() override {
    TrainArgs a;
    const int rc = runChecked(kProg, [&] {
      a = options_.check();
      return 0;
    });
    if (rc != 0) return rc;
    Trainer t(std::move(a));
    return t.run();
  }

 private:
  TrainOptions options_;
};

}  // namespace

std::unique_ptr<Command> addTrainCommand(CLI::App& lab, const std::vector<std::string>& args) {
  return std::make_unique<TrainCommand>(lab, args);
}

}  // namespace arl::app
