#include "lesson/train_result.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "train/train_summary.h"

namespace arl {

namespace {

std::string fmt(const char* f, double x) {
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}

size_t identicalSteps(const TrainRun& run) {
  return static_cast<size_t>(std::count_if(run.steps.begin(), run.steps.end(),
                                           [](const TrainStepRow& r) { return r.identical; }));
}

double valueOf(const Lesson& l, const TrainRun& run) {
  const bool share = l.by == DecideBy::Value ? l.quantity == Quantity::IdenticalShare
                                             : l.measure == SpeedMeasure::IdenticalShare;
  if (share) {
    return static_cast<double>(identicalSteps(run)) / static_cast<double>(run.steps.size());
  }
  const StepSplit s = meanSplit(run.steps);
  if (l.measure == SpeedMeasure::ExposedUs) return s.exposedUs;
  if (l.measure == SpeedMeasure::StepUs) return s.stepUs;
  return NAN;
}

}  // namespace

std::string replicaNote(const TrainRun& run) {
  const size_t same = identicalSteps(run);
  std::string note =
      std::to_string(same) + " of " + std::to_string(run.steps.size()) + " steps identical";
  if (run.cfg.sync != SyncMode::PsAsync) {
    // A synchronous rank reports its weights' digest, not the weights: a step whose digests
    // differ has no measured distance.
    return note + (same == run.steps.size()
                       ? ", largest spread 0"
                       : "; the others' spread is not measured (digests differ)");
  }
  double spread = 0, stale = 0;
  uint32_t maxStale = 0;
  for (const TrainStepRow& r : run.steps) {
    spread = std::max(spread, r.spread);
    stale += r.staleness.value_or(0);
    maxStale = std::max(maxStale, r.maxStaleness);
  }
  return note + ", largest spread " + fmt("%.3g", spread) + "; staleness mean " +
         fmt("%.2f", stale / static_cast<double>(run.steps.size())) + ", max " +
         std::to_string(maxStale);
}

std::string splitNote(const TrainRun& run) {
  const StepSplit s = meanSplit(run.steps);
  const size_t n = run.steps.size();
  return "step " + fmt("%.1f", s.stepUs / 1e3) + " ms = compute " + fmt("%.1f", s.computeUs / 1e3) +
         " + exposed " + fmt("%.1f", s.exposedUs / 1e3) + "; communication " +
         fmt("%.1f", s.commUs / 1e3) + " ms, " + fmt("%.1f", s.hiddenUs / 1e3) +
         " of it hidden; means over " +
         (n > 1 ? "steps 1.." + std::to_string(n - 1) : std::string("step 0"));
}

ExperimentResult trainResult(const Lesson& l, const TrainRecord& record) {
  ExperimentResult r;
  if (record.runs.size() != 1) {
    r.error = "the training record holds " + std::to_string(record.runs.size()) + " runs, not one";
    return r;
  }
  const TrainRun& run = record.runs.front();
  if (run.steps.empty() || run.steps.size() != run.cfg.steps) {
    r.error = "every rank reported " + std::to_string(run.steps.size()) + " of the " +
              std::to_string(run.cfg.steps) + " steps";
    return r;
  }
  r.ran = true;
  r.value = valueOf(l, run);
  r.timeUs = meanSplit(run.steps).stepUs;
  r.note = isFact(l) ? replicaNote(run) : splitNote(run);
  return r;
}

}  // namespace arl
