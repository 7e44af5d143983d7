#include "base/types.h"

#include <gtest/gtest.h>

#include "base/errors.h"
#include "schedule/schedule.h"

namespace arl {
namespace {

TEST(Types, ParseSizeAcceptsSuffixes) {
  EXPECT_EQ(parseSize("0"), 0u);
  EXPECT_EQ(parseSize("4096"), 4096u);
  EXPECT_EQ(parseSize("64K"), 65536u);
  EXPECT_EQ(parseSize("1M"), 1048576u);
  EXPECT_EQ(parseSize("2G"), 2147483648u);
  EXPECT_EQ(parseSize("18446744073709551615"), 18446744073709551615u);
}

TEST(Types, ParseSizeRejectsGarbageAndOverflow) {
  EXPECT_FALSE(parseSize(""));
  EXPECT_FALSE(parseSize("K"));
  EXPECT_FALSE(parseSize("12Q"));
  EXPECT_FALSE(parseSize("-4"));
  EXPECT_FALSE(parseSize("1.5M"));
  EXPECT_FALSE(parseSize("18446744073709551616"));
  EXPECT_FALSE(parseSize("17179869184G"));
}

TEST(Types, NamesRoundTrip) {
  for (Collective c : kAllCollectives) EXPECT_EQ(parseCollective(toString(c)), c);
  for (DataType t : kAllDataTypes) EXPECT_EQ(parseDataType(toString(t)), t);
  for (RedOp op : kAllRedOps) EXPECT_EQ(parseRedOp(toString(op)), op);
  EXPECT_FALSE(parseDataType("complex"));
  EXPECT_FALSE(parseRedOp("xor"));
  EXPECT_FALSE(parseCollective("alltoall"));
}

TEST(Types, SizesFollowNccl) {
  EXPECT_EQ(dtypeSize(DataType::Half), 2u);
  EXPECT_EQ(dtypeSize(DataType::BFloat16), 2u);
  EXPECT_EQ(dtypeSize(DataType::Int64), 8u);
  EXPECT_EQ(dtypeSize(DataType::Uint8), 1u);
  EXPECT_EQ(inputElemsFor(Collective::ReduceScatter, 4, 10), 40u);
  EXPECT_EQ(outputElemsFor(Collective::AllGather, 4, 10), 40u);
  EXPECT_EQ(outputElemsFor(Collective::AllReduce, 4, 10), 10u);
}

TEST(Errors, EnforceNamesFileConditionAndValues) {
  try {
    int a = 3;
    ARL_ENFORCE(a == 4, "a=" << a);
    FAIL() << "no throw";
  } catch (const EnforceError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("types_test.cpp"), std::string::npos) << m;
    EXPECT_NE(m.find("a == 4"), std::string::npos) << m;
    EXPECT_NE(m.find("a=3"), std::string::npos) << m;
  }
}

TEST(Errors, PeerErrorNamesRankPeerAndStep) {
  PeerError e(2, 1, 5, "no data from rank 1 for step 5 within 3 s");
  EXPECT_STREQ(e.what(), "rank 2: no data from rank 1 for step 5 within 3 s");
  PeerError f(0, 3, 7, "header mismatch");
  EXPECT_STREQ(f.what(), "rank 0: header mismatch (peer rank 3) at step 7");
}

}  // namespace
}  // namespace arl
