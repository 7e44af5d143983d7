// nccl-tests' files, out and in. Out: `bench -J FILE` writes a session in the schema of
// nccl-tests 2.19.6's `-J` output (src/util.cu: jsonOutputInit, writeDeviceReport,
// writeBenchmarkLine*, writePerIterReport, writeResultFooter; JSON_FILE_VERSION 3), so that
// nccl-tests' tools/analyze_perf_json.py reads it. In: `allreduce-lab import` and the window
// read nccl-tests' `-J` JSON, its printed table, and NCCL Inspector's JSON lines
// (plugins/profiler/inspector in NVIDIA/nccl) into a session without telemetry, labelled with
// where it came from. Formats and mappings: docs/import.md.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "export/export.h"

namespace arl {

// nccl-tests' per-iteration summary (src/util.cu, computeIterStats): p50 is the element at
// n/2 of the sorted times, p95 and p99 the element at min(n-1, ceil(n*p/100)-1), stdev the
// population's; cv = stdev / avg in percent (0 when avg is 0).
struct NcclIterStats {
  double minUs = 0, maxUs = 0, avgUs = 0, p50Us = 0, p95Us = 0, p99Us = 0, stdevUs = 0, cvPct = 0;
};
NcclIterStats ncclIterStats(const std::vector<double>& timesUs);

// Per timed iteration, the slowest rank's time (nccl-tests' times_us: the max over process
// rows), and per rank its own times (per_process_max_times_us: one process per rank in the
// lab). A rank that did not report an iteration leaves NaN there.
struct NcclIterTimes {
  std::vector<double> timesUs;
  std::vector<std::vector<double>> perRankUs;  // [rank][iteration]
};
NcclIterTimes ncclIterTimes(const RunResult& res);

// What the file says besides the session: the command line and the environment as
// nccl-tests writes them, and the session's start and end ("%Y-%m-%d %H:%M:%S", local time).
struct NcclTestsJsonInfo {
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::string startTime, endTime;
  bool perIterTiming = false;  // -I 1: each result gets its *_per_iter block
};

// The session as nccl-tests' -J JSON: one result per row (the row's algorithm, slice and
// slices in flight in experiment_name), out_of_place or in_place as the lab ran it.
std::string ncclTestsJson(const BenchReport& r, const NcclTestsJsonInfo& info);

// The environment variables that ncclTestsJson's "env" lists: NCCL_*, CUDA_* and ARL_*, not the
// whole environment (nccl-tests writes all of it; a file that travels should not).
std::vector<std::string> ncclTestsEnv(char** envp);

// A file that cannot be imported: what() names the file, the line (or the JSON path) and why.
struct ImportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class ImportFormat : uint8_t { NcclTestsJson, NcclTestsText, InspectorJsonl };
std::string_view toString(ImportFormat f);

// The format of `text`: JSON lines whose first object has "header" and "coll_perf" or
// "p2p_perf" are Inspector's; other text that opens with '{' is nccl-tests' JSON; anything
// else is read as nccl-tests' table.
ImportFormat detectImportFormat(std::string_view text);

// Each reader turns one file's text into a session: a row per result (per size and collective
// for Inspector), Done, with no telemetry; the rows' algorithm is the source's label
// ("nccl-tests (host, GPU)") and BenchReport::source says where it came from. `name` is the
// file's name for the label and the errors. Throws ImportError.
BenchReport importNcclTestsJson(std::string_view text, const std::string& name);
BenchReport importNcclTestsText(std::string_view text, const std::string& name);
BenchReport importInspectorJsonl(std::string_view text, const std::string& name);
BenchReport importText(std::string_view text, const std::string& name);  // by detectImportFormat

// Whether `algorithm` is an imported session's label rather than one of the lab's algorithms.
bool isImportedLabel(std::string_view algorithm);

// The most an imported file may hold; more is refused before it is parsed.
inline constexpr uint64_t kMaxImportBytes = uint64_t{256} << 20;

// importText() of a file (bounded by kMaxImportBytes).
BenchReport importFile(const std::string& path);

// Whether `path` is a recording (its text opens as one) rather than a file to import.
bool isRecordingFile(const std::string& path);

// readRecording() for a recording, importFile() for anything else; ImportError and
// RecordingError both derive from std::runtime_error.
BenchReport readSessionFile(const std::string& path);

}  // namespace arl
