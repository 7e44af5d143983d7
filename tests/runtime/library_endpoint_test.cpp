// Protocol 6: a library run's bootstrap travels as rank 0's Ready endpoint and in Start.
#include <gtest/gtest.h>

#include <string>

#include "exec/collective_library.h"
#include "runtime/protocol.h"

namespace arl {
namespace {

TEST(LibraryEndpoint, NcclTokensAndMembersAreEndpoints) {
  EXPECT_EQ(kProtocolVersion, 15);
  EXPECT_TRUE(validEndpoint("nccl://id/AAECAwQF-_z9"));
  EXPECT_TRUE(validEndpoint(kLibraryMemberEndpoint));
  EXPECT_TRUE(validEndpoint("nccl://id/" + std::string(171, 'A')));  // a 128-byte id
  EXPECT_FALSE(validEndpoint("nccl://id/"));
  EXPECT_FALSE(validEndpoint("nccl://id/abc/def"));
  EXPECT_FALSE(validEndpoint("nccl://id/abc+def"));  // base64, not base64url
  EXPECT_FALSE(validEndpoint("nccl://"));
  EXPECT_FALSE(validEndpoint("nccl://someone"));
  EXPECT_FALSE(validEndpoint("nccl://id/" + std::string(250, 'A')));  // beyond 255 bytes
}

TEST(LibraryEndpoint, ReadyAndStartCarryThemThroughTheCodec) {
  Ready r;
  r.epoch = 3;
  r.rank = 0;
  r.runId = 9;
  r.dataEndpoint = "nccl://id/" + std::string(171, 'x');
  const Frames f = r.encode();
  auto back = Ready::decode(f[0], f[1]);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(*back, r);

  Start s;
  s.epoch = 3;
  s.runId = 9;
  s.endpoints = {r.dataEndpoint, std::string(kLibraryMemberEndpoint)};
  const Frames g = s.encode();
  auto sb = Start::decode(g[0], g[1]);
  ASSERT_TRUE(sb.ok()) << sb.error().message();
  EXPECT_EQ(*sb, s);
}

TEST(SplitEndpoint, ShmThenTcpIsOneEndpoint) {
  EXPECT_TRUE(validEndpoint("shm://arl-dp-1-ns2-r0,tcp://10.77.0.10:4000"));
  EXPECT_FALSE(validEndpoint("tcp://10.77.0.10:4000,shm://arl-dp-1"));
  EXPECT_FALSE(validEndpoint("shm://a,tcp://h:1,tcp://h:2"));
  EXPECT_FALSE(validEndpoint("shm://a/b,tcp://h:1"));
  EXPECT_FALSE(validEndpoint("shm://a,"));
}

}  // namespace
}  // namespace arl
