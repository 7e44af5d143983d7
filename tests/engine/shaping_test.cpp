#include "base/shaping.h"

#include <gtest/gtest.h>

#include <string>

#include "base/errors.h"

namespace arl {
namespace {

// The message of the ConfigError checkShaping throws, or "" when it accepts.
std::string refusal(const LinkShaping& s, int nranks) {
  try {
    checkShaping(s, nranks);
    return "";
  } catch (const ConfigError& e) {
    return e.what();
  }
}

// The rate a link is held to: its own when it is lower than its ports', else the lower port.
TEST(Shaping, PathRateIsTheLowestOfTheLinkAndItsPorts) {
  LinkShaping s;
  EXPECT_EQ(s.pathRate(0, 1), 0) << "unshaped";
  s.portBytesPerSecond = 500e6;
  s.rankPortBytesPerSecond[2] = 200e6;
  s.linkBytesPerSecond[{1, 2}] = 100e6;
  s.linkBytesPerSecond[{0, 1}] = 900e6;
  EXPECT_DOUBLE_EQ(s.pathRate(0, 1), 500e6);
  EXPECT_DOUBLE_EQ(s.pathRate(1, 2), 100e6);
  EXPECT_DOUBLE_EQ(s.pathRate(2, 3), 200e6);
  EXPECT_DOUBLE_EQ(s.pathRate(3, 2), 200e6);
  LinkShaping onlyLink;
  onlyLink.linkBytesPerSecond[{1, 0}] = 50e6;
  EXPECT_DOUBLE_EQ(onlyLink.pathRate(1, 0), 50e6);
  EXPECT_EQ(onlyLink.pathRate(0, 1), 0);
}

TEST(Shaping, AcceptsWhatTheFlagsCanSay) {
  LinkShaping s;
  EXPECT_TRUE(s.empty());
  EXPECT_TRUE(s.uniform());
  EXPECT_EQ(refusal(s, 4), "");
  EXPECT_EQ(describeShaping(s), "unshaped");
  s.portBytesPerSecond = 200e6;
  s.addedLatencySeconds = 50e-6;
  EXPECT_FALSE(s.empty());
  EXPECT_TRUE(s.uniform());
  s.rankPortBytesPerSecond[3] = 50e6;
  s.linkBytesPerSecond[{1, 2}] = 50e6;
  EXPECT_FALSE(s.uniform());
  EXPECT_EQ(refusal(s, 4), "");
  EXPECT_DOUBLE_EQ(s.portRate(0), 200e6);
  EXPECT_DOUBLE_EQ(s.portRate(3), 50e6);
  EXPECT_DOUBLE_EQ(s.linkRate(1, 2), 50e6);
  EXPECT_DOUBLE_EQ(s.linkRate(2, 1), 0);
  EXPECT_EQ(describeShaping(s),
            "ports 200 MB/s, +50 us per message, rank 3 at 50 MB/s, link 1->2 at 50 MB/s");
}

TEST(Shaping, RefusesBadInputNamingIt) {
  LinkShaping rate0;
  rate0.rankPortBytesPerSecond[1] = 0;
  EXPECT_NE(refusal(rate0, 4).find("slow rank 1"), std::string::npos) << refusal(rate0, 4);

  LinkShaping negativePort;
  negativePort.portBytesPerSecond = -5;
  EXPECT_NE(refusal(negativePort, 4).find("port rate"), std::string::npos);

  LinkShaping outOfRange;
  outOfRange.rankPortBytesPerSecond[4] = 1e6;
  const std::string m = refusal(outOfRange, 4);
  EXPECT_NE(m.find("rank 4 is out of range for 4 ranks"), std::string::npos) << m;

  LinkShaping self;
  self.linkBytesPerSecond[{2, 2}] = 1e6;
  EXPECT_NE(refusal(self, 4).find("slow link 2-2"), std::string::npos) << refusal(self, 4);

  LinkShaping farLink;
  farLink.linkBytesPerSecond[{0, 9}] = 1e6;
  EXPECT_NE(refusal(farLink, 4).find("rank 9"), std::string::npos) << refusal(farLink, 4);

  LinkShaping zeroLink;
  zeroLink.linkBytesPerSecond[{0, 1}] = 0;
  EXPECT_NE(refusal(zeroLink, 4).find("slow link 0-1"), std::string::npos);

  LinkShaping latency;
  latency.addedLatencySeconds = -1e-6;
  EXPECT_NE(refusal(latency, 4).find("latency"), std::string::npos);
}

}  // namespace
}  // namespace arl
