// allreduce-lab train: data-parallel training on the lab's workers (core/train, the worker's
// training run in core/runtime/train_job.cpp). Each run trains the model for --steps steps;
// the command prints a row per step (step time split into compute and communication, the
// loss, how far the replicas are apart), a summary per run, the comparison of the runs when
// it made several (overlap on against off, one sync mode against another), and a bucket-size
// sweep when asked. --json writes the record the window's Training view opens; --record a
// recording of the runs' telemetry (compute spans and the buckets' chunk events per rank) that
// the window replays and export --trace draws.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/clock.h"
#include "base/errors.h"
#include "base/shaping.h"
#include "cli_util.h"
#include "commands.h"
#include "export/export.h"
#include "export/train_export.h"
#include "runtime/coordinator.h"
#include "runtime/run_plan.h"
#include "runtime/telemetry_collector.h"
#include "signal_watch.h"
#include "train/replica.h"
#include "train/train_summary.h"
#include "train_options.h"

namespace arl::app {

namespace {

constexpr const char* kProg = kTrainProg;
constexpr std::chrono::seconds kJoinTimeout{20};

std::string onOff(bool b) { return b ? "on" : "off"; }

// One training run on its way: what the coordinator has reported of it so far.
struct RunWatch {
  uint64_t id = 0;
  int64_t startNs = 0;
  std::vector<TrainRankStep> steps;
  std::map<uint32_t, int> reported;  // step -> ranks that reported it
  TelemetryCollector telemetry;      // kept for --record only
};

class Trainer {
 public:
  explicit Trainer(TrainArgs a) : a_(std::move(a)) {}
  int run();

 private:
  bool waitForWorkers(Coordinator& coord);
  // Runs one training run; false when it did not complete (error_ says why). `record`: keep
  // its telemetry for --record.
  bool runOne(Coordinator& coord, const TrainConfig& cfg, const std::string& label, bool rows,
              bool record, TrainRun& out);
  TrainRun describeRun(const TrainConfig& cfg, const std::string& label,
                       const RunRequest& req) const;
  void printHeader(const TrainRun& run, bool rows) const;
  void noteStep(RunWatch& w, const TrainRankStep& step, const TrainConfig& cfg, bool rows);
  // The run's end: its rows and sampled step into `out`; true when it completed.
  bool finish(RunWatch& w, RunResult& result, bool record, TrainRun& out);
  void keepRecording(RunWatch& w, RunResult& result);
  void printRow(const TrainStepRow& r, SyncMode sync);
  void printSummary(const TrainRun& run);
  void compareOverlap();
  void printSweep();
  bool writeOutputs();
  bool interrupted() const { return signals_.signal() != 0; }

