// Exporters of a benchmark session (`allreduce-lab bench`): results as JSON and CSV, a
// Chrome trace-event file that ui.perfetto.dev opens, and a recording that keeps everything a
// replay needs, with its reader. Formats are documented in docs/bench.md and
// docs/trace-and-recording.md. No Qt here: the window reads recordings through this header.
// JSON goes through export/json.h (nlohmann/json).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/types.h"
#include "exec/telemetry.h"
#include "model/metrics.h"
#include "model/model.h"
#include "runtime/run_types.h"
#include "runtime/sweep.h"

namespace arl {

// What `allreduce-lab bench` was asked to do, after parsing (nccl-tests' flags and ours).
struct BenchConfig {
  uint64_t minBytes = uint64_t{32} << 20;  // -b
  uint64_t maxBytes = uint64_t{32} << 20;  // -e
  uint64_t stepFactor = 0;                 // -f; 0 = sizes grow by stepBytes instead
  uint64_t stepBytes = uint64_t{1} << 20;  // -i
  int iters = 20;                          // -n
  int warmup = 5;                          // -w
  uint32_t check = 1;                      // -c: iterations checked (RunRequest::check)
  RedOp op = RedOp::Sum;                   // -o
  DataType dtype = DataType::Float;        // -d
  Collective collective = Collective::AllReduce;
  std::vector<std::string> algorithms = {"ring"};
  // --schedule FILE.xml: an MSCCL algorithm file's text (RunRequest::scheduleXml), run as the
  // one algorithm "msccl:NAME"; empty otherwise.
  std::string scheduleXml;
  int workers = 4;  // local workers
  int ranksPerHost = 0;
  int radix = 0;  // --radix: knomial's k (RunRequest::radix; 0 = its default)
  // Slice sizes and slices in flight to sweep (every combination is a run). 1 MiB: fewer,
  // larger slices win until the pipeline gets too short, on the ZeroMQ data plane (about
  // 30 us of CPU a message) more so than on shared memory (docs/performance.md).
  std::vector<uint64_t> sliceSizes = {uint64_t{1} << 20};
  std::vector<int> inflights = {4};
  int window = 1;               // --window: ring's window of slices (RunRequest::window)
  std::vector<int> ringOrder;   // empty = 0, 1, ..., n-1
  std::string backend = "cpu";  // the local workers' (mpi when the list has it)
  // --backend's list when it names engines beside cpu (cpu,mpi): each row says which ran it
  // (rowBackend); empty when it names one backend.
  std::vector<std::string> backends;
  // --mca NAME VALUE pairs for the mpirun of the workers, flattened (btl, self,vader, ...):
  // Open MPI's own parameters, e.g. its transport (btl).
  std::vector<std::string> mpiMca;
  std::vector<int> devices;  // --device: local workers' GPUs (runtime/coordinator.h's rule)
  std::string listen;
  ControlSecurity security;  // --keys, --allow, --insecure; not recorded
  int expect = 0;            // remote workers
  TelemetryLevel telemetry = TelemetryLevel::Chunks;
  uint64_t maxEvents = 1'000'000;
  DataPlaneKind dataPlane = DataPlaneKind::Auto;  // --data-plane
  bool cudaIpc = true;                            // --cuda-ipc on|off
  std::chrono::milliseconds stallTimeout{20000};  // --stall-timeout
  LinkShaping shaping;   // --nic-bw, --link-latency, --slow-rank, --slow-link, --topology
  std::string topology;  // --topology as topologyName() spells it ("" = none)
  int root = 0;
  bool inPlace = false;
  int mismatchRank = -1;    // --mismatch-rank (RunRequest::mismatchRank)
  bool randomData = false;  // --data random (RunRequest::randomData)
  std::string jsonPath, csvPath, tracePath, recordPath;
  std::string flightRecordPath;   // --flight-record: failed runs' flight records as JSON
  std::string ncclTestsJsonPath;  // -J: nccl-tests' JSON (export/nccl_tests.h)
  bool perIterTiming = false;     // -I 1: nccl-tests' per-iteration summary
};

// One run of the sweep: one size with one algorithm.
// One run of the sweep (runtime/sweep.h): its size, prediction, metrics and result.
using BenchRow = SweepRow;

// Events the run delivered: result.events.size(), or eventsKept when they were released.
uint64_t eventCount(const BenchRow& row);

// The cost model's parameters fitted from a session's own measured rows (`bench --fit`:
// fitModel() over the rows' times, gamma held at the session's model).
struct SessionFit {
  ModelParams params;
  double rmsRelativeResidual = 0;
  size_t points = 0;
  std::vector<double> fittedUs;  // per row of BenchReport::rows; NaN where the row has none
  std::string error;             // why there is no fit (then params are not set)
};

// Where a report's parameters came from when nobody said (the built-in ModelParams).
inline constexpr const char* kDefaultModelSource =
    "alpha-beta-gamma closed form, default parameters";

// A whole session: configuration, workers, model and one row per run, in run order.
struct BenchReport {
  BenchConfig config;
  std::vector<WorkerInfo> workers;  // in rank order
  ModelParams model;
  std::string modelSource = kDefaultModelSource;
  std::optional<SessionFit> fit;  // with --fit
  std::vector<BenchRow> rows;
  std::string error;  // why the session stopped early ("" when it ran to the end)
  // Where an imported session came from (file, format, hosts, GPU, NCCL version; "" for the
  // lab's own runs, export/nccl_tests.h). Its rows hold no telemetry.
  std::string source;
};

// Results as one JSON object: {"config": {...}, "workers": [...], "model": {...},
// "results": [{size_bytes, count, dtype, op, algorithm, collective, ranks, time_us, ...}]}.
// `wrong` is null when checking was off. With a fit, "model" holds it as "fitted" and every
// result its "fitted_us".
std::string benchResultsJson(const BenchReport& r);

// The same rows as CSV with a header row; fields with commas or quotes are quoted (RFC 4180).
// The last column, predicted_method, is empty without a prediction.
std::string benchResultsCsv(const BenchReport& r);

// What the trace writer found in the runs' timelines (exec/timeline.h).
struct TraceStats {
  uint64_t slices = 0;          // complete events ("X") for sends, receives and reductions
  uint64_t flows = 0;           // send -> receive arrows
  uint64_t unmatchedSends = 0;  // sends whose receive is not in the telemetry
  uint64_t unmatchedRecvs = 0;  // receives whose send is not in the telemetry
  uint64_t counterSamples = 0;  // "C" events
  uint64_t ncclSlices = 0;      // NCCL's (group, collective, kernel channel, proxy step)
  uint64_t ncclProxySteps = 0;  // of which NCCL's proxy steps (network transfers only)
  uint64_t computeSlices = 0;   // a training step's forward, backward and optimizer spans
};

// Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing): one process per
// rank, lanes iterations/steps/compute/send/recv/reduce (compute: a training run's forward,
// backward and optimizer spans), one complete event per slice, a flow arrow
// (flow v2: bind_id with flow_out/flow_in) from every send to its receive, and a per-rank
// counter of bytes sent per millisecond. A shaped session names its network in the bench
// process's name, each shaped rank's port rate in its process name, the network of each run in
// its "runs" slice and in otherData.network. Timestamps in microseconds on the coordinator's
// clock, relative to the first run's start. See docs/trace-and-recording.md.
std::string chromeTraceJson(const BenchReport& r, TraceStats* stats = nullptr);

// The recording format's name and version; readers refuse other versions. Version 2 added
// each event's clock; version 1 recordings are still read (their events timed by the host).
inline constexpr std::string_view kRecordingFormat = "allreduce-lab-recording";
inline constexpr int kRecordingVersion = 2;

// Thrown by the recording reader; what() says what is wrong and where.
struct RecordingError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Everything a replay needs (config, workers, model, every run with its per-rank iteration
// times and all telemetry events, dropped counts) as JSON text.
std::string recordingJson(const BenchReport& r);

// Reads recordingJson() output back, from any source: the text is bounded (size, nesting,
// values) and every field checked for type and range. Throws RecordingError for malformed
// text, another format or version, or a missing, mistyped or out-of-range field (naming its
// JSON path, as "recording.runs[2].request.dtype: missing").
BenchReport parseRecording(std::string_view text);

// parseRecording() of a file's contents; RecordingError names the path when it cannot be read.
BenchReport readRecording(const std::string& path);

// Writes `text` to `path` (replacing it). Throws ConfigError naming the path on failure.
void writeTextFile(const std::string& path, std::string_view text);

}  // namespace arl
