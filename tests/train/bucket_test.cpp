// planBuckets and the order of a step's work: spans per layer, buckets announced as the
// backward pass completes them, a slow rank's spans stretched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "train/replica.h"

namespace arl {
namespace {

size_t layerFloats(const std::vector<uint32_t>& w, uint32_t l) {
  return size_t{w[l]} * w[l + 1] + w[l + 1];
}

size_t layerBegin(const std::vector<uint32_t>& w, uint32_t l) {
  size_t begin = 0;
  for (uint32_t i = 0; i < l; ++i) begin += layerFloats(w, i);
  return begin;
}

// Every property of a plan: reverse layer order, contiguous ranges covering the flat vector
// once, the cap kept, whole layers except the pieces of a layer over the cap (each piece of
// the cap but its lowest), and each bucket full: the next layer back would not have fitted.
void expectValidPlan(const std::vector<uint32_t>& w, uint64_t cap) {
  SCOPED_TRACE(formatLayers(w) + " cap " + std::to_string(cap));
  const std::vector<Bucket> plan = planBuckets(w, cap);
  const size_t capFloats = std::max<size_t>(1, cap / sizeof(float));
  ASSERT_FALSE(plan.empty());
  const auto lastLayer = static_cast<uint32_t>(w.size() - 2);
  EXPECT_EQ(plan.front().lastLayer, lastLayer);
  EXPECT_EQ(plan.front().end, parameterCount(w));
  EXPECT_EQ(plan.back().firstLayer, 0u);
  EXPECT_EQ(plan.back().begin, 0u);
  for (size_t b = 0; b < plan.size(); ++b) {
    const Bucket& k = plan[b];
    ASSERT_LE(k.firstLayer, k.lastLayer);
    ASSERT_LT(k.begin, k.end);
    EXPECT_LE(k.end - k.begin, capFloats) << "bucket " << b << " over the cap";
    const bool piece = layerFloats(w, k.lastLayer) > capFloats;
    if (k.firstLayer != k.lastLayer || !piece) {
      EXPECT_EQ(k.begin, layerBegin(w, k.firstLayer));
    }
    if (!piece) EXPECT_EQ(k.end, layerBegin(w, k.lastLayer) + layerFloats(w, k.lastLayer));
    if (b + 1 < plan.size()) {
      EXPECT_EQ(plan[b + 1].end, k.begin);
      EXPECT_GE(plan[b + 1].lastLayer + 1, k.firstLayer);
      if (k.begin == layerBegin(w, k.firstLayer) && k.firstLayer > 0) {
        const size_t withNext = k.end - k.begin + layerFloats(w, k.firstLayer - 1);
        // The first bucket may close early: once it holds DDP's first bucket size.
        const bool firstFull = b == 0 && k.end - k.begin >= kFirstBucketBytes / sizeof(float);
        EXPECT_TRUE(withNext > capFloats || firstFull)
            << "bucket " << b << " could take another layer";
      }
    }
  }
}

TEST(Buckets, PlansAreValidOverModelsAndCaps) {
  const std::vector<std::vector<uint32_t>> models = {
      {784, 512, 512, 10}, {2, 2}, {8, 8, 8, 8, 8}, {3, 100, 1, 100, 7}, {10, 1, 10, 1, 10, 2}};
  for (const auto& w : models)
    for (uint64_t cap : {uint64_t{4}, uint64_t{100}, uint64_t{288}, uint64_t{600}, uint64_t{4096},
                         uint64_t{1} << 20, uint64_t{25} << 20})
      expectValidPlan(w, cap);
}

TEST(Buckets, FillFromTheLastLayerBack) {
  // 8x8x8x8x8: four layers of 72 floats (288 bytes) each.
  const std::vector<uint32_t> w = {8, 8, 8, 8, 8};
  EXPECT_EQ(planBuckets(w, 600), (std::vector<Bucket>{{144, 288, 2, 3}, {0, 144, 0, 1}}));
  EXPECT_EQ(planBuckets(w, 864), (std::vector<Bucket>{{72, 288, 1, 3}, {0, 72, 0, 0}}));
  EXPECT_EQ(planBuckets(w, 288).size(), 4u);
  EXPECT_EQ(planBuckets(w, 4).size(), 288u);  // one float a bucket
  EXPECT_EQ(planBuckets(w, 25 << 20), (std::vector<Bucket>{{0, 288, 0, 3}}));
}

TEST(Buckets, ALayerOverTheCapIsCutIntoBucketsOfTheCap) {
  // 3x100x1x100x7: layers of 400, 101, 200 and 707 floats. 1300 bytes are 325 floats: layer 3
  // goes in pieces of 325, 325 and 57 from its end; its last piece takes layer 2 (257 floats),
  // not layer 1 as well; layer 0 in two pieces.
  const std::vector<uint32_t> w = {3, 100, 1, 100, 7};
  EXPECT_EQ(planBuckets(w, 1300), (std::vector<Bucket>{{1083, 1408, 3, 3},
                                                       {758, 1083, 3, 3},
                                                       {501, 758, 2, 3},
                                                       {400, 501, 1, 1},
                                                       {75, 400, 0, 0},
                                                       {0, 75, 0, 0}}));
}

TEST(Buckets, TheFirstBucketClosesAtOneMiBAsDdpsDoes) {
  // 784x512x512x10 under 25 MB: the first bucket takes the last layer (5130 floats) and the one
  // before it (262656), reaching 1 MiB; the first layer (401920) goes in the second.
  const TrainConfig cfg;
  EXPECT_EQ(planBuckets(cfg.layers, cfg.bucketBytes),
            (std::vector<Bucket>{{401920, parameterCount(cfg.layers), 1, 2}, {0, 401920, 0, 0}}));
  // Layers that never reach 1 MiB stay in one bucket.
  EXPECT_EQ(planBuckets({8, 8, 8, 8, 8}, 25 << 20), (std::vector<Bucket>{{0, 288, 0, 3}}));
}

// What a step reports, in the order it reports it: "F0" a layer's forward span, "B2" a
// layer's backward span, "b1" a bucket announced.
std::vector<std::string> stepEvents(Replica& r, std::vector<TrainSpan>* spans) {
  std::vector<std::string> events;
  r.computeGradients(
      1, [&](size_t b) { events.push_back("b" + std::to_string(b)); },
      [&](TrainSpan::Kind k, uint32_t i, int64_t s, int64_t e) {
        events.push_back((k == TrainSpan::Kind::Forward ? "F" : "B") + std::to_string(i));
        if (spans) spans->push_back({k, i, s, e});
      });
  return events;
}

// 6x5x5x5x3: layers of 35, 30, 30 and 18 floats; a 200-byte cap makes buckets {3, 2}, {1},
// {0}, each announced right after its first layer's gradients and before the layer below.
TEST(Buckets, AnnouncedAsTheBackwardPassCompletesThem) {
  TrainConfig cfg;
  cfg.layers = {6, 5, 5, 5, 3};
  cfg.batch = 4;
  cfg.bucketBytes = 200;
  Replica r(cfg, 1, 2);
  ASSERT_EQ(r.buckets().size(), 3u);
  std::vector<TrainSpan> spans;
  const std::vector<std::string> want = {"F0", "F1", "F2", "F3", "B3", "B2",
                                         "b0", "B1", "b1", "B0", "b2"};
  EXPECT_EQ(stepEvents(r, &spans), want);
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_LE(spans[i].startNs, spans[i].endNs);
    if (i > 0) {
      EXPECT_GE(spans[i].startNs, spans[i - 1].endNs) << "spans overlap";
    }
  }
  // The same order on the next step, and with one bucket for the whole model.
  EXPECT_EQ(stepEvents(r, nullptr), want);
  cfg.bucketBytes = uint64_t{25} << 20;
  Replica one(cfg, 0, 2);
  EXPECT_EQ(stepEvents(one, nullptr),
            (std::vector<std::string>{"F0", "F1", "F2", "F3", "B3", "B2", "B1", "B0", "b0"}));
}

int64_t computeNs(Replica& r, uint32_t step) {
  int64_t total = 0;
  const SpanFn add = [&](TrainSpan::Kind, uint32_t, int64_t s, int64_t e) { total += e - s; };
  r.computeGradients(step, {}, add);
  r.applyUpdate(r.grads(), add);
  return total;
}

// A slow rank sleeps twice its work after each span at factor 3, so each of its steps takes at
// least three times its own work. A busy machine stretches a step of either rank at random
// (a preempted span, a sleep that overshoots), so the ranks are compared by their quickest
// step of six, interleaved, against a loose bound: at least twice the other rank's.
TEST(SlowCompute, FactorThreeStretchesTheSpans) {
  TrainConfig cfg;
  cfg.layers = {256, 256, 256, 10};
  cfg.batch = 128;
  cfg.slowComputeRank = 1;
  cfg.slowComputeFactor = 3.0;
  Replica fast(cfg, 0, 2);
  Replica slow(cfg, 1, 2);
  // The first steps touch fresh memory and take longer, whichever rank runs them.
  for (uint32_t step = 0; step < 2; ++step) {
    computeNs(fast, step);
    computeNs(slow, step);
  }
  int64_t fastNs = std::numeric_limits<int64_t>::max();
  int64_t slowNs = std::numeric_limits<int64_t>::max();
  for (uint32_t step = 2; step < 8; ++step) {
    fastNs = std::min(fastNs, computeNs(fast, step));
    slowNs = std::min(slowNs, computeNs(slow, step));
  }
  ASSERT_GT(fastNs, 0);
  EXPECT_GE(slowNs, 2 * fastNs) << "quickest steps: fast " << fastNs << " ns, slow " << slowNs
                                << " ns";
}

}  // namespace
}  // namespace arl
