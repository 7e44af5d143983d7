// The replica's gradients: against central finite differences of the loss, summed over the
// shards of several ranks against the full batch's, and the loss falling as a model trains.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "train/replica.h"

namespace arl {
namespace {

TrainConfig config(std::vector<uint32_t> layers, uint32_t batch, uint64_t seed) {
  TrainConfig cfg;
  cfg.layers = std::move(layers);
  cfg.batch = batch;
  cfg.seed = seed;
  return cfg;
}

// Non-zero biases: with the initial zero biases, a sample whose layer below is all zero (all
// its ReLUs off) sits exactly on a kink of the next layer's ReLUs, where a finite difference
// averages the two one-sided slopes and is not the derivative.
std::vector<float> weightsWithBiases(const Replica& r, const std::vector<uint32_t>& widths) {
  std::vector<float> w(r.params(), r.params() + r.paramCount());
  size_t offset = 0;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    offset += size_t{widths[l]} * widths[l + 1];
    for (uint32_t o = 0; o < widths[l + 1]; ++o) w[offset + o] = 0.1f * static_cast<float>(o + 1);
    offset += widths[l + 1];
  }
  return w;
}

// Two hidden layers, so that a delta goes through a ReLU from a layer below the loss as well.
// The loss is computed in float: a step of 1e-3 keeps its rounding (about 1e-7 of the loss,
// 1e-4 of the quotient) below the tolerance, and is small enough to cross no ReLU kink here
// (1e-2 crosses some).
TEST(Gradient, MatchesCentralFiniteDifferences) {
  const TrainConfig cfg = config({5, 4, 4, 3}, 8, 7);
  Replica r(cfg, 0, 1);
  const uint32_t step = 2;
  std::vector<float> w = weightsWithBiases(r, cfg.layers);
  std::vector<float> grad;
  fullBatchGradient(cfg, w.data(), step, grad);
  ASSERT_EQ(grad.size(), r.paramCount());

  const float h = 1e-3f;
  float largest = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const float keep = w[i];
    w[i] = keep + h;
    const double up = batchLoss(cfg, w.data(), step);
    const float hi = w[i];
    w[i] = keep - h;
    const double down = batchLoss(cfg, w.data(), step);
    const float lo = w[i];
    w[i] = keep;
    const double fd = (up - down) / (static_cast<double>(hi) - lo);
    EXPECT_NEAR(grad[i], fd, 1e-4 + 0.01 * std::abs(fd)) << "parameter " << i;
    largest = std::max(largest, std::abs(grad[i]));
  }
  // The comparison says little unless some gradients are well above the tolerance.
  EXPECT_GT(largest, 0.05f);
}

TEST(Gradient, ReplicaOfOneRankIsTheFullBatch) {
  const TrainConfig cfg = config({6, 5, 3}, 8, 3);
  Replica r(cfg, 0, 1);
  const double loss = r.computeGradients(4, {}, {});
  std::vector<float> full;
  const double fullLoss = fullBatchGradient(cfg, r.params(), 4, full);
  EXPECT_EQ(loss, fullLoss);
  EXPECT_TRUE(std::equal(full.begin(), full.end(), r.grads()));
  EXPECT_EQ(fullLoss, batchLoss(cfg, r.params(), 4));
}

// Each rank's gradient is its shard's sum over the global batch, so the ranks' gradients add
// up to the full batch's mean gradient, and their losses average to the batch's.
TEST(Gradient, ShardsOfFourRanksSumToTheFullBatch) {
  const TrainConfig cfg = config({12, 10, 8, 4}, 16, 11);
  const uint32_t step = 3;
  std::vector<double> sum;
  double lossSum = 0;
  std::vector<std::vector<float>> perRank;
  for (int rank = 0; rank < 4; ++rank) {
    Replica r(cfg, rank, 4);
    lossSum += r.computeGradients(step, {}, {});
    perRank.emplace_back(r.grads(), r.grads() + r.paramCount());
    sum.resize(r.paramCount(), 0.0);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += r.grads()[i];
  }
  Replica r0(cfg, 0, 4);
  std::vector<float> full;
  const double fullLoss = fullBatchGradient(cfg, r0.params(), step, full);
  ASSERT_EQ(full.size(), sum.size());
  float largest = 0;
  for (float g : full) largest = std::max(largest, std::abs(g));
  ASSERT_GT(largest, 0.0f);
  for (size_t i = 0; i < sum.size(); ++i)
    EXPECT_NEAR(sum[i], full[i], 1e-5 * largest) << "parameter " << i;
  EXPECT_NEAR(lossSum / 4, fullLoss, 1e-6 * fullLoss);
  // Different shards: no two ranks computed the same gradient.
  EXPECT_NE(perRank[0], perRank[1]);
  EXPECT_NE(perRank[2], perRank[3]);
}

std::vector<double> train(const TrainConfig& cfg, uint32_t steps) {
  Replica r(cfg, 0, 1);
  std::vector<double> losses;
  for (uint32_t s = 0; s < steps; ++s) {
    losses.push_back(r.computeGradients(s, {}, {}));
    r.applyUpdate(r.grads(), {});
  }
  return losses;
}

double meanOfLast(const std::vector<double>& v, size_t n) {
  double s = 0;
  for (size_t i = v.size() - n; i < v.size(); ++i) s += v[i];
  return s / static_cast<double>(n);
}

TEST(Training, LossFallsOnASmallModel) {
  TrainConfig cfg = config({256, 32, 4}, 64, 1);
  cfg.lr = 0.1f;
  const std::vector<double> losses = train(cfg, 30);
  EXPECT_NEAR(losses.front(), std::log(4.0), 0.7);  // about chance at the start
  EXPECT_LT(meanOfLast(losses, 5), 0.5 * losses.front());
}

TEST(Training, LossFallsOnASmallModelWithAdam) {
  TrainConfig cfg = config({256, 32, 4}, 64, 1);
  cfg.optimizer = OptimizerKind::Adam;
  cfg.lr = 0.01f;
  const std::vector<double> losses = train(cfg, 30);
  EXPECT_LT(meanOfLast(losses, 5), 0.5 * losses.front());
}

// The default model (784x512x512x10, batch 256, SGD lr 0.05 momentum 0.9) on one rank, which
// computes the same mean gradient as the ranks together: from about ln 10 to well below 1 in
// 50 steps, but not in the first few (the task is not trivial).
TEST(Training, DefaultModelLearnsInFiftySteps) {
  const std::vector<double> losses = train(TrainConfig{}, 50);
  EXPECT_NEAR(losses.front(), std::log(10.0), 0.7);
  EXPECT_GT(losses[3], 1.0);
  EXPECT_LT(meanOfLast(losses, 5), 0.6);
}

}  // namespace
}  // namespace arl
