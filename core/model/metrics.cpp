#include "model/metrics.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>

namespace arl {

namespace {

uint64_t saturatingMul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) {
    return std::numeric_limits<uint64_t>::max();
  }
  return a * b;
}

}  // namespace

double busBwFactor(Collective c, int nranks) {
  if (nranks <= 0) return 0;
  const double n = nranks;
  switch (c) {
    case Collective::AllReduce: return 2.0 * (n - 1) / n;
    case Collective::ReduceScatter:
    case Collective::AllGather: return (n - 1) / n;
    case Collective::Reduce:
    case Collective::Broadcast: return 1.0;
  }
  return 1.0;
}

uint64_t collectiveBytes(Collective c, int nranks, uint64_t count, DataType t) {
  uint64_t elems = count;
  if (c == Collective::ReduceScatter || c == Collective::AllGather) {
    elems = saturatingMul(count, static_cast<uint64_t>(std::max(nranks, 0)));
  }
  return saturatingMul(elems, dtypeSize(t));
}

double slowestRankMeanUs(const std::vector<std::vector<double>>& perIterationPerRankUs) {
  if (perIterationPerRankUs.empty()) return 0;
  double sum = 0;
  for (const auto& ranks : perIterationPerRankUs) {
    double slowest = 0;
    for (double us : ranks) slowest = std::max(slowest, us);
    sum += slowest;
  }
  return sum / static_cast<double>(perIterationPerRankUs.size());
}

double slowestOfRankMeansUs(const std::vector<std::vector<double>>& perIterationPerRankUs) {
  std::vector<double> sums;
  for (const auto& ranks : perIterationPerRankUs) {
    if (sums.size() < ranks.size()) sums.resize(ranks.size(), 0.0);
    for (size_t r = 0; r < ranks.size(); ++r) sums[r] += ranks[r];
  }
  if (sums.empty()) return 0;
  return *std::max_element(sums.begin(), sums.end()) /
         static_cast<double>(perIterationPerRankUs.size());
}

Metrics metricsFromTime(Collective c, int nranks, uint64_t count, DataType t, double timeUs,
                        uint64_t wrong) {
  Metrics m;
  m.bytes = collectiveBytes(c, nranks, count, t);
  m.timeUs = timeUs;
  m.wrong = wrong;
  if (timeUs > 0) {
    // bytes / (us * 1e-6) / 1e9 = bytes / us / 1e3
    m.algbwGBps = static_cast<double>(m.bytes) / timeUs / 1e3;
    m.busbwGBps = m.algbwGBps * busBwFactor(c, nranks);
  }
  return m;
}

Metrics computeMetrics(Collective c, int nranks, uint64_t count, DataType t,
                       const std::vector<double>& iterationUs, uint64_t wrong) {
  double sum = 0;
  for (double us : iterationUs) sum += us;
  const double mean = iterationUs.empty() ? 0 : sum / static_cast<double>(iterationUs.size());
  return metricsFromTime(c, nranks, count, t, mean, wrong);
}

std::string formatTimeUs(double us) {
  char buf[64];
  if (us >= 10000.0) {
    std::snprintf(buf, sizeof buf, "%7.0f", us);
  } else if (us >= 100.0) {
    std::snprintf(buf, sizeof buf, "%7.1f", us);
  } else {
    std::snprintf(buf, sizeof buf, "%7.2f", us);
  }
  return buf;
}

std::string ncclTestsHeader() {
  return "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
         "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       \n";
}

std::string ncclTestsRow(Collective c, uint64_t count, DataType t, RedOp op, int root,
                         const Metrics& m) {
  const bool rooted = c == Collective::Reduce || c == Collective::Broadcast;
  const std::string opName = collectiveReduces(c) ? std::string(toString(op)) : "none";
  char buf[256];
  std::snprintf(
      buf, sizeof buf, "%12" PRIu64 "  %12" PRIu64 "  %8s  %6s  %6i  %7s  %6.2f  %6.2f  %5" PRIu64,
      m.bytes, count, std::string(toString(t)).c_str(), opName.c_str(), rooted ? root : -1,
      formatTimeUs(m.timeUs).c_str(), m.algbwGBps, m.busbwGBps, m.wrong);
  return buf;
}

}  // namespace arl
