#include "train/train_summary.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace arl {

namespace {

double mean(double sum, size_t n) { return n == 0 ? 0.0 : sum / static_cast<double>(n); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace

std::vector<TrainStepRow> trainRows(const TrainConfig& cfg, int nranks,
                                    const std::vector<TrainRankStep>& steps,
                                    std::string* firstDivergence) {
  std::map<uint32_t, std::vector<const TrainRankStep*>> byStep;
  for (const TrainRankStep& s : steps) byStep[s.step].push_back(&s);
  std::vector<TrainStepRow> rows;
  for (auto& [step, ranks] : byStep) {
    if (ranks.size() != static_cast<size_t>(nranks)) continue;
    std::sort(ranks.begin(), ranks.end(), [](auto* a, auto* b) { return a->rank < b->rank; });
    TrainStepRow row;
    row.step = step;
    double loss = 0, stepNs = 0, compute = 0, comm = 0, exposed = 0, hidden = 0, stale = 0;
    row.identical = true;
    for (const TrainRankStep* r : ranks) {
      loss += r->loss;
      stepNs += static_cast<double>(r->stepNs);
      compute += static_cast<double>(r->computeNs);
      comm += static_cast<double>(r->commNs);
      exposed += static_cast<double>(r->exposedNs);
      hidden += static_cast<double>(r->hiddenNs);
      stale += r->staleness;
      row.maxStaleness = std::max(row.maxStaleness, r->staleness);
      row.spread = std::max(row.spread, r->spread);
      if (r->digest != ranks.front()->digest) {
        if (row.identical && firstDivergence != nullptr && firstDivergence->empty()) {
          *firstDivergence = "after step " + std::to_string(step) + " rank " +
                             std::to_string(r->rank) + "'s weights differ from rank 0's";
        }
        row.identical = false;
      }
    }
    const size_t n = ranks.size();
    row.loss = mean(loss, n);
    row.stepUs = mean(stepNs, n) / 1e3;
    row.computeUs = mean(compute, n) / 1e3;
    row.commUs = mean(comm, n) / 1e3;
    row.exposedUs = mean(exposed, n) / 1e3;
    row.hiddenUs = mean(hidden, n) / 1e3;
    if (cfg.sync == SyncMode::PsAsync) {
      row.staleness = mean(stale, n);
    } else if (!row.identical) {
      // Not measured: the ranks report digests, not weights. NaN says "unknown", never 0.
      row.spread = std::nan("");
    } else {
      row.spread = 0;
    }
    rows.push_back(row);
  }
  return rows;
}

std::vector<TrainRankStep> stepOfEveryRank(const std::vector<TrainRankStep>& steps, uint32_t step) {
  std::vector<TrainRankStep> out;
  for (const TrainRankStep& s : steps)
    if (s.step == step) out.push_back(s);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  return out;
}

uint32_t sampleStepIndex(uint32_t steps) { return steps >= 2 ? steps - 2 : 0; }

StepSplit meanSplit(const std::vector<TrainStepRow>& rows) {
  StepSplit s;
  const size_t first = rows.size() > 1 ? 1 : 0;
  size_t n = 0;
  for (size_t i = first; i < rows.size(); ++i, ++n) {
    s.stepUs += rows[i].stepUs;
    s.computeUs += rows[i].computeUs;
    s.commUs += rows[i].commUs;
    s.exposedUs += rows[i].exposedUs;
    s.hiddenUs += rows[i].hiddenUs;
  }
  if (n == 0) return s;
  const double k = static_cast<double>(n);
  s.stepUs /= k;
  s.computeUs /= k;
  s.commUs /= k;
  s.exposedUs /= k;
  s.hiddenUs /= k;
  return s;
}

BucketSweepPoint sweepPoint(const TrainRun& run) {
  BucketSweepPoint p;
  p.bucketBytes = run.cfg.bucketBytes;
  p.buckets = static_cast<uint32_t>(run.bucketFloats.size());
  std::vector<double> stepUs, computeUs, exposedUs;
  const size_t first = run.steps.size() > 1 ? 1 : 0;
  for (size_t i = first; i < run.steps.size(); ++i) {
    stepUs.push_back(run.steps[i].stepUs);
    computeUs.push_back(run.steps[i].computeUs);
    exposedUs.push_back(run.steps[i].exposedUs);
  }
  p.stepUs = median(stepUs);
  p.computeUs = median(computeUs);
  p.exposedUs = median(exposedUs);
  return p;
}

}  // namespace arl
