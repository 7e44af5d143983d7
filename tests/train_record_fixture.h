// A training record made up for the tests (not measured): two runs on 4 ranks, all-reduce with
// overlap and an asynchronous parameter server, each with a sample step of every rank's
// spans, and a bucket-size sweep. Values are exact in binary where a test compares them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "train/train_types.h"

namespace arl::test {

inline constexpr int kFixtureRanks = 4;
inline constexpr uint32_t kFixtureSteps = 12;
inline constexpr uint32_t kFixtureLayers = 3;  // 784x512x512x10: three weight layers

// Rank `rank`'s sample step: forward layers 0..2, backward 2..0, each layer's bucket reduced
// (or pushed) while the backward pass goes on, then the optimizer (and the pull for ps-async).
inline TrainRankStep fixtureRankStep(int rank, uint32_t step, bool psAsync) {
  TrainRankStep r;
  r.rank = rank;
  r.step = step;
  r.loss = 0.5 + 0.125 * rank;
  const int64_t us = 1000;
  const int64_t skew = rank * 40 * us / 100;  // ranks finish their compute at different times
  int64_t t = 0;
  for (uint32_t l = 0; l < kFixtureLayers; ++l, t += 600 * us) {
    r.spans.push_back({TrainSpan::Kind::Forward, l, t, t + 600 * us});
  }
  const TrainSpan::Kind comm = psAsync ? TrainSpan::Kind::Push : TrainSpan::Kind::Reduce;
  for (uint32_t i = 0; i < kFixtureLayers; ++i, t += 1200 * us + skew) {
    const uint32_t layer = kFixtureLayers - 1 - i;
    r.spans.push_back({TrainSpan::Kind::Backward, layer, t, t + 1200 * us + skew});
    const int64_t done = t + 1200 * us + skew;
    r.spans.push_back({comm, i, done, done + 900 * us});
  }
  t += 900 * us;  // the last bucket's collective is exposed
  if (psAsync) {
    r.spans.push_back({TrainSpan::Kind::Pull, 0, t, t + 500 * us});
    t += 500 * us;
  }
  r.spans.push_back({TrainSpan::Kind::Optimizer, 0, t, t + 300 * us});
  t += 300 * us;
  r.stepNs = t;
  r.computeNs = (3 * 600 + 3 * 1200 + 300) * us + 3 * skew;
  r.commNs = (3 * 900 + (psAsync ? 500 : 0)) * us;
  r.exposedNs = r.stepNs - r.computeNs;
  r.digest = psAsync ? 0x1000u + static_cast<uint64_t>(rank) : 0xfeedfacecafebeefULL;
  r.staleness = psAsync ? static_cast<uint32_t>(rank % 3) : 0;
  return r;
}

inline TrainRun fixtureRun(bool psAsync) {
  TrainRun run;
  run.label = psAsync ? "ps-async" : "overlap on";
  run.cfg.steps = kFixtureSteps;
  run.cfg.sync = psAsync ? SyncMode::PsAsync : SyncMode::AllReduce;
  run.cfg.bucketBytes = uint64_t{1} << 20;
  run.workers = kFixtureRanks;
  run.algorithm = "ring";
  run.sliceBytes = uint64_t{256} << 10;
  run.shaping = psAsync ? "ports 1 GB/s" : "";
  run.backend = "cpu";
  run.bucketFloats = {5130, 262656, 401920};
  for (uint32_t s = 0; s < kFixtureSteps; ++s) {
    TrainStepRow row;
    row.step = s;
    row.loss = 2.25 * std::exp(-0.2 * s) + 0.25 + (psAsync ? 0.125 : 0);
    row.computeUs = 6000 + (s == 0 ? 4000 : 0);
    row.commUs = psAsync ? 3200 : 2700;
    row.exposedUs = psAsync ? 1500 : 900;
    row.hiddenUs = row.commUs - row.exposedUs;
    row.stepUs = row.computeUs + row.exposedUs;
    row.identical = !psAsync || s == 0;
    row.spread = psAsync ? 0.0078125 * s : 0;
    if (psAsync) {
      row.staleness = 0.75 + 0.25 * (s % 2);
      row.maxStaleness = 2;
    }
    run.steps.push_back(row);
  }
  for (int r = 0; r < kFixtureRanks; ++r) {
    run.sampleStep.push_back(fixtureRankStep(r, kFixtureSteps - 2, psAsync));
  }
  return run;
}

// Bucket sizes 64K to 64M by 4: the step is longest with one bucket (no overlap) and with tiny
// ones (a collective's fixed cost per bucket), shortest at 4M.
inline std::vector<BucketSweepPoint> fixtureSweep() {
  std::vector<BucketSweepPoint> sweep;
  const double stepUs[] = {14000, 9500, 7400, 6900, 7800, 9700};
  for (int i = 0; i < 6; ++i) {
    BucketSweepPoint p;
    p.bucketBytes = uint64_t{64} << (10 + 2 * i);
    p.buckets = static_cast<uint32_t>(std::max<uint64_t>(1, (uint64_t{2} << 20) / p.bucketBytes));
    p.stepUs = stepUs[i];
    p.computeUs = 6000;
    p.exposedUs = stepUs[i] - 6000;
    sweep.push_back(p);
  }
  return sweep;
}

inline TrainRecord fixtureTrainRecord(bool withSweep = true) {
  TrainRecord r;
  r.runs = {fixtureRun(false), fixtureRun(true)};
  if (withSweep) r.sweep = fixtureSweep();
  return r;
}

}  // namespace arl::test
