// The replica's weights: identical on every rank from one seed, bit-identical after identical
// steps, and the digest and distance that compare them.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "exec/check.h"
#include "train/replica.h"

namespace arl {
namespace {

TrainConfig small(OptimizerKind k) {
  TrainConfig cfg;
  cfg.layers = {20, 16, 16, 5};
  cfg.batch = 8;
  cfg.optimizer = k;
  cfg.lr = k == OptimizerKind::Adam ? 0.001f : 0.05f;
  return cfg;
}

void steps(Replica& r, uint32_t n) {
  for (uint32_t s = 0; s < n; ++s) {
    r.computeGradients(s, {}, {});
    r.applyUpdate(r.grads(), {});
  }
}

TEST(Replica, InitialWeightsAreTheSameOnEveryRank) {
  const TrainConfig cfg = small(OptimizerKind::Sgd);
  Replica a(cfg, 0, 4);
  Replica b(cfg, 3, 4);
  EXPECT_EQ(a.paramCount(), parameterCount(cfg.layers));
  EXPECT_EQ(a.digest(), b.digest());
  EXPECT_EQ(weightDistance(a.params(), b.params(), a.paramCount()), 0.0);
  TrainConfig other = cfg;
  other.seed = 2;
  EXPECT_NE(Replica(other, 0, 4).digest(), a.digest());
}

// He initialisation: weights of deviation sqrt(2 / inputs), biases zero.
TEST(Replica, HeNormalWeightsAndZeroBiases) {
  TrainConfig cfg;
  cfg.layers = {400, 300, 10};
  Replica r(cfg, 0, 1);
  const float* w = r.params();
  double sq = 0;
  for (size_t i = 0; i < 400 * 300; ++i) sq += double{w[i]} * w[i];
  EXPECT_NEAR(std::sqrt(sq / (400 * 300)), std::sqrt(2.0 / 400), 0.01 * std::sqrt(2.0 / 400));
  for (size_t i = 400 * 300; i < 400 * 300 + 300; ++i) ASSERT_EQ(w[i], 0.0f) << i;
}

TEST(Replica, IdenticalStepsGiveIdenticalWeights) {
  for (OptimizerKind k : {OptimizerKind::Sgd, OptimizerKind::Adam}) {
    SCOPED_TRACE(std::string(toString(k)));
    const TrainConfig cfg = small(k);
    Replica a(cfg, 0, 2);
    Replica b(cfg, 0, 2);
    const uint64_t before = a.digest();
    steps(a, 5);
    steps(b, 5);
    EXPECT_NE(a.digest(), before);
    EXPECT_EQ(a.digest(), b.digest());
    EXPECT_EQ(weightDistance(a.params(), b.params(), a.paramCount()), 0.0);
    // Another rank's shard alone moves the weights elsewhere.
    Replica c(cfg, 1, 2);
    steps(c, 5);
    EXPECT_NE(c.digest(), a.digest());
    EXPECT_GT(weightDistance(a.params(), c.params(), a.paramCount()), 0.0);
  }
}

TEST(Replica, DigestIsFnv1aOfTheWeightBytes) {
  Replica r(small(OptimizerKind::Sgd), 0, 1);
  EXPECT_EQ(r.digest(), fnv1a64(kFnv64Offset, r.params(), r.paramCount() * sizeof(float)));
  r.params()[r.paramCount() - 1] += 1.0f;
  EXPECT_EQ(r.digest(), fnv1a64(kFnv64Offset, r.params(), r.paramCount() * sizeof(float)));
}

TEST(Replica, WeightDistanceIsL2) {
  const std::vector<float> a = {0.0f, 0.0f, 1.0f};
  const std::vector<float> b = {3.0f, 4.0f, 1.0f};
  EXPECT_EQ(weightDistance(a.data(), b.data(), 3), 5.0);
  EXPECT_EQ(weightDistance(a.data(), a.data(), 3), 0.0);
}

}  // namespace
}  // namespace arl
