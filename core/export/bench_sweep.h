// The sweep a bench configuration asks for: the one mapping from the settings to the runs.
// `allreduce-lab bench` and `calibrate` build their sweeps with it, and the window turns its
// setup into a BenchConfig (ui/window/setup.h) and builds its sweep with it too, so that the
// same settings make the same runs whichever client starts them.
#pragma once

#include <cstdint>
#include <vector>

#include "export/export.h"
#include "runtime/sweep.h"

namespace arl {

// The run request every run of `c`'s sweep starts from (the sweep sets each run's algorithm,
// size, slice and slices in flight): every field of the run requests that `c` holds.
RunRequest runRequestOf(const BenchConfig& c);

// The sweep `c` asks for over `sizes` (nccl-tests' sizes S, in run order): every field of the
// run requests that `c` holds, its algorithms, slice sizes, slices in flight and network. The
// model and whether to keep telemetry are the caller's to set.
SweepSpec sweepSpecOf(const BenchConfig& c, const std::vector<uint64_t>& sizes);

}  // namespace arl
