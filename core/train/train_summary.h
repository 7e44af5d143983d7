// From what each rank reported of each step (TrainRankStep) to the rows that the table, the
// exports and the Training view show (TrainStepRow), and a sweep's points.
#pragma once

#include <string>
#include <vector>

#include "train/train_types.h"

namespace arl {

// The run's rows, one per step that every rank reported, from `steps` (any order, every
// rank's). A synchronous run's row is identical when every rank's digest equals rank 0's,
// and its spread is 0 then; a synchronous step whose digests differ keeps identical false
// and `firstDivergence` (when given) names the first such step and rank. ps-async takes the
// spread and staleness that the server measured at each push.
std::vector<TrainStepRow> trainRows(const TrainConfig& cfg, int nranks,
                                    const std::vector<TrainRankStep>& steps,
                                    std::string* firstDivergence = nullptr);

// Every rank's report of step `step` (for the timeline), in rank order.
std::vector<TrainRankStep> stepOfEveryRank(const std::vector<TrainRankStep>& steps, uint32_t step);

// The step the timeline shows: the last but one (the last may end while others still
// report), or the only one.
uint32_t sampleStepIndex(uint32_t steps);

// A sweep's point from a run: the median over the steps after the first (the first pays for
// first touches of memory).
BucketSweepPoint sweepPoint(const TrainRun& run);

// Means over the steps after the first (all when there is one): step, compute, hidden and
// exposed communication in microseconds.
struct StepSplit {
  double stepUs = 0, computeUs = 0, hiddenUs = 0, exposedUs = 0, commUs = 0;
};
StepSplit meanSplit(const std::vector<TrainStepRow>& rows);

}  // namespace arl
