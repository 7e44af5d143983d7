// The optimizers of Replica::applyUpdate on a model of 6 parameters (2x2: 4 weights, 2
// biases), two updates each, against values worked out by hand from the formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <vector>

#include "train/replica.h"

namespace arl {
namespace {

constexpr std::array<float, 6> kW0 = {1.0f, -2.0f, 0.5f, 0.0f, 3.0f, -1.0f};
constexpr std::array<float, 6> kG1 = {0.5f, -1.0f, 2.0f, 0.0f, 0.25f, 1.0f};
constexpr std::array<float, 6> kG2 = {1.0f, 1.0f, -2.0f, 0.5f, 0.0f, 0.5f};

std::vector<float> twoUpdates(const TrainConfig& cfg, std::vector<float>* afterFirst) {
  Replica r(cfg, 0, 1);
  EXPECT_EQ(r.paramCount(), kW0.size());
  std::copy(kW0.begin(), kW0.end(), r.params());
  r.applyUpdate(kG1.data(), {});
  if (afterFirst) afterFirst->assign(r.params(), r.params() + r.paramCount());
  // The gradient may be the replica's own gradient vector.
  std::copy(kG2.begin(), kG2.end(), r.grads());
  r.applyUpdate(r.grads(), {});
  return {r.params(), r.params() + r.paramCount()};
}

TrainConfig tiny(OptimizerKind k, float lr) {
  TrainConfig cfg;
  cfg.layers = {2, 2};
  cfg.batch = 1;
  cfg.optimizer = k;
  cfg.lr = lr;
  cfg.momentum = 0.9f;
  return cfg;
}

// lr 0.1, momentum 0.9. Step 1: v = g1, w = w0 - 0.1 g1. Step 2: v = 0.9 g1 + g2, w -= 0.1 v;
// e.g. element 0: v = 0.45 + 1 = 1.45, w = 0.95 - 0.145 = 0.805.
TEST(Optimizer, SgdMomentumAsPyTorch) {
  std::vector<float> first;
  const std::vector<float> w = twoUpdates(tiny(OptimizerKind::Sgd, 0.1f), &first);
  const std::array<float, 6> want1 = {0.95f, -1.9f, 0.3f, 0.0f, 2.975f, -1.1f};
  const std::array<float, 6> want2 = {0.805f, -1.91f, 0.32f, -0.05f, 2.9525f, -1.24f};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(first[i], want1[i], 1e-6) << "element " << i;
    EXPECT_NEAR(w[i], want2[i], 1e-6) << "element " << i;
  }
}

// lr 0.01, beta1 0.9, beta2 0.999. Step 1: m^ = g1 and v^ = g1^2, so each weight moves by
// lr against the sign of its gradient (0 for a zero gradient). Step 2: m = 0.09 g1 + 0.1 g2,
// v = 0.000999 g1^2 + 0.001 g2^2, m^ = m / 0.19, v^ = v / 0.001999; e.g. element 1
// (g1 = -1, g2 = 1): m^ = 0.01 / 0.19, v^ = 1, w = -1.99 - 0.01 * 0.0526316 = -1.9905263;
// element 3 (g1 = 0, g2 = 0.5): m^ = 0.263158, v^ = 0.125063, w = -0.01 * 0.744137.
TEST(Optimizer, AdamAsKingmaAndBa) {
  std::vector<float> first;
  const std::vector<float> w = twoUpdates(tiny(OptimizerKind::Adam, 0.01f), &first);
  const std::array<float, 6> want1 = {0.99f, -1.99f, 0.49f, 0.0f, 2.99f, -1.01f};
  const std::array<float, 6> want2 = {0.9803482f,  -1.9905263f, 0.4905263f,
                                      -0.0074414f, 2.9832994f,  -1.0193218f};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(first[i], want1[i], 2e-6) << "element " << i;
    EXPECT_NEAR(w[i], want2[i], 2e-6) << "element " << i;
  }
}

TEST(Optimizer, ReportsOneOptimizerSpan) {
  Replica r(tiny(OptimizerKind::Sgd, 0.1f), 0, 1);
  std::vector<TrainSpan> spans;
  r.applyUpdate(kG1.data(), [&](TrainSpan::Kind k, uint32_t i, int64_t s, int64_t e) {
    spans.push_back({k, i, s, e});
  });
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].kind, TrainSpan::Kind::Optimizer);
  EXPECT_EQ(spans[0].index, 0u);
  EXPECT_LE(spans[0].startNs, spans[0].endNs);
}

}  // namespace
}  // namespace arl
