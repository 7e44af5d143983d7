#include "model/metrics.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>

#include "base/errors.h"

namespace arl {

namespace {

uint64_t saturatingMul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) {
    return std::numeric_limits<uint64_t>::max();
  }
  return a * b;
}

// Each rank's mean over the iterations it reported (negative entries: not reported).
std::vector<double> rankMeansUs(const std::vector<std::vector<double>>& perIterationPerRankUs) {
  std::vector<double> sums;
  std::vector<uint64_t> counts;
  for (const auto& ranks : perIterationPerRankUs) {
    if (sums.size() < ranks.size()) {
      sums.resize(ranks.size(), 0.0);
      counts.resize(ranks.size(), 0);
    }
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (ranks[r] < 0) continue;
      sums[r] += ranks[r];
      ++counts[r];
    }
  }
  std::vector<double> means;
  for (size_t r = 0; r < sums.size(); ++r) {
    if (counts[r] > 0) means.push_back(sums[r] / static_cast<double>(counts[r]));
  }
  return means;
}

// The slowest rank's time in each iteration.
std::vector<double> slowestPerIterationUs(
    const std::vector<std::vector<double>>& perIterationPerRankUs) {
  std::vector<double> out;
  out.reserve(perIterationPerRankUs.size());
  for (const auto& ranks : perIterationPerRankUs) {
    double slowest = 0;
    for (double us : ranks) slowest = std::max(slowest, us);
    out.push_back(slowest);
  }
  return out;
}

// Index in the sorted values of the nearest-rank p-th percentile of n > 0 values:
// ceil(p * n / 100) - 1, in integers so that no rounding of p / 100 can move it.
size_t nearestRankIndex(int p, size_t n) { return (static_cast<size_t>(p) * n + 99) / 100 - 1; }

}  // namespace

double percentileNearestRank(std::vector<double> values, int p) {
  ARL_ENFORCE(p >= 1 && p <= 100, "percentile " << p << " is outside 1..100");
  if (values.empty()) return 0;
  const auto nth = values.begin() + static_cast<std::ptrdiff_t>(nearestRankIndex(p, values.size()));
  std::nth_element(values.begin(), nth, values.end());
  return *nth;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t n = values.size();
  const auto upper = values.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(values.begin(), upper, values.end());
  if (n % 2 == 1) return *upper;
  // The lower middle is the largest of what nth_element left before the upper one.
  return 0.5 * (*std::max_element(values.begin(), upper) + *upper);
}

IterationSpread iterationSpread(std::vector<double> iterationUs) {
  IterationSpread s;
  if (iterationUs.empty()) return s;
  std::sort(iterationUs.begin(), iterationUs.end());
  const auto at = [&](int p) { return iterationUs[nearestRankIndex(p, iterationUs.size())]; };
  s.p50Us = at(50);
  s.p90Us = at(90);
  s.p99Us = at(99);
  s.maxUs = iterationUs.back();
  return s;
}

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

uint64_t apiCountForSize(Collective c, int nranks, uint64_t sizeBytes, DataType t) {
  const uint64_t es = dtypeSize(t);
  const uint64_t count = sizeBytes / es;
  if ((c != Collective::ReduceScatter && c != Collective::AllGather) || nranks <= 0) return count;
  // Every element size divides 16, so this keeps per-rank pieces 16-byte aligned.
  const uint64_t align = 16 / es;
  return count / static_cast<uint64_t>(nranks) / align * align;
}

double meanOfRankMeansUs(const std::vector<std::vector<double>>& perIterationPerRankUs) {
  const std::vector<double> means = rankMeansUs(perIterationPerRankUs);
  double total = 0;
  for (double m : means) total += m;
  return means.empty() ? 0 : total / static_cast<double>(means.size());
}

double slowestRankMeanUs(const std::vector<std::vector<double>>& perIterationPerRankUs) {
  if (perIterationPerRankUs.empty()) return 0;
  double sum = 0;
  for (double us : slowestPerIterationUs(perIterationPerRankUs)) sum += us;
  return sum / static_cast<double>(perIterationPerRankUs.size());
}

double slowestOfRankMeansUs(const std::vector<std::vector<double>>& perIterationPerRankUs) {
  const std::vector<double> means = rankMeansUs(perIterationPerRankUs);
  return means.empty() ? 0 : *std::max_element(means.begin(), means.end());
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
  Metrics m = metricsFromTime(c, nranks, count, t, mean, wrong);
  m.spread = iterationSpread(iterationUs);
  return m;
}

Metrics metricsFromRankTimes(Collective c, int nranks, uint64_t count, DataType t,
                             const std::vector<std::vector<double>>& perIterationPerRankUs,
                             uint64_t wrong) {
  Metrics m = metricsFromTime(c, nranks, count, t, slowestRankMeanUs(perIterationPerRankUs), wrong);
  m.ncclTimeUs = meanOfRankMeansUs(perIterationPerRankUs);
  m.spread = iterationSpread(slowestPerIterationUs(perIterationPerRankUs));
  return m;
}

std::string formatColumn(double value, int width) {
  char buf[64];
  for (int decimals = 2; decimals >= 0; --decimals) {
    const int len = std::snprintf(buf, sizeof buf, "%*.*f", width, decimals, value);
    if (len <= width) return buf;
  }
  std::snprintf(buf, sizeof buf, "%*.*e", width, width >= 7 ? 1 : 0, value);
  return buf;
}

std::string formatTimeUs(double us) { return formatColumn(us, 7); }

std::string ncclTestsHeader() {
  char buf[256];
  std::string out;
  std::snprintf(buf, sizeof buf, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong");
  out += buf;
  std::snprintf(buf, sizeof buf, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "");
  out += buf;
  return out;
}

std::string ncclTestsRow(Collective c, uint64_t count, DataType t, RedOp op, int root,
                         const Metrics& m) {
  const bool rooted = c == Collective::Reduce || c == Collective::Broadcast;
  const std::string opName = collectiveReduces(c) ? std::string(toString(op)) : "none";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%12" PRIu64 "  %12" PRIu64 "  %8s  %6s  %6i  %7s  %6s  %6s  %6" PRIu64, m.bytes,
                count, std::string(toString(t)).c_str(), opName.c_str(), rooted ? root : -1,
                formatTimeUs(m.timeUs).c_str(), formatColumn(m.algbwGBps, 6).c_str(),
                formatColumn(m.busbwGBps, 6).c_str(), m.wrong);
  return buf;
}

}  // namespace arl
