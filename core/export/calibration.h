// A calibration: the cost model's parameters as `allreduce-lab calibrate` measured them on one
// machine, with the measurements they came from. `bench` and `plan` predict with it when it is
// at calibrationPath(). The format is documented in docs/bench.md; the reader takes a file
// from anywhere and checks every field, naming the file and the field it refuses.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "model/model.h"

namespace arl {

inline constexpr std::string_view kCalibrationFormat = "allreduce-lab-calibration";
// Version 2 adds the shared-memory plane's copy rate and the cores (params.shm_copy_s_per_byte,
// params.cores, measurements.copy); version 3 the rates on a working set that fits in the
// last-level cache and that cache's size (params.shm_copy_cached_s_per_byte,
// params.gamma_cached_s_per_byte, params.llc_bytes, measurements.copy_cached,
// measurements.reduce_cached, measurements.llc_source); version 4 the shared-memory plane's
// sends into a ring (params.shm_send_s_per_byte, params.shm_send_fresh_s_per_byte,
// measurements.send); version 5 the shared-memory model's own per-message cost, fitted with
// its work scale (params.shm_alpha_s). Earlier versions are still read, without what they lack.
inline constexpr int kCalibrationVersion = 5;

// One collective run the fit used, as measured (the lab's time: the mean over timed
// iterations of the slowest rank) and as the fitted closed form says.
struct CalibrationRun {
  std::string algorithm;
  uint64_t sizeBytes = 0;  // nccl-tests' size S
  double measuredUs = 0;
  double p50Us = 0;     // median iteration, for judging the noise
  double fittedUs = 0;  // closed form with the fitted parameters
};

// The in-process measurement of the CPU backend's reduction that gamma comes from.
struct ReduceMeasurement {
  uint64_t bufferBytes = 0;  // reduced per pass, in slices of sliceBytes
  uint64_t sliceBytes = 0;
  int passes = 0;
  double medianPassSeconds = 0;
  std::string kernels;  // the CPU backend's kernels ("avx2", "portable")
};

// The in-process measurement of a thread's copy between buffers of separate mappings, in
// slices, that the shared-memory plane's copy rate (ModelParams::shmCopy) comes from.
struct CopyMeasurement {
  uint64_t bufferBytes = 0;  // copied per pass
  uint64_t sliceBytes = 0;
  int passes = 0;
  double medianPassSeconds = 0;
};

// The in-process measurement of the shared-memory plane's sends (ModelParams::shmSend and
// shmSendFresh): each thread copies its slices into a ring of `ringBytes` written round and
// round, as a sender fills its receiver's ring; from a buffer of its own (`fromBuffer`), and
// each slice just after reducing it into a temporary (`fresh`, the copies alone timed).
struct SendMeasurement {
  uint64_t ringBytes = 0;
  CopyMeasurement fromBuffer;
  CopyMeasurement fresh;
};

struct Calibration {
  ModelParams params;
  std::string machine;    // host name
  std::string date;       // when it was measured, ISO 8601 UTC ("2026-12-01T19:56:19Z")
  std::string dataPlane;  // the data plane the runs used: "shm" or "zmq"
  int workers = 0;        // local worker processes
  std::string collective = "allreduce";
  std::string dtype = "float";
  uint64_t sliceBytes = 0;
  int inflight = 0;
  int iterations = 0;  // timed iterations per run
  int warmup = 0;
  // Rounds of measurements: each rate and each run is the median of its rounds'. And each
  // round's runs against those medians (the median ratio of its p50s; above 1: slower), how
  // much the machine's speed moved while it was calibrated: none with one round. Version 3
  // files without them: 1 round, no ratios.
  int rounds = 1;
  std::vector<double> roundSlowness;
  double rmsRelativeResidual = 0;  // of the fit over `runs`
  std::vector<CalibrationRun> runs;
  ReduceMeasurement reduce;
  std::optional<CopyMeasurement> copy;  // with params.shmCopy: a shared-memory calibration
  std::optional<SendMeasurement> send;  // with params.shmSend and shmSendFresh (version 4)
  // With params.shmCopyCached, gammaCached and llcBytes: the same measurements on a working set
  // that fits in the last-level cache, and where its size came from ("sysfs", "--llc").
  std::optional<CopyMeasurement> copyCached;
  std::optional<ReduceMeasurement> reduceCached;
  std::string llcSource;
};

// Thrown by the reader; what() names the file and the field ("calibration file
// /x/calibration.json: calibration.params.alpha_s: expected a number, found a string").
struct CalibrationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string calibrationJson(const Calibration& c);

// Reads calibrationJson() output. `origin` names the text in errors (a file's path). Refuses
// another format or version, a missing or mistyped field, and parameters that are not
// positive and finite.
Calibration parseCalibration(std::string_view text, const std::string& origin);

// parseCalibration() of a file's contents; the error names `path` when it cannot be read.
Calibration readCalibration(const std::string& path);

// Writes the calibration to `path`, creating its folder. Throws ConfigError naming the path.
void writeCalibration(const std::string& path, const Calibration& c);

// Where calibrate writes and bench and plan look: $ARL_CALIBRATION when set and not empty,
// else $XDG_CONFIG_HOME/allreduce-lab/calibration.json, else
// $HOME/.config/allreduce-lab/calibration.json. Empty when none of them is set.
std::string calibrationPath();

// "2026-12-01T19:56:19Z" for now.
std::string utcTimestamp();

}  // namespace arl
