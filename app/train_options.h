// allreduce-lab train's command line: its options on CLI11 and their check, shared by the train
// command and by the lesson command, which checks a lesson's training experiments with them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli_util.h"
#include "exec/run_request.h"
#include "train/train_types.h"

namespace arl::app {

inline constexpr const char* kTrainProg = "allreduce-lab train";

// What the train command runs: every --sync mode with every --overlap, then the sweep.
struct TrainArgs {
  int workers = 4;
  RunRequest base;  // algorithm, slice, inflight, shaping, data plane, stall timeout, telemetry
  TrainConfig cfg;
  std::vector<bool> overlaps = {true};
  std::vector<SyncMode> syncs = {SyncMode::AllReduce};
  std::vector<uint64_t> sweep;  // bucket sizes; empty: no sweep
  std::string json, csv;
  std::string record;  // --record: the runs' recording (export/export.h)
  bool quiet = false;  // no per-step rows
};

class TrainOptions {
 public:
  // Adds the "train" subcommand and its options to `lab`; `args` as for Options.
  TrainOptions(CLI::App& lab, const std::vector<std::string>& args);

  CLI::App* app() const { return app_; }

  // The parsed options, checked and converted. Throws UsageError naming the flag.
  TrainArgs check() const;

 private:
  void checkModel(TrainArgs& a) const;
  void checkModes(TrainArgs& a) const;
  void checkRun(TrainArgs& a) const;
  CLI::App* app_;
  Options o_;
  bool quiet_ = false;
};

}  // namespace arl::app
