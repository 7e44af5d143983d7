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

TEST(Metrics, TimeColumnPrecisionFollowsNcclTests) {
  EXPECT_EQ(formatTimeUs(12345.6), "  12346");
  EXPECT_EQ(formatTimeUs(123.46), "  123.5");
  EXPECT_EQ(formatTimeUs(1.234), "   1.23");
  EXPECT_EQ(formatTimeUs(0), "   0.00");
}

TEST(Metrics, RowHasNcclTestsColumns) {
  const Metrics m = metricsFromTime(Collective::AllReduce, 8, 1 << 20, DataType::Float, 2000, 0);
  const std::string row =
      ncclTestsRow(Collective::AllReduce, 1 << 20, DataType::Float, RedOp::Sum, 3, m);
  EXPECT_EQ(row,
            "     4194304       1048576     float     sum      -1   2000.0    2.10    3.67      0");
  const std::string header = ncclTestsHeader();
  EXPECT_NE(header.find("size         count      type   redop    root     time   algbw   busbw "
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
