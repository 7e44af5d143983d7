#include "transport/zmq/chunk_frame.h"

#include <cstdio>
#include <cstring>

namespace arl {

bool knownMagic(uint32_t magic) {
  return magic == ChunkHeader::kMagic || magic == ChunkHeader::kNoticeMagic || magic == kFinMagic ||
         magic == kAckMagic;
}

int senderOf(std::span<const uint8_t> head, int nranks) {
  if (head.size() != sizeof(ChunkHeader) && head.size() != kStampedHeaderBytes) return -1;
  ChunkHeader h;
  std::memcpy(&h, head.data(), sizeof h);
  if (!knownMagic(h.magic) || h.src < 0 || h.src >= nranks) return -1;
  return h.src;
}

std::variant<ChunkFrame, ChunkFrameError> decodeChunkFrame(std::span<const uint8_t> head,
                                                           size_t payloadBytes, int nranks,
                                                           bool paced) {
  const int src = senderOf(head, nranks);
  const size_t want = paced ? kStampedHeaderBytes : sizeof(ChunkHeader);
  if (head.size() != want && head.size() != sizeof(ChunkHeader)) {
    return ChunkFrameError{src, "header frame is " + std::to_string(head.size()) +
                                    " bytes, expected " + std::to_string(want)};
  }
  ChunkFrame f;
  std::memcpy(&f.header, head.data(), sizeof f.header);
  const ChunkHeader& h = f.header;
  if (head.size() == kStampedHeaderBytes) {
    std::memcpy(&f.sentWireNs, head.data() + sizeof h, sizeof f.sentWireNs);
  } else if (paced && h.magic == ChunkHeader::kMagic) {
    // (A notice may go unpaced, an acknowledgement; pacedBytesOf() tells them apart.)
    return ChunkFrameError{src, "a data message without its send time in a shaped run"};
  }
  if (!knownMagic(h.magic)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "bad magic 0x%08X, expected 0x%08X", h.magic,
                  ChunkHeader::kMagic);
    return ChunkFrameError{-1, buf};
  }
  if (h.src < 0 || h.src >= nranks) {
    return ChunkFrameError{
        -1, "sender rank " + std::to_string(h.src) + " not in [0, " + std::to_string(nranks) + ")"};
  }
  if (h.length != payloadBytes) {
    return ChunkFrameError{src, "header says " + std::to_string(h.length) +
                                    " payload bytes, payload frame has " +
                                    std::to_string(payloadBytes)};
  }
  return f;
}

}  // namespace arl
