#include "train/train_types.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

namespace arl {

std::string_view toString(SyncMode m) {
  switch (m) {
    case SyncMode::AllReduce: return "allreduce";
    case SyncMode::Ps: return "ps";
    case SyncMode::PsAsync: return "ps-async";
  }
  return "?";
}

std::string_view toString(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::Sgd: return "sgd";
    case OptimizerKind::Adam: return "adam";
  }
  return "?";
}

std::optional<SyncMode> parseSyncMode(std::string_view s) {
  for (SyncMode m : {SyncMode::AllReduce, SyncMode::Ps, SyncMode::PsAsync})
    if (s == toString(m)) return m;
  return std::nullopt;
}

std::optional<OptimizerKind> parseOptimizerKind(std::string_view s) {
  for (OptimizerKind k : {OptimizerKind::Sgd, OptimizerKind::Adam})
    if (s == toString(k)) return k;
  return std::nullopt;
}

std::optional<std::vector<uint32_t>> parseLayers(std::string_view s) {
  std::vector<uint32_t> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t x = s.find('x', pos);
    std::string_view part = s.substr(pos, x == std::string_view::npos ? s.size() - pos : x - pos);
    uint32_t v = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || v < 1 || v > 65536)
      return std::nullopt;
    out.push_back(v);
    if (x == std::string_view::npos) break;
    pos = x + 1;
  }
  if (out.size() < 2 || out.size() > 16) return std::nullopt;
  return out;
}

std::string formatLayers(const std::vector<uint32_t>& layers) {
  std::string s;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(layers[i]);
  }
  return s;
}

uint64_t parameterCount(const std::vector<uint32_t>& layers) {
  uint64_t n = 0;
  for (size_t i = 0; i + 1 < layers.size(); ++i)
    n += uint64_t{layers[i]} * layers[i + 1] + layers[i + 1];
  return n;
}

namespace {

[[noreturn]] void refuse(const std::string& flag, const std::string& value,
                         const std::string& rule) {
  throw TrainConfigError(flag + " " + value + ": " + rule);
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

void checkTrainConfig(const TrainConfig& c, int nranks) {
  if (c.layers.size() < 2 || c.layers.size() > 16 ||
      std::any_of(c.layers.begin(), c.layers.end(), [](uint32_t w) { return w < 1 || w > 65536; }))
    refuse("--model", formatLayers(c.layers), "2 to 16 layer widths, each 1..65536");
  if (c.layers.back() < 2)
    refuse("--model", formatLayers(c.layers),
           "the last width is the number of classes, at least 2");
  // The flat weight vector is indexed with 32-bit bucket sizes in telemetry and records.
  if (parameterCount(c.layers) > (uint64_t{1} << 28))
    refuse("--model", formatLayers(c.layers), "more than 268435456 parameters");
  if (c.steps < 1 || c.steps > 100000)
    refuse("--steps", std::to_string(c.steps), "must be 1..100000");
  if (nranks < 1) refuse("--workers", std::to_string(nranks), "at least 1");
  if (c.batch < static_cast<uint32_t>(nranks) || c.batch % static_cast<uint32_t>(nranks) != 0 ||
      c.batch > 65536)
    refuse("--batch", std::to_string(c.batch),
           "must be a multiple of the " + std::to_string(nranks) + " ranks, at most 65536");
  if (c.bucketBytes < 4)
    refuse("--bucket", std::to_string(c.bucketBytes), "must be at least 4 bytes");
  if (!(c.lr > 0) || !std::isfinite(c.lr) || c.lr > 10)
    refuse("--lr", num(c.lr), "must be above 0 and at most 10");
  if (!(c.momentum >= 0) || c.momentum >= 1)
    refuse("--momentum", num(c.momentum), "must be in [0, 1)");
  if (c.slowComputeRank >= nranks)
    refuse("--slow-compute", std::to_string(c.slowComputeRank),
           "rank out of range for " + std::to_string(nranks) + " ranks");
  if (c.slowComputeRank >= 0 && (!(c.slowComputeFactor >= 1) ||
                                 !std::isfinite(c.slowComputeFactor) || c.slowComputeFactor > 100))
    refuse("--slow-compute", num(c.slowComputeFactor), "the factor must be 1..100");
  if (c.sync != SyncMode::AllReduce && nranks < 2)
    refuse("--sync", std::string(toString(c.sync)), "a parameter server needs at least 2 ranks");
}

std::string_view toString(TrainSpan::Kind k) {
  switch (k) {
    case TrainSpan::Kind::Forward: return "forward";
    case TrainSpan::Kind::Backward: return "backward";
    case TrainSpan::Kind::Optimizer: return "optimizer";
    case TrainSpan::Kind::Reduce: return "reduce";
    case TrainSpan::Kind::Push: return "push";
    case TrainSpan::Kind::Pull: return "pull";
  }
  return "?";
}

bool isCompute(TrainSpan::Kind k) {
  return k == TrainSpan::Kind::Forward || k == TrainSpan::Kind::Backward ||
         k == TrainSpan::Kind::Optimizer;
}

std::optional<BucketSweepPoint> bestBucket(const std::vector<BucketSweepPoint>& sweep) {
  if (sweep.empty()) return std::nullopt;
  return *std::min_element(sweep.begin(), sweep.end(),
                           [](const auto& a, const auto& b) { return a.stepUs < b.stepUs; });
}

}  // namespace arl
