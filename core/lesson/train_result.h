// A training experiment's result for a verdict (verdict.h): the lesson's measure or quantity
// from the one run that the experiment's record holds (allreduce-lab train --json), with a note
// of what it came from, so that `lesson run` and a test decide from the same numbers.
#pragma once

#include <string>

#include "lesson/lesson.h"
#include "lesson/verdict.h"
#include "train/train_types.h"

namespace arl {

// The result of a train experiment of `l` whose record is `record`. It ran when the record
// holds one run whose every step every rank reported; then `value` is the lesson's measure
// (Fastest) or quantity (Value), `timeUs` the mean step after the first and `note` the step
// split or the replicas' state. Otherwise `ran` is false and `error` says why. The caller
// names the option and the command line.
ExperimentResult trainResult(const Lesson& l, const TrainRecord& record);

// "12 of 12 steps identical, largest spread 0"; under ps-async with the staleness.
std::string replicaNote(const TrainRun& run);
// "step 120 ms = compute 90.1 + exposed 30.2; communication 45.0 ms, 14.8 of it hidden; means
// over steps 1..11".
std::string splitNote(const TrainRun& run);

}  // namespace arl
