// Value types that cross from the runtime's thread to the GUI thread in queued signals.
#pragma once

#include <QMetaType>
#include <cstdint>
#include <string>
#include <vector>

#include "export/export.h"
#include "runtime/run_types.h"
#include "runtime/sweep.h"
#include "topology/topology_run.h"
#include "train/train_types.h"
#include "window/setup.h"

namespace arl::ui {

using WorkerList = std::vector<WorkerInfo>;

// The telemetry batches gathered since the last hand-over, in the order they arrived.
struct TelemetryBatches {
  std::vector<TelemetryBatchEvent> batches;
  uint64_t events = 0;
};

// What a session runs: the sweep, on how many workers, and the setup it came from.
struct SessionRequest {
  SessionSetup setup;
  SweepSpec spec;
};

// The workers' side of the setup: changing it restarts the coordinator (when idle).
struct WorkerSetup {
  int localWorkers = 4;
  std::string listen;
  std::string backend = "cpu";
  std::vector<int> devices;  // CoordinatorOptions::localDevices
  ControlSecurity security;  // CoordinatorOptions::security
  bool operator==(const WorkerSetup&) const = default;
};

// The end of a session: why it stopped early ("" when it ran to its end), the rank the
// failure names (-1: none) and the last step that rank's telemetry reported in the failed run
// (-1: none arrived).
struct SessionEnd {
  std::string error;
  int failedRank = -1;
  bool stoppedByUser = false;
  int lastStep = -1;
};

// Progress of the session, for the status bar.
struct RunProgress {
  size_t runIndex = 0, runTotal = 0;  // 1-based index of the run in progress
  std::string label;                  // "ring allreduce 1M"
  uint32_t iteration = 0, iterations = 0;
};

// Registers the types above for queued connections (once, from any thread).
void registerRuntimeTypes();

}  // namespace arl::ui

Q_DECLARE_METATYPE(arl::ui::WorkerList)
Q_DECLARE_METATYPE(arl::ui::TelemetryBatches)
Q_DECLARE_METATYPE(arl::ui::SessionEnd)
Q_DECLARE_METATYPE(arl::ui::RunProgress)
Q_DECLARE_METATYPE(arl::ui::TopologyRun)
Q_DECLARE_METATYPE(arl::SweepRow)
Q_DECLARE_METATYPE(arl::BenchReport)
Q_DECLARE_METATYPE(arl::TrainRecord)
