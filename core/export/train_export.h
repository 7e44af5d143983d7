// A training record (train/train_types.h) as files: JSON that reads back into the same record,
// and CSV with one row per step of each run. `allreduce-lab train` writes them; the window's
// Training view reads the JSON. Formats: docs/training.md, "Exports".
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "train/train_types.h"

namespace arl {

inline constexpr std::string_view kTrainFormat = "allreduce-lab-train";
inline constexpr int kTrainVersion = 1;

// Thrown by the readers: what() names the field by its path in the document
// ("runs[0].steps[3].loss: expected a number, found a string") and, from readTrainFile(), the
// file before it.
struct TrainRecordError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// {"format", "version", "runs": [...], "sweep": [...], "best_bucket_bytes"}. Times are in
// microseconds; a rank's span and step times (integer nanoseconds in the record) are written
// as ns / 1000 and read back to the same nanosecond. Doubles are written so that they read back
// equal; a loss that is not finite (a diverged run) is written as null.
std::string writeTrainJson(const TrainRecord& r);

// Reads writeTrainJson() output from any source: bounded (size, nesting, values, and the length
// of every list), every field checked for type and range. Throws TrainRecordError.
TrainRecord readTrainJson(std::string_view text);

// readTrainJson() of a file's contents; the error names `path` first ("training record
// /tmp/r.json: runs[0].model: ...").
TrainRecord readTrainFile(const std::string& path);

// One row per (run, step) under the header
// run,label,sync,overlap,bucket_bytes,step,loss,step_us,compute_us,comm_us,exposed_us,hidden_us,
// identical,spread,staleness (run: the run's index; staleness empty where the run has none).
std::string writeTrainCsv(const TrainRecord& r);

}  // namespace arl
