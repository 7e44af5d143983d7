// Refused training configurations: parseLayers' rules, and checkTrainConfig's messages, each
// naming the flag and the value as the user typed them.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "train/replica.h"

namespace arl {
namespace {

TEST(TrainConfig, ParseLayers) {
  EXPECT_EQ(parseLayers("784x512x512x10"), (std::vector<uint32_t>{784, 512, 512, 10}));
  EXPECT_EQ(parseLayers("2x2"), (std::vector<uint32_t>{2, 2}));
  EXPECT_EQ(parseLayers("65536x1"), (std::vector<uint32_t>{65536, 1}));
  for (const char* bad : {"", "784", "0x10", "10x", "x10", "10xx10", "10x-2", "10x2.5", "10 x2",
                          "65537x2", "1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1"})
    EXPECT_FALSE(parseLayers(bad).has_value()) << '"' << bad << '"';
  EXPECT_EQ(formatLayers({784, 512, 10}), "784x512x10");
}

std::string refusal(const std::function<void(TrainConfig&)>& change, int nranks) {
  TrainConfig cfg;
  change(cfg);
  try {
    checkTrainConfig(cfg, nranks);
  } catch (const TrainConfigError& e) {
    return e.what();
  }
  return "accepted";
}

// The start of the message: the flag and the value.
::testing::AssertionResult startsWith(const std::string& s, const std::string& prefix) {
  if (s.rfind(prefix, 0) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << '"' << s << "\" does not start with \"" << prefix << '"';
}

TEST(TrainConfig, RefusalsNameTheFlag) {
  EXPECT_EQ(refusal([](TrainConfig&) {}, 4), "accepted");
  EXPECT_TRUE(startsWith(refusal([](TrainConfig& c) { c.bucketBytes = 0; }, 4), "--bucket 0: "));
  EXPECT_TRUE(startsWith(refusal([](TrainConfig& c) { c.layers = {784}; }, 4), "--model 784: "));
  EXPECT_TRUE(startsWith(refusal(
                             [](TrainConfig& c) {
                               c.layers = {784, 1};
                             },
                             4),
                         "--model 784x1: "));
  EXPECT_TRUE(startsWith(refusal([](TrainConfig& c) { c.batch = 6; }, 4), "--batch 6: "));
  EXPECT_TRUE(startsWith(refusal([](TrainConfig& c) { c.steps = 0; }, 4), "--steps 0: "));
  EXPECT_TRUE(startsWith(refusal([](TrainConfig& c) { c.lr = 0; }, 4), "--lr 0: "));
  EXPECT_TRUE(startsWith(refusal([](TrainConfig& c) { c.momentum = 1; }, 4), "--momentum 1: "));
  EXPECT_TRUE(
      startsWith(refusal([](TrainConfig& c) { c.slowComputeRank = 4; }, 4), "--slow-compute 4: "));
  EXPECT_TRUE(startsWith(refusal(
                             [](TrainConfig& c) {
                               c.slowComputeRank = 1;
                               c.slowComputeFactor = 0.5;
                             },
                             4),
                         "--slow-compute 0.5: "));
  EXPECT_TRUE(startsWith(refusal([](TrainConfig& c) { c.sync = SyncMode::Ps; }, 1), "--sync ps: "));
}

TEST(TrainConfig, ReplicaRefusesABadConfig) {
  TrainConfig cfg;
  cfg.batch = 10;
  EXPECT_THROW(Replica(cfg, 0, 4), TrainConfigError);
  cfg.batch = 8;
  EXPECT_NO_THROW(Replica(cfg, 0, 4));
}

}  // namespace
}  // namespace arl
