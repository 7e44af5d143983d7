#include "model/metrics.h"

#include <gtest/gtest.h>

#include <string>

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
  EXPECT_EQ(row,
            "     4194304       1048576     float     sum      -1  2000.00    2.10    3.67       0");
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
