// One rank's replica of the model: a multilayer perceptron (ReLU between layers, softmax
// cross-entropy at the end) with its weights and gradients in one flat float vector each, the
// rank's shard of a synthetic data set, and its optimizer. Computed on the CPU with Eigen.
//
// The flat layout is layer by layer, each layer's weights (out x in, column-major) then its
// biases, so a bucket of whole layers in reverse order is one contiguous range of floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "train/train_types.h"

namespace arl {

// A group of gradients reduced by one collective: the floats [begin, end) of the flat
// gradient vector, the layers [firstLayer, lastLayer] (lastLayer first in the backward pass);
// a piece of one layer has firstLayer == lastLayer.
struct Bucket {
  size_t begin = 0;
  size_t end = 0;
  uint32_t firstLayer = 0;
  uint32_t lastLayer = 0;
  bool operator==(const Bucket&) const = default;
};

// Buckets of at most `bucketBytes` of float gradients each, filled with whole layers from the
// last layer back, in the order the backward pass completes them. The first bucket closes
// once it holds kFirstBucketBytes (its last layer may take it over, up to the cap), as
// PyTorch DDP's first bucket does, so that the first all-reduce starts early in the backward
// pass. A layer larger than the cap
// is cut into buckets of the cap (from its end back), all complete when its gradients are:
// more, smaller collectives at once, which is what too small a bucket costs.
// DDP's first bucket size (torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES, 1 MiB).
inline constexpr uint64_t kFirstBucketBytes = uint64_t{1} << 20;

std::vector<Bucket> planBuckets(const std::vector<uint32_t>& layers, uint64_t bucketBytes);

// A compute span's report: kind, index (layer, or 0), start and end on the steady clock (ns).
using SpanFn = std::function<void(TrainSpan::Kind, uint32_t, int64_t, int64_t)>;

class Replica {
 public:
  // Initial weights from cfg.seed (every rank alike); throws TrainConfigError for a bad config.
  Replica(const TrainConfig& cfg, int rank, int nranks);
  ~Replica();
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  size_t paramCount() const;
  float* params();
  const float* params() const;
  float* grads();
  const float* grads() const;
  const std::vector<Bucket>& buckets() const;

  // Forward and backward over this rank's shard of step `step`'s global batch (samples
  // step*batch .. step*batch+batch-1 of the data set, the rank taking the r-th of nranks
  // equal parts). The gradient is the shard's summed loss gradient divided by the global
  // batch, so the sum over ranks is the full batch's mean gradient. Calls onBucket(b) as soon
  // as bucket b's last gradient is written (may be empty), and span() for each layer's
  // forward and backward. Returns the mean loss over the shard. With cfg.slowComputeRank ==
  // rank, each span takes slowComputeFactor times as long (the rank sleeps the difference).
  // Layer 0's Forward span includes making the shard's inputs; layer l's Backward span is its
  // delta (from layer l+1's, or from the loss), then its weight and bias gradients, after
  // which its bucket may complete.
  double computeGradients(uint32_t step, const std::function<void(size_t bucket)>& onBucket,
                          const SpanFn& span);

  // The optimizer's update with gradient `g` (paramCount() floats; may be grads()), reported
  // as one Optimizer span.
  void applyUpdate(const float* g, const SpanFn& span);

  // FNV-1a 64 of the weights' bytes.
  uint64_t digest() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Loss and gradient of the full global batch of step `step` on one process (no shards), for
// tests: grad gets paramCount floats, the mean gradient over the batch, at weights `params`.
double fullBatchGradient(const TrainConfig& cfg, const float* params, uint32_t step,
                         std::vector<float>& grad);
// The mean loss of the global batch of step `step` at weights `params` (finite differences).
double batchLoss(const TrainConfig& cfg, const float* params, uint32_t step);

// L2 distance between two weight vectors of n floats, summed in double.
double weightDistance(const float* a, const float* b, size_t n);

}  // namespace arl
