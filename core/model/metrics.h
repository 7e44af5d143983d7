// Metrics with nccl-tests' names, factors and table (nccl-tests doc/PERFORMANCE.md,
// src/common.cu, src/util.cu):
//   algbw = S / time, with S the collective's size in bytes and GB = 1e9 bytes
//   busbw = algbw * factor: 2(n-1)/n all-reduce, (n-1)/n reduce-scatter and all-gather,
//           1 reduce and broadcast
//   #wrong = number of elements that differ from the expected result
// The time is where the lab differs, and it reports both:
//   the lab's time    = mean over timed iterations of the slowest rank's time in that
//                       iteration (every rank times each iteration on its own clock); a rank
//                       that waits for a slow peer is charged to the iteration it waits in
//   nccl-tests' time  = each rank's time per iteration, averaged over ranks (nccl-tests times
//                       `iters` launches back to back per rank, divides by iters, then averages
//                       over ranks with its default `-a 1`); here each rank's mean over its
//                       timed iterations, averaged over ranks (`time_nccl_us`)
// The lab's time is never below nccl-tests' and is the one that algbw and busbw use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/types.h"

namespace arl {

// nccl-tests' bus-bandwidth correction factor for collective `c` over `nranks` ranks.
double busBwFactor(Collective c, int nranks);

// The size S nccl-tests reports (its "size" column) for a collective whose API count is
// `count` (NCCL's meaning: recvcount for ReduceScatter, sendcount for AllGather). For
// ReduceScatter and AllGather S is the whole array, nranks * count elements; otherwise count
// elements. Saturates at UINT64_MAX instead of overflowing.
uint64_t collectiveBytes(Collective c, int nranks, uint64_t count, DataType t);

// The NCCL API count nccl-tests runs for a size of `sizeBytes` (its setupArgs and
// getCollByteCount): size / type size; for reduce-scatter and all-gather that count is split
// over the ranks and rounded down to a multiple of 16 bytes per rank.
uint64_t apiCountForSize(Collective c, int nranks, uint64_t sizeBytes, DataType t);

// The spread of a run's iteration times (each the slowest rank's time in one timed
// iteration), beside their mean: one slow iteration in twenty moves the mean by 5 % of its
// excess, and the median not at all. Percentiles are nearest-rank (percentileNearestRank).
// All 0 when nothing was timed or the times are unknown.
struct IterationSpread {
  double p50Us = 0;
  double p90Us = 0;
  double p99Us = 0;
  double maxUs = 0;
};

// One row of nccl-tests output, with the spread of the iteration times beside it.
struct Metrics {
  uint64_t bytes = 0;     // S
  double timeUs = 0;      // the lab's time: mean of the slowest rank's time over timed iterations
  double ncclTimeUs = 0;  // nccl-tests' time: mean over ranks of each rank's mean; 0 = unknown
  double algbwGBps = 0;
  double busbwGBps = 0;
  uint64_t wrong = 0;
  IterationSpread spread;  // of the iteration times timeUs is the mean of; 0s = unknown
};

// The p-th percentile of `values` (p in 1..100) by the nearest-rank method: the smallest
// value with at least p % of the values at or below it, the ceil(p * n / 100)-th smallest
// (Hyndman and Fan, "Sample quantiles in statistical packages", 1996, definition 1, the
// inverse of the empirical distribution function; numpy's method "inverted_cdf"). It is always
// one of the measured values, never an interpolation between two: with 20 iterations p99 is
// the largest and p90 the 18th. Returns 0 for no values. p outside 1..100 is a bug
// (ARL_ENFORCE).
double percentileNearestRank(std::vector<double> values, int p);

// The median of `values` for a figure of its own (a rate, a ratio, a step's length): the
// middle value, or the mean of the middle two for an even count. Unlike p50 above it may be no
// measured value; to pick a measurement, take percentileNearestRank(values, 50), the lower
// middle. Returns 0 for no values.
double median(std::vector<double> values);

// p50, p90, p99 and the largest of per-iteration times (0s for none).
IterationSpread iterationSpread(std::vector<double> iterationUs);

// nccl-tests' time: each rank's mean over the timed iterations, averaged over the ranks
// (perIterationPerRankUs[i][r] as below; ranks missing from an iteration are skipped). Never
// above slowestRankMeanUs. Returns 0 for no iterations.
double meanOfRankMeansUs(const std::vector<std::vector<double>>& perIterationPerRankUs);

// The lab's time, mean over iterations of the slowest rank: perIterationPerRankUs[i][r] is rank r's
// time in timed iteration i. Returns 0 for no iterations.
double slowestRankMeanUs(const std::vector<std::vector<double>>& perIterationPerRankUs);

// The slowest rank's mean: each rank's mean over the timed iterations, then the largest of
// those (0 for no iterations). This is how MPI benchmarks that time a loop of calls on every
// rank report; it is never above slowestRankMeanUs, and falls below it when the ranks take
// turns being slowest (as they do with more ranks than cores).
double slowestOfRankMeansUs(const std::vector<std::vector<double>>& perIterationPerRankUs);

// Metrics from every rank's time in every timed iteration: the lab's time and nccl-tests',
// and the spread of the slowest rank's times. Bandwidths are 0 when the time is not positive
// (nothing was timed).
Metrics metricsFromRankTimes(Collective c, int nranks, uint64_t count, DataType t,
                             const std::vector<std::vector<double>>& perIterationPerRankUs,
                             uint64_t wrong);

// Metrics from the per-iteration slowest-rank times alone (as LocalRunResult::iterationUs
// holds), their spread included; nccl-tests' time is left 0 (unknown).
Metrics computeMetrics(Collective c, int nranks, uint64_t count, DataType t,
                       const std::vector<double>& iterationUs, uint64_t wrong);

// Metrics from an already averaged time (the spread is left unknown, 0).
Metrics metricsFromTime(Collective c, int nranks, uint64_t count, DataType t, double timeUs,
                        uint64_t wrong);

// A number in a column `width` characters wide as nccl-tests prints its time and bandwidths:
// two decimals if they fit, else one, else none, else an exponent.
std::string formatColumn(double value, int width);

// nccl-tests' time column (7 wide).
std::string formatTimeUs(double us);

// The two header lines nccl-tests prints above its table (one time/algbw/busbw/#wrong group).
std::string ncclTestsHeader();

// One table row in nccl-tests' column widths:
// "%12lu  %12lu  %8s  %6s  %6i  %7s  %6s  %6s  %6lu", time 7 wide and bandwidths 6 wide as
// formatColumn prints them. For collectives that do not reduce
// the redop column reads "none"; for collectives without a root the root column reads -1.
std::string ncclTestsRow(Collective c, uint64_t count, DataType t, RedOp op, int root,
                         const Metrics& m);

}  // namespace arl
