#include "model/metrics.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/errors.h"

namespace arl {
namespace {

TEST(Metrics, BusBandwidthFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(busBwFactor(Collective::AllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(busBwFactor(Collective::ReduceScatter, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busBwFactor(Collective::AllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busBwFactor(Collective::Reduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(Collective::Broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(Collective::AllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(Collective::AllReduce, 1), 0.0);  // nothing crosses a link
  EXPECT_DOUBLE_EQ(busBwFactor(Collective::AllGather, 3), 2.0 / 3);
}

TEST(Metrics, SizeIsTheWholeArrayForReduceScatterAndAllGather) {
  EXPECT_EQ(collectiveBytes(Collective::AllReduce, 8, 1 << 20, DataType::Float), 4u << 20);
  EXPECT_EQ(collectiveBytes(Collective::Reduce, 8, 1000, DataType::Double), 8000u);
  EXPECT_EQ(collectiveBytes(Collective::Broadcast, 8, 1000, DataType::Half), 2000u);
  // recvcount / sendcount per rank, times nranks (nccl-tests' PERFORMANCE.md).
  EXPECT_EQ(collectiveBytes(Collective::ReduceScatter, 8, 1000, DataType::Float), 32000u);
  EXPECT_EQ(collectiveBytes(Collective::AllGather, 3, 5, DataType::Int64), 120u);
  EXPECT_EQ(collectiveBytes(Collective::AllGather, 64, ~uint64_t{0} / 2, DataType::Float),
            ~uint64_t{0});  // saturates
}

TEST(Metrics, BandwidthUsesDecimalGigabytes) {
  // 1,000,000 floats = 4e6 bytes; mean of the slowest-rank times is 2000 us.
  const Metrics m =
      computeMetrics(Collective::AllReduce, 4, 1000000, DataType::Float, {1000.0, 3000.0}, 0);
  EXPECT_EQ(m.bytes, 4000000u);
  EXPECT_DOUBLE_EQ(m.timeUs, 2000.0);
  EXPECT_DOUBLE_EQ(m.algbwGBps, 2.0);  // 4e6 B / 2e-3 s / 1e9
  EXPECT_DOUBLE_EQ(m.busbwGBps, 3.0);  // * 2 * 3 / 4
  EXPECT_EQ(m.wrong, 0u);

  const Metrics rs =
      computeMetrics(Collective::ReduceScatter, 4, 250000, DataType::Float, {2000.0}, 7);
  EXPECT_EQ(rs.bytes, 4000000u);
  EXPECT_DOUBLE_EQ(rs.algbwGBps, 2.0);
  EXPECT_DOUBLE_EQ(rs.busbwGBps, 1.5);
  EXPECT_EQ(rs.wrong, 7u);
}

TEST(Metrics, TimeIsTheMeanOfTheSlowestRank) {
  EXPECT_DOUBLE_EQ(slowestRankMeanUs({{1.0, 5.0, 2.0}, {3.0, 3.0, 4.0}}), 4.5);
  EXPECT_DOUBLE_EQ(slowestRankMeanUs({}), 0.0);
}

TEST(Metrics, NothingTimedGivesZeroBandwidth) {
  const Metrics m = computeMetrics(Collective::AllReduce, 4, 100, DataType::Float, {}, 0);
  EXPECT_EQ(m.timeUs, 0.0);
  EXPECT_EQ(m.algbwGBps, 0.0);
  EXPECT_EQ(m.busbwGBps, 0.0);
}

TEST(Metrics, ColumnsKeepTheMostDecimalsThatFitTheirWidth) {
  EXPECT_EQ(formatTimeUs(1.234), "   1.23");
  EXPECT_EQ(formatTimeUs(0), "   0.00");
  EXPECT_EQ(formatTimeUs(9999.994), "9999.99");
  EXPECT_EQ(formatTimeUs(12345.6), "12345.6");
  EXPECT_EQ(formatTimeUs(123456.7), " 123457");
  EXPECT_EQ(formatTimeUs(1234567.8), "1234568");
  EXPECT_EQ(formatTimeUs(12345678.9), "1.2e+07");
  EXPECT_EQ(formatColumn(3.14159, 6), "  3.14");
  EXPECT_EQ(formatColumn(1234.5, 6), "1234.5");
  EXPECT_EQ(formatColumn(123456.0, 6), "123456");
  EXPECT_EQ(formatColumn(1234567.0, 6), " 1e+06");
}

TEST(Metrics, NcclTestsTimeAveragesEachRanksMean) {
  // Rank 0: 1 and 5 (mean 3); rank 1: 3 and 3 (mean 3); rank 2: 2 and 4 (mean 3).
  const std::vector<std::vector<double>> t = {{1.0, 3.0, 2.0}, {5.0, 3.0, 4.0}};
  EXPECT_DOUBLE_EQ(meanOfRankMeansUs(t), 3.0);
  EXPECT_DOUBLE_EQ(slowestRankMeanUs(t), 4.0);  // the lab's: (3 + 5) / 2
  EXPECT_DOUBLE_EQ(meanOfRankMeansUs({}), 0.0);
  // A rank that did not report an iteration (-1) is averaged over what it reported.
  EXPECT_DOUBLE_EQ(meanOfRankMeansUs({{2.0, -1.0}, {4.0, 6.0}}), (3.0 + 6.0) / 2);
  const Metrics m = metricsFromRankTimes(Collective::AllReduce, 3, 1000, DataType::Float, t, 0);
  EXPECT_DOUBLE_EQ(m.timeUs, 4.0);
  EXPECT_DOUBLE_EQ(m.ncclTimeUs, 3.0);
  EXPECT_DOUBLE_EQ(m.algbwGBps, 4000.0 / 4.0 / 1e3);
}

TEST(Metrics, PercentilesAreNearestRank) {
  // 1..10 shuffled: the p-th percentile is the ceil(p * 10 / 100)-th smallest.
  const std::vector<double> ten = {7, 3, 10, 1, 5, 9, 2, 8, 4, 6};
  EXPECT_EQ(percentileNearestRank(ten, 1), 1.0);    // ceil(0.1) = 1st
  EXPECT_EQ(percentileNearestRank(ten, 10), 1.0);   // ceil(1.0) = 1st
  EXPECT_EQ(percentileNearestRank(ten, 11), 2.0);   // ceil(1.1) = 2nd
  EXPECT_EQ(percentileNearestRank(ten, 50), 5.0);   // 5th, not the midpoint 5.5
  EXPECT_EQ(percentileNearestRank(ten, 90), 9.0);   // exactly 9: 0.9 * 10 must not round up
  EXPECT_EQ(percentileNearestRank(ten, 99), 10.0);  // ceil(9.9) = 10th
  EXPECT_EQ(percentileNearestRank(ten, 100), 10.0);
  // 200 values 1..200: p99 is the 198th, p90 the 180th, p50 the 100th.
  std::vector<double> many;
  for (int i = 200; i >= 1; --i) many.push_back(i);
  EXPECT_EQ(percentileNearestRank(many, 50), 100.0);
  EXPECT_EQ(percentileNearestRank(many, 90), 180.0);
  EXPECT_EQ(percentileNearestRank(many, 99), 198.0);
  EXPECT_EQ(percentileNearestRank({}, 50), 0.0);
  EXPECT_EQ(percentileNearestRank({4.5}, 1), 4.5);
  EXPECT_THROW(percentileNearestRank(ten, 0), EnforceError);
  EXPECT_THROW(percentileNearestRank(ten, 101), EnforceError);
}

// The median of a figure: the middle value of an odd count, the mean of the middle two of an
// even one (where p50 takes the lower).
TEST(Metrics, TheMedianOfAnEvenCountIsTheMeanOfTheMiddleTwo) {
  EXPECT_EQ(median({7, 3, 10, 1, 5, 9, 2, 8, 4, 6}), 5.5);
  EXPECT_EQ(median({7, 3, 10, 1, 5, 9, 2, 8, 4}), 5.0);
  EXPECT_EQ(median({2.5, 0.5}), 1.5);
  EXPECT_EQ(median({1, 1000, 2, 3}), 2.5);  // one outlier moves it not at all
  EXPECT_EQ(median({4.5}), 4.5);
  EXPECT_EQ(median({}), 0.0);
}

TEST(Metrics, SpreadOfIterationTimes) {
  // Twenty iterations, nineteen of 7 us and the last of 500 us (a tail at the end of a run):
  // the mean moves, the median does not; p90 is the 18th (7), p99 the 20th, the largest.
  std::vector<double> it(19, 7.0);
  it.push_back(500.0);
  const IterationSpread s = iterationSpread(it);
  EXPECT_EQ(s.p50Us, 7.0);
  EXPECT_EQ(s.p90Us, 7.0);
  EXPECT_EQ(s.p99Us, 500.0);
  EXPECT_EQ(s.maxUs, 500.0);
  const Metrics m = computeMetrics(Collective::AllReduce, 2, 1, DataType::Float, it, 0);
  EXPECT_DOUBLE_EQ(m.timeUs, (19 * 7.0 + 500.0) / 20);
  EXPECT_EQ(m.spread.p50Us, 7.0);
  EXPECT_EQ(m.spread.maxUs, 500.0);

  // One iteration: every percentile is that iteration.
  const IterationSpread one = iterationSpread({42.0});
  EXPECT_EQ(one.p50Us, 42.0);
  EXPECT_EQ(one.p90Us, 42.0);
  EXPECT_EQ(one.p99Us, 42.0);
  EXPECT_EQ(one.maxUs, 42.0);

  // None: all 0, as the time is.
  const IterationSpread none = iterationSpread({});
  EXPECT_EQ(none.p50Us, 0.0);
  EXPECT_EQ(none.p99Us, 0.0);
  EXPECT_EQ(none.maxUs, 0.0);
  EXPECT_EQ(computeMetrics(Collective::AllReduce, 4, 100, DataType::Float, {}, 0).spread.maxUs,
            0.0);
  // From an averaged time alone the spread is unknown.
  EXPECT_EQ(metricsFromTime(Collective::AllReduce, 4, 100, DataType::Float, 10, 0).spread.p50Us,
            0.0);
}

TEST(Metrics, SpreadFromRankTimesIsOfTheSlowestRank) {
  // Slowest per iteration: 5, 4, 9, 3.
  const std::vector<std::vector<double>> t = {{1, 5}, {4, 2}, {9, 1}, {3, 3}};
  const Metrics m = metricsFromRankTimes(Collective::AllReduce, 2, 100, DataType::Float, t, 0);
  EXPECT_DOUBLE_EQ(m.timeUs, (5 + 4 + 9 + 3) / 4.0);
  EXPECT_EQ(m.spread.p50Us, 4.0);  // 2nd of 3, 4, 5, 9
  EXPECT_EQ(m.spread.p90Us, 9.0);  // ceil(3.6) = 4th
  EXPECT_EQ(m.spread.maxUs, 9.0);
}

TEST(Metrics, ApiCountRoundsLikeNcclTests) {
  // All-reduce, reduce and broadcast: size / type size, no rounding.
  EXPECT_EQ(apiCountForSize(Collective::AllReduce, 3, 1000, DataType::Float), 250u);
  EXPECT_EQ(apiCountForSize(Collective::Broadcast, 3, 1001, DataType::Uint8), 1001u);
  // Reduce-scatter and all-gather: per rank, down to a multiple of 16 bytes.
  EXPECT_EQ(apiCountForSize(Collective::ReduceScatter, 3, 1000, DataType::Float), 80u);  // 83 -> 80
  EXPECT_EQ(apiCountForSize(Collective::AllGather, 4, 4096, DataType::Float), 256u);
  EXPECT_EQ(apiCountForSize(Collective::AllGather, 3, 100, DataType::Uint8), 32u);     // 33 -> 32
  EXPECT_EQ(apiCountForSize(Collective::AllGather, 3, 100, DataType::Double), 4u);     // 4
  EXPECT_EQ(apiCountForSize(Collective::ReduceScatter, 3, 100, DataType::Half), 16u);  // 16
  EXPECT_EQ(apiCountForSize(Collective::ReduceScatter, 4, 32, DataType::Float), 0u);
}

TEST(Metrics, RowHasNcclTestsColumns) {
  const Metrics m = metricsFromTime(Collective::AllReduce, 8, 1 << 20, DataType::Float, 2000, 0);
  const std::string row =
      ncclTestsRow(Collective::AllReduce, 1 << 20, DataType::Float, RedOp::Sum, 3, m);
  EXPECT_EQ(
      row, "     4194304       1048576     float     sum      -1  2000.00    2.10    3.67       0");
  const std::string header = ncclTestsHeader();
  EXPECT_NE(header.find("size         count      type   redop    root     time   algbw   busbw  "
                        "#wrong"),
            std::string::npos);
  // Columns of the row line up with the header's.
  EXPECT_EQ(header.find("#wrong") + 6, header.find('\n'));
  EXPECT_EQ(row.size(), header.find('\n'));

  const Metrics ag = metricsFromTime(Collective::AllGather, 4, 10, DataType::Int32, 10, 2);
  const std::string agRow =
      ncclTestsRow(Collective::AllGather, 10, DataType::Int32, RedOp::Max, 0, ag);
  EXPECT_NE(agRow.find("   none      -1"), std::string::npos) << agRow;
  const Metrics b = metricsFromTime(Collective::Broadcast, 4, 10, DataType::Int32, 10, 0);
  EXPECT_NE(ncclTestsRow(Collective::Broadcast, 10, DataType::Int32, RedOp::Sum, 2, b)
                .find("   none       2"),
            std::string::npos);
}

}  // namespace
}  // namespace arl
