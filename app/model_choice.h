// Which cost-model parameters `bench` and `plan` predict with, and where they came from: the
// calibration that `allreduce-lab calibrate` saved (calibrationPath()), the file --model
// names, or the built-in defaults (--model default, or no calibration saved).
#pragma once

#include <optional>
#include <string>

#include "cli_util.h"
#include "export/calibration.h"
#include "model/model.h"

namespace arl::app {

struct ModelChoice {
  ModelParams params;
  // For headers and JSON: "calibration /x/calibration.json (vm, 2026-12-01T19:56:19Z, data
  // plane shm, 4 workers)" or "default parameters (no calibration at /x/calibration.json)".
  std::string source;
  std::optional<Calibration> calibration;  // when the parameters came from one
  std::string path;                        // its file
};

// Declares --model on a subcommand's options.
void declareModelOption(Options& o);

// --model FILE reads FILE, --model default takes the defaults; without --model, the
// calibration at calibrationPath() when a file is there, else the defaults. Throws UsageError
// naming the flag or the file and field when a file is unreadable or malformed.
ModelChoice chooseModel(const std::optional<Arg>& model);

// "alpha 8.1 us per message, port 2.95 GB/s each way, reduce 4.00 GB/s".
std::string paramsText(const ModelParams& p);

}  // namespace arl::app
