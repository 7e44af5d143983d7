// The data plane's header frame decoded from bytes, as a receiver meets it from a peer: what
// it accepts (plain and stamped frames, notices, the goodbye's magics) and why it refuses the
// rest, naming the sender when the frame can tell. The same function runs under the fuzzer
// (tests/fuzz/fuzz_chunk_header.cpp).
#include "transport/zmq/chunk_frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <variant>
#include <vector>

namespace arl {
namespace {

ChunkHeader header(int src, uint64_t length, uint32_t magic = ChunkHeader::kMagic) {
  ChunkHeader h;
  h.magic = magic;
  h.src = src;
  h.step = 4;
  h.length = length;
  return h;
}

std::vector<uint8_t> frame(const ChunkHeader& h, const int64_t* stamp = nullptr) {
  std::vector<uint8_t> out(sizeof h + (stamp ? sizeof *stamp : 0));
  std::memcpy(out.data(), &h, sizeof h);
  if (stamp) std::memcpy(out.data() + sizeof h, stamp, sizeof *stamp);
  return out;
}

ChunkFrameError refusal(const std::vector<uint8_t>& head, size_t payload, int nranks, bool paced) {
  auto got = decodeChunkFrame(head, payload, nranks, paced);
  EXPECT_TRUE(std::holds_alternative<ChunkFrameError>(got));
  return std::holds_alternative<ChunkFrameError>(got) ? std::get<ChunkFrameError>(got)
                                                      : ChunkFrameError{};
}

TEST(ChunkFrame, AcceptsPlainAndStampedFramesOfEveryKnownMagic) {
  for (uint32_t magic : {ChunkHeader::kMagic, ChunkHeader::kNoticeMagic, kFinMagic, kAckMagic}) {
    const auto plain = decodeChunkFrame(frame(header(2, 7, magic)), 7, 4, false);
    ASSERT_TRUE(std::holds_alternative<ChunkFrame>(plain));
    EXPECT_EQ(std::get<ChunkFrame>(plain).header.src, 2);
    EXPECT_EQ(std::get<ChunkFrame>(plain).sentWireNs, 0);
  }
  const int64_t stamp = 123'456'789;
  const auto stamped = decodeChunkFrame(frame(header(3, 0), &stamp), 0, 4, true);
  ASSERT_TRUE(std::holds_alternative<ChunkFrame>(stamped));
  EXPECT_EQ(std::get<ChunkFrame>(stamped).sentWireNs, stamp);
  // An unpaced notice (an acknowledgement) needs no stamp in a shaped run.
  EXPECT_TRUE(std::holds_alternative<ChunkFrame>(
      decodeChunkFrame(frame(header(1, 0, ChunkHeader::kNoticeMagic)), 0, 4, true)));
}

TEST(ChunkFrame, RefusesNamingTheSenderWhenTheFrameTellsIt) {
  EXPECT_EQ(refusal(std::vector<uint8_t>(10, 'h'), 3, 3, false).reason,
            "header frame is 10 bytes, expected 56");
  EXPECT_EQ(refusal(std::vector<uint8_t>(10, 'h'), 3, 3, true).reason,
            "header frame is 10 bytes, expected 64");
  const ChunkFrameError magic = refusal(frame(header(1, 3, 0xDEADBEEF)), 3, 3, false);
  EXPECT_EQ(magic.src, -1);
  EXPECT_EQ(magic.reason, "bad magic 0xDEADBEEF, expected 0x41524C43");
  const ChunkFrameError sender = refusal(frame(header(9, 3)), 3, 3, false);
  EXPECT_EQ(sender.src, -1);
  EXPECT_EQ(sender.reason, "sender rank 9 not in [0, 3)");
  EXPECT_EQ(refusal(frame(header(-1, 3)), 3, 3, false).reason, "sender rank -1 not in [0, 3)");
  const ChunkFrameError length = refusal(frame(header(1, 100)), 99, 3, false);
  EXPECT_EQ(length.src, 1);
  EXPECT_EQ(length.reason, "header says 100 payload bytes, payload frame has 99");
  const ChunkFrameError unstamped = refusal(frame(header(2, 0)), 0, 3, true);
  EXPECT_EQ(unstamped.src, 2);
  EXPECT_EQ(unstamped.reason, "a data message without its send time in a shaped run");
}

TEST(ChunkFrame, SenderOfReadsOnlyWholeHeadersOfTheRun) {
  EXPECT_EQ(senderOf(frame(header(2, 0)), 3), 2);
  EXPECT_EQ(senderOf(frame(header(3, 0)), 3), -1);
  EXPECT_EQ(senderOf(frame(header(0, 0, 0x1234)), 3), -1);
  EXPECT_EQ(senderOf(std::vector<uint8_t>(57, 0), 3), -1);
}

}  // namespace
}  // namespace arl
