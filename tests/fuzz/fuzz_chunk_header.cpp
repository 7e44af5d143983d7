// The ZeroMQ data plane's header frame as a receiver reads it from a peer
// (transport/zmq/chunk_frame.h), and a notice's payload (transport/peer_transport.h). Input:
// byte 0 the run (bit 0: shaped; the rest: ranks - 1), byte 1 the header frame's length (mod
// 72, so 56 and 64 come often), then the header frame, then the payload frame.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <variant>

#include "base/limits.h"
#include "fuzz_check.h"
#include "transport/peer_transport.h"
#include "transport/zmq/chunk_frame.h"

namespace {

using namespace arl;

void checkNotice(std::span<const uint8_t> payload) {
  (void)pacedBytesOf(ChunkHeader::kNoticeMagic, payload.data(), payload.size());
  const auto got = decodeNotice(payload.data(), payload.size());
  const auto* notice = std::get_if<PeerNotice>(&got);
  if (notice == nullptr) return;
  const auto again = std::visit([](const auto& n) { return encodeNotice(n); }, *notice);
  const auto back = decodeNotice(again.data(), again.size());
  const auto* same = std::get_if<PeerNotice>(&back);
  ARL_FUZZ_CHECK(same != nullptr, std::get<std::string>(back));
  ARL_FUZZ_CHECK(*same == *notice, "a notice re-encoded decodes to another");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const bool paced = (data[0] & 1) != 0;
  const int nranks = 1 + (data[0] >> 1) % kMaxRanks;
  const size_t headBytes = std::min<size_t>(data[1] % 72, size - 2);
  const std::span<const uint8_t> head(data + 2, headBytes);
  const std::span<const uint8_t> payload(data + 2 + headBytes, size - 2 - headBytes);

  (void)senderOf(head, nranks);
  const auto got = decodeChunkFrame(head, payload.size(), nranks, paced);
  if (const auto* bad = std::get_if<ChunkFrameError>(&got)) {
    ARL_FUZZ_CHECK(bad->src >= -1 && bad->src < nranks, bad->reason);
    ARL_FUZZ_CHECK(!bad->reason.empty(), "a refusal without a reason");
    return 0;
  }
  const ChunkFrame& f = std::get<ChunkFrame>(got);
  const ChunkHeader& h = f.header;
  ARL_FUZZ_CHECK(knownMagic(h.magic), "accepted an unknown magic");
  ARL_FUZZ_CHECK(h.src >= 0 && h.src < nranks, "accepted a sender outside the run");
  ARL_FUZZ_CHECK(h.length == payload.size(), "accepted a length the payload does not have");
  ARL_FUZZ_CHECK(senderOf(head, nranks) == h.src, "senderOf disagrees with the decode");
  ARL_FUZZ_CHECK(std::memcmp(&h, head.data(), sizeof h) == 0, "the header is not the frame's");
  if (h.magic == ChunkHeader::kNoticeMagic) checkNotice(payload);
  return 0;
}
