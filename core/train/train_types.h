// A data-parallel training run as the lab runs it (allreduce-lab train, the window's Training
// view): what the workers are asked to train, and what each step measured.
//
// Terms: a *bucket* is a group of gradients reduced by one collective, filled in reverse
// layer order as the backward pass produces them (PyTorch DDP's buckets); a *step* is one
// forward pass, backward pass, gradient synchronisation and optimizer update on every rank.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"

namespace arl {

// How the replicas keep in step.
enum class SyncMode : uint8_t {
  AllReduce,  // every step, every rank all-reduces its gradients and applies the same average
  Ps,         // a parameter server (rank 0) sums the gradients, every rank waits for it
  PsAsync,    // ranks push gradients to the server and pull weights without waiting for others
};
enum class OptimizerKind : uint8_t { Sgd, Adam };

std::string_view toString(SyncMode m);       // "allreduce", "ps", "ps-async"
std::string_view toString(OptimizerKind k);  // "sgd", "adam"
std::optional<SyncMode> parseSyncMode(std::string_view s);
std::optional<OptimizerKind> parseOptimizerKind(std::string_view s);

struct TrainConfig {
  // Layer widths, input first, classes last: {784, 512, 512, 10} ("784x512x512x10").
  std::vector<uint32_t> layers = {784, 512, 512, 10};
  uint32_t steps = 50;
  uint32_t batch = 256;  // samples per step over all ranks, split evenly (a multiple of ranks)
  uint64_t bucketBytes = uint64_t{25} << 20;  // PyTorch DDP's default bucket_cap_mb
  bool overlap = true;  // a bucket's collective starts while the backward pass goes on
  SyncMode sync = SyncMode::AllReduce;
  OptimizerKind optimizer = OptimizerKind::Sgd;
  float lr = 0.05f;
  float momentum = 0.9f;  // SGD only
  uint64_t seed = 1;      // the data set and the initial weights
  // A teaching aid (--slow-compute R:F): rank `slowComputeRank` takes `slowComputeFactor`
  // times as long for each compute span, as a slower device would. -1: none.
  int32_t slowComputeRank = -1;
  double slowComputeFactor = 1.0;

  bool operator==(const TrainConfig&) const = default;
};

// "784x512x512x10" -> {784, 512, 512, 10}; nullopt unless 2..16 widths, each 1..65536.
std::optional<std::vector<uint32_t>> parseLayers(std::string_view s);
std::string formatLayers(const std::vector<uint32_t>& layers);
// Parameters (weights and biases) of a model with these widths.
uint64_t parameterCount(const std::vector<uint32_t>& layers);

// A refused TrainConfig: what() names the flag, e.g. "--bucket 0: must be at least 4 bytes".
struct TrainConfigError : ConfigError {
  using ConfigError::ConfigError;
};
// Throws TrainConfigError for a config that cannot train on `nranks` ranks.
void checkTrainConfig(const TrainConfig& c, int nranks);

// ---- What a step measured -------------------------------------------------------------------

// One span of a rank's step on its timeline, in ns from the step's start on that rank.
struct TrainSpan {
  enum class Kind : uint8_t {
    Forward,    // index: layer
    Backward,   // index: layer
    Optimizer,  // index: 0
    Reduce,     // a bucket's collective in flight; index: bucket
    Push,       // ps-async: the rank's gradients on their way to the server; index: bucket
    Pull,       // ps-async: the server's weights on their way back; index: 0
  };
  Kind kind = Kind::Forward;
  uint32_t index = 0;
  int64_t startNs = 0;
  int64_t endNs = 0;
  bool operator==(const TrainSpan&) const = default;
};
std::string_view toString(TrainSpan::Kind k);  // "forward", "backward", ...
bool isCompute(TrainSpan::Kind k);             // forward, backward, optimizer

// One rank's step.
struct TrainRankStep {
  int32_t rank = 0;
  uint32_t step = 0;
  double loss = 0;         // mean cross-entropy over the rank's shard, before the update
  int64_t stepNs = 0;      // the rank's whole step
  int64_t computeNs = 0;   // forward + backward + optimizer
  int64_t commNs = 0;      // time with a collective (or push/pull) in flight
  int64_t exposedNs = 0;   // stepNs - computeNs: communication the compute did not hide
  int64_t hiddenNs = 0;    // time with communication in flight while the rank computed
  uint64_t digest = 0;     // FNV-1a 64 of the rank's weights after the step
  uint32_t staleness = 0;  // ps-async: server updates between this rank's pull and its push
  // ps-async: the step's spread (the largest L2 distance of a rank's weights after the step
  // from rank 0's after the same step), from the rank whose push completed the step; 0 from
  // the others. The synchronous modes leave it 0 and are judged by the digests.
  double spread = 0;
  std::vector<TrainSpan> spans;
  bool operator==(const TrainRankStep&) const = default;
};

// One step over all ranks, as the tables and charts show it.
struct TrainStepRow {
  uint32_t step = 0;
  double loss = 0;         // mean over ranks
  double stepUs = 0;       // mean over ranks of each rank's step
  double computeUs = 0;    // mean over ranks
  double commUs = 0;       // mean over ranks
  double exposedUs = 0;    // mean over ranks
  double hiddenUs = 0;     // mean over ranks: communication in flight while the rank computed
  bool identical = false;  // every rank's weights bitwise equal to rank 0's after the step
  double spread = 0;       // max over ranks of the L2 distance of its weights from rank 0's
  std::optional<double> staleness;  // ps-async: mean over ranks
  uint32_t maxStaleness = 0;
  bool operator==(const TrainStepRow&) const = default;
};

struct TrainRun {
  std::string label;  // "overlap on", "ps-async", ...
  TrainConfig cfg;
  int32_t workers = 0;
  std::string algorithm;  // the collective's algorithm for the buckets ("ring", ...)
  uint64_t sliceBytes = 0;
  std::string shaping;  // describeShaping of the run's network; "" when unshaped
  std::string backend;
  std::vector<uint32_t> bucketFloats;  // each bucket's gradients, in reduction order
  std::vector<TrainStepRow> steps;
  // Every rank's spans of one step (the last but one, away from the first step's warm-up),
  // for the timeline.
  std::vector<TrainRankStep> sampleStep;
  bool operator==(const TrainRun&) const = default;
};

// One bucket size of a sweep: the median step over the run's steps after the first.
struct BucketSweepPoint {
  uint64_t bucketBytes = 0;
  uint32_t buckets = 0;
  double stepUs = 0;
  double computeUs = 0;
  double exposedUs = 0;
  bool operator==(const BucketSweepPoint&) const = default;
};

struct TrainRecord {
  std::vector<TrainRun> runs;
  std::vector<BucketSweepPoint> sweep;  // empty: no sweep
  bool operator==(const TrainRecord&) const = default;
};

// The sweep point with the smallest step time; nullopt for an empty sweep.
std::optional<BucketSweepPoint> bestBucket(const std::vector<BucketSweepPoint>& sweep);

}  // namespace arl
