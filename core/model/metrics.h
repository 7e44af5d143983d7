// Metrics exactly as nccl-tests defines them (nccl-tests doc/PERFORMANCE.md and src/common.cu):
//   time  = mean over timed iterations of the slowest rank's time
//   algbw = S / time, with S the collective's size in bytes and GB = 1e9 bytes
//   busbw = algbw * factor: 2(n-1)/n all-reduce, (n-1)/n reduce-scatter and all-gather,
//           1 reduce and broadcast
//   #wrong = number of elements that differ from the expected result
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

// One row of nccl-tests output.
struct Metrics {
  uint64_t bytes = 0;  // S
  double timeUs = 0;   // mean of the slowest rank's time over timed iterations
  double algbwGBps = 0;
  double busbwGBps = 0;
  uint64_t wrong = 0;
};

// Mean over iterations of the slowest rank: perIterationPerRankUs[i][r] is rank r's time in
// timed iteration i. Returns 0 for no iterations.
double slowestRankMeanUs(const std::vector<std::vector<double>>& perIterationPerRankUs);

// The slowest rank's mean: each rank's mean over the timed iterations, then the largest of
// those (0 for no iterations). This is how MPI benchmarks that time a loop of calls on every
// rank report; it is never above slowestRankMeanUs, and falls below it when the ranks take
// turns being slowest (as they do with more ranks than cores).
double slowestOfRankMeansUs(const std::vector<std::vector<double>>& perIterationPerRankUs);

// Metrics from the per-iteration slowest-rank times (as LocalRunResult::iterationUs holds).
// Bandwidths are 0 when the time is not positive (nothing was timed).
Metrics computeMetrics(Collective c, int nranks, uint64_t count, DataType t,
                       const std::vector<double>& iterationUs, uint64_t wrong);

// Metrics from an already averaged time.
Metrics metricsFromTime(Collective c, int nranks, uint64_t count, DataType t, double timeUs,
                        uint64_t wrong);

// nccl-tests' time column: "%7.0f" from 10000 us, "%7.1f" from 100 us, else "%7.2f".
std::string formatTimeUs(double us);

// The two header lines nccl-tests prints above its table (one time/algbw/busbw/#wrong group).
std::string ncclTestsHeader();

// One table row in nccl-tests' column widths:
// "%12lu  %12lu  %8s  %6s  %6i  %7s  %6.2f  %6.2f  %5lu". For collectives that do not reduce
// the redop column reads "none"; for collectives without a root the root column reads -1.
std::string ncclTestsRow(Collective c, uint64_t count, DataType t, RedOp op, int root,
                         const Metrics& m);

}  // namespace arl
