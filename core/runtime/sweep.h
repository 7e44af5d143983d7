// A sweep: one collective run over algorithms x sizes x slice sizes x slices in flight, one
// run after another on one world of a coordinator's workers, each row reported as it
// completes with the cost model's prediction beside it. `allreduce-lab bench` drives it, and so
// will the window: the sweep never blocks and owns no thread; its client hands it the coordinator's
// events (Coordinator::takeEvents) from whatever thread drains them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "exec/run_request.h"
#include "model/metrics.h"
#include "model/model.h"
#include "runtime/run_types.h"
#include "runtime/telemetry_collector.h"

namespace arl {

class Coordinator;

struct SweepSpec {
  RunRequest base;  // every field but algorithm, count, sliceBytes and inflight
  std::vector<std::string> algorithms;
  std::vector<uint64_t> sizes;       // nccl-tests' size S of each run, in bytes
  std::vector<uint64_t> sliceSizes;  // empty = base.sliceBytes
  std::vector<int> inflights;        // empty = base.inflight
  ModelParams model;                 // for the predictions
  // The runs' network: every run is shaped to it (it replaces base.shaping) and predicted
  // under it (see predict()).
  LinkShaping shaping;
  bool keepTelemetry = false;  // keep each run's events in its row (for traces)

  bool operator==(const SweepSpec&) const = default;
};

// One point of the sweep, in run order: sizes, then algorithms, slice sizes, slices in flight.
struct SweepPoint {
  uint64_t sizeBytes = 0;
  std::string algorithm;
  uint64_t sliceBytes = 0;
  int inflight = 0;
};

struct SweepRow {
  uint64_t sizeBytes = 0;   // S, nccl-tests' size column
  uint64_t count = 0;       // NCCL API count (per rank for reduce-scatter and all-gather)
  double predictedUs = 0;   // the cost model's prediction; NaN when it has none
  int64_t startNs = 0;      // coordinator clock when the run was submitted
  int64_t endNs = 0;        // coordinator clock when its result arrived
  Metrics metrics;          // time, algbw, busbw, #wrong
  RunResult result;         // events filled only with SweepSpec::keepTelemetry
  uint64_t eventsKept = 0;  // telemetry events the run delivered
  // How predict() made predictedUs (closed form or simulation); none without a prediction.
  std::optional<PredictionMethod> predictedBy;
};

class Sweep {
 public:
  using RowHandler = std::function<void(const SweepRow&)>;

  // `world`: the workers the sweep runs on, as Coordinator::workers() returned them, in rank
  // order. The sweep holds that world (Coordinator::holdWorld) from start() until it ends, so
  // every row has its ranks: a worker that joins meanwhile waits as a spare, and a member
  // that leaves ends the sweep with the error that names it. `onRow` is called as each row
  // completes.
  Sweep(Coordinator& coord, SweepSpec spec, std::vector<WorkerInfo> world, RowHandler onRow = {});
  // Releases the world if the sweep still holds it (the run in progress, if any, goes on).
  ~Sweep();
  Sweep(const Sweep&) = delete;
  Sweep& operator=(const Sweep&) = delete;

  // Holds the world and submits the first run (returns at once). A sweep without workers
  // ends at once with an error.
  void start();

  // Hands the sweep one event taken from the coordinator. It keeps the telemetry of its
  // runs (moved out of `ev` when keepTelemetry) and, on a run's RunFinished, completes the
  // row and submits the next run. Returns true when `ev` belonged to the sweep's run.
  bool onEvent(CoordinatorEvent& ev);

  // Aborts the run in progress and submits no other; the sweep ends, and releases the world,
  // when that run's result arrives (at once when none is running). Completed rows are kept.
  void stop(const std::string& reason);

  bool finished() const { return finished_; }
  // Why the sweep ended early (the failed run's error, the stop reason); empty otherwise.
  const std::string& error() const { return error_; }
  const std::vector<SweepRow>& rows() const { return rows_; }
  std::vector<SweepRow> takeRows() { return std::move(rows_); }

  const std::vector<SweepPoint>& points() const { return points_; }
  const std::vector<WorkerInfo>& world() const { return world_; }
  // Index in points() of the run in progress (or of the next one).
  size_t index() const { return next_ == 0 ? 0 : next_ - 1; }
  uint64_t currentRunId() const { return runId_; }
  // The request of the run in progress as it was submitted (while currentRunId() is not 0).
  const RunRequest& currentRequest() const { return current_.result.request; }

 private:
  void submitNext();
  void complete(RunResult res);
  void finish();

  Coordinator& coord_;
  SweepSpec spec_;
  std::vector<WorkerInfo> world_;
  int nranks_;  // the world's workers
  // The ranks of `algorithm`'s collective on the world: the workers less its helpers (the
  // switch; helperWorkers()).
  int collectiveRanks(const std::string& algorithm) const;
  RowHandler onRow_;
  std::vector<SweepPoint> points_;
  bool sharedMemory_;   // runsOverSharedMemory(): the predictions cost the shared-memory plane
  size_t next_ = 0;     // next point to submit
  uint64_t runId_ = 0;  // run in progress; 0 = none
  SweepRow current_;
  TelemetryCollector telemetry_;  // the current run's, with SweepSpec::keepTelemetry
  std::vector<SweepRow> rows_;
  bool started_ = false;
  bool holding_ = false;  // holdWorld() sent, releaseWorld() not yet
  bool stopping_ = false;
  bool finished_ = false;
  std::string error_;
};

// The cost model's query for a completed row: its request as the run resolved it, on
// `shaping` (its prediction is predict() of it).
CostQuery costQueryOf(const SweepRow& row, const LinkShaping& shaping);

// Whether runs on `world` with data plane `plane` move their bytes over shared memory (as the
// workers choose for Auto: every rank on one host, in one pid namespace).
bool runsOverSharedMemory(DataPlaneKind plane, const std::vector<WorkerInfo>& world);

// Which data plane the pairs of a world use, as the workers choose it (runtime/run_job.cpp's
// bindDataPlaneFor): inside a host, across hosts. tcp on several hosts splits the pairs as
// auto does (shared memory inside a host).
struct DataPlaneUse {
  std::string insideHosts;  // "shm", "zmq" or "tcp"
  std::string acrossHosts;  // "zmq" or "tcp", or "" with one host
  int hosts = 0;            // distinct host names
  // For a header line: "shm (auto)", "tcp (auto: several pid namespaces)",
  // "shm inside hosts, tcp across (2 hosts)", "zmq".
  std::string text;
};
DataPlaneUse dataPlaneUse(DataPlaneKind plane, const std::vector<WorkerInfo>& world);

// The points of a sweep, in run order.
std::vector<SweepPoint> sweepPoints(const SweepSpec& spec);

// The request one point runs on `nranks` ranks: the base request with the point's algorithm,
// slice size, slices in flight, and nccl-tests' API count for its size (apiCountForSize).
RunRequest sweepRequest(const SweepSpec& spec, const SweepPoint& p, int nranks);

}  // namespace arl