  TrainArgs a_;
  SignalWatch signals_{kProg};
  TrainRecord record_;
  BenchReport recording_;  // --record: every run but the sweep's, with its telemetry
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
        error_ = w->beforeJoining();
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

TrainRun Trainer::describeRun(const TrainConfig& cfg, const std::string& label,
                              const RunRequest& req) const {
  TrainRun out;
  out.label = label;
  out.cfg = cfg;
  out.workers = a_.workers;
  out.algorithm = cfg.sync == SyncMode::PsAsync ? "ps-async (push/pull)" : req.algorithm;
  out.sliceBytes = req.sliceBytes;
  out.shaping = req.shaping.empty() ? "" : describeShaping(req.shaping);
  out.backend = "cpu";
  // ps-async pushes the whole gradient at once: it has no buckets.
  if (cfg.sync != SyncMode::PsAsync) {
    for (const Bucket& b : planBuckets(cfg.layers, cfg.bucketBytes))
      out.bucketFloats.push_back(static_cast<uint32_t>(b.end - b.begin));
  }
  return out;
}

void Trainer::printHeader(const TrainRun& run, bool rows) const {
  const TrainConfig& cfg = run.cfg;
  const std::string buckets =
      cfg.sync == SyncMode::PsAsync
          ? "the whole gradient per push"
          : printfString("%zu bucket(s) of up to %s", run.bucketFloats.size(),
                         formatSize(cfg.bucketBytes).c_str());
  std::printf("\n# %s: %d workers, model %s (%" PRIu64
              " parameters), batch %u, %s lr %g, %s, %s, slice %s%s%s\n",
              run.label.c_str(), a_.workers, formatLayers(cfg.layers).c_str(),
              parameterCount(cfg.layers), cfg.batch, std::string(toString(cfg.optimizer)).c_str(),
              static_cast<double>(cfg.lr), buckets.c_str(), run.algorithm.c_str(),
              formatSize(run.sliceBytes).c_str(), run.shaping.empty() ? "" : ", ",
              run.shaping.c_str());
  if (rows) {
    std::printf(
        "#  step   step ms compute ms    comm ms  hidden ms exposed ms     loss  replicas%s\n",
        cfg.sync == SyncMode::PsAsync ? "            staleness" : "");
  }
}

void Trainer::noteStep(RunWatch& w, const TrainRankStep& step, const TrainConfig& cfg, bool rows) {
  w.steps.push_back(step);
  if (++w.reported[step.step] == a_.workers && rows) {
    const auto one = trainRows(cfg, a_.workers, stepOfEveryRank(w.steps, step.step));
    if (!one.empty()) printRow(one.front(), cfg.sync);
  }
}

bool Trainer::finish(RunWatch& w, RunResult& result, bool record, TrainRun& out) {
  const TrainConfig& cfg = out.cfg;
  std::string divergence;
  out.steps = trainRows(cfg, a_.workers, w.steps, &divergence);
  out.sampleStep = stepOfEveryRank(w.steps, sampleStepIndex(cfg.steps));
  if (!divergence.empty() && cfg.sync != SyncMode::PsAsync) {
    diverged_ = true;
    std::fprintf(stderr, "%s: %s: %s, though %s keeps every replica identical\n", kProg,
                 out.label.c_str(), divergence.c_str(), std::string(toString(cfg.sync)).c_str());
  }
  if (record) keepRecording(w, result);
  if (result.state == RunState::Done) return true;
  error_ = out.label + " " + std::string(toString(result.state)) + ": " + result.error;
  return false;
}

// The run as a recording's row: its result with its telemetry. A training run has no
// collective's bandwidth: the row's metrics stay empty and it has no prediction.
void Trainer::keepRecording(RunWatch& w, RunResult& result) {
  BenchRow row;
  row.count = result.request.count;
  row.sizeBytes = row.count * sizeof(float);
  row.predictedUs = std::numeric_limits<double>::quiet_NaN();
  row.startNs = w.startNs;
  row.endNs = steadyNowNs();
  row.result = std::move(result);
  row.result.events = w.telemetry.take();
  row.eventsKept = row.result.events.size();
  recording_.rows.push_back(std::move(row));
}

bool Trainer::runOne(Coordinator& coord, const TrainConfig& cfg, const std::string& label,
                     bool rows, bool record, TrainRun& out) {
  const RunRequest req = trainingRequest(a_.base, cfg);
  out = describeRun(cfg, label, req);
  printHeader(out, rows);
  RunWatch w;
  w.startNs = steadyNowNs();
  w.id = coord.submit(req);
  std::vector<CoordinatorEvent> evs;
  bool stopSent = false;
  for (;;) {
    evs.clear();
    coord.takeEvents(evs, std::chrono::milliseconds(20));
    for (auto& ev : evs) {
      if (auto* it = std::get_if<IterationEvent>(&ev);
          it && it->runId == w.id && it->result.train) {
        noteStep(w, *it->result.train, cfg, rows);
      } else if (auto* t = std::get_if<TelemetryBatchEvent>(&ev); t && t->runId == w.id) {
        if (record) w.telemetry.add(*t);
      } else if (auto* l = std::get_if<LogEvent>(&ev); l && l->level >= 1) {
        std::fprintf(stderr, "%s: %s\n", kProg, l->text.c_str());
      } else if (auto* f = std::get_if<RunFinished>(&ev); f && f->result.runId == w.id) {
        return finish(w, f->result, record, out);
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

// The recording's session: what bench would have been asked for the runs' collective.
BenchReport recordingOf(const TrainArgs& a) {
  const RunRequest r = trainingRequest(a.base, a.cfg);
  BenchReport rep;
  BenchConfig& c = rep.config;
  c.minBytes = c.maxBytes = r.count * sizeof(float);
  c.stepBytes = 0;
  c.iters = static_cast<int>(a.cfg.steps);
  c.warmup = 0;
  c.check = 0;
  c.algorithms = {r.algorithm};
  c.workers = a.workers;
  c.sliceSizes = {r.sliceBytes};
  c.inflights = {r.inflight};
  c.telemetry = r.telemetry;
  c.maxEvents = r.maxEvents;
  c.dataPlane = r.dataPlane;
  c.stallTimeout = r.stallTimeout;
  c.shaping = r.shaping;
  c.recordPath = a.record;
  c.jsonPath = a.json;
  c.csvPath = a.csv;
  return rep;
}

bool writeFile(const std::string& path, const std::string& text) {
  try {
    writeTextFile(path, text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kProg, e.what());
    return false;
  }
  return true;
}

bool Trainer::writeOutputs() {
  bool ok = true;
  if (!a_.json.empty()) ok = writeFile(a_.json, writeTrainJson(record_)) && ok;
  if (!a_.csv.empty()) ok = writeFile(a_.csv, writeTrainCsv(record_)) && ok;
  if (!a_.record.empty()) ok = writeFile(a_.record, recordingJson(recording_)) && ok;
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
  recording_ = recordingOf(a_);
  if (!waitForWorkers(*coord)) {
    coord.reset();
    if (interrupted()) return 128 + signals_.signal();
    std::fprintf(stderr, "%s: %s\n", kProg, error_.c_str());
    return 1;
  }
  recording_.workers = coord->workers();
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
      ok = runOne(*coord, c, runLabel(c), !a_.quiet, !a_.record.empty(), run);
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
    ok = runOne(*coord, c, "sweep: bucket " + formatSize(bucket), false, false, run);
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
