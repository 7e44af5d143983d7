// The ZeroMQ data plane's header frame (docs/dataplane.md), as bytes: what a receiver reads
// from a peer before anything of the message is queued. Plain bytes in, a ChunkHeader or the
// reason out, so that the check is testable and fuzzed without sockets (tests/fuzz).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>

#include "transport/transport.h"

namespace arl {

// Control messages of the goodbye exchange: a ChunkHeader with one of these magics and an
// empty payload. FIN follows a rank's last data message to a peer; ACK answers a FIN once
// everything before it has been read.
inline constexpr uint32_t kFinMagic = 0x41524C46;  // "ARLF"
inline constexpr uint32_t kAckMagic = 0x41524C41;  // "ARLA"

// A shaped data message's header frame: the ChunkHeader, then the send's start (int64 ns).
inline constexpr size_t kStampedHeaderBytes = sizeof(ChunkHeader) + sizeof(int64_t);

bool knownMagic(uint32_t magic);

// The sender a header frame names, or -1 when the frame is not a readable header (wrong size,
// unknown magic, a rank outside [0, nranks)).
int senderOf(std::span<const uint8_t> head, int nranks);

struct ChunkFrame {
  ChunkHeader header;
  int64_t sentWireNs = 0;  // the send's start, when the frame carries it (else 0)
};

// Why a header frame is refused; `src` is the sender it names when readable, else -1.
struct ChunkFrameError {
  int src = -1;
  std::string reason;  // "header says 64 payload bytes, payload frame has 8"
};

// Reads a header frame whose payload frame has `payloadBytes`, in a run of `nranks` ranks that
// is `paced` (shaped: data messages carry their send's start). Checks the size, the magic, the
// sender and the payload's length; never throws.
std::variant<ChunkFrame, ChunkFrameError> decodeChunkFrame(std::span<const uint8_t> head,
                                                           size_t payloadBytes, int nranks,
                                                           bool paced);

}  // namespace arl
