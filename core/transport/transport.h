// Transport: ordered, reliable delivery of chunk payloads between ranks. Messages from one
// sender to one receiver arrive in the order sent (FIFO per channel), matching the schedule.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace arl {

// Which data plane carries chunk payloads between worker processes. Auto: shared memory when
// every rank is on one host, ZeroMQ otherwise. Zmq: ZeroMQ PUSH/PULL, ipc:// on one host and
// tcp:// across hosts. Shm: shared memory (one host only). Tcp: plain TCP sockets read and
// written by the ranks' own threads (transport/tcp/tcp_transport.h), on one host or across.
enum class DataPlaneKind : uint8_t { Auto, Zmq, Shm, Tcp };

constexpr std::string_view toString(DataPlaneKind k) {
  switch (k) {
    case DataPlaneKind::Auto: return "auto";
    case DataPlaneKind::Zmq: return "zmq";
    case DataPlaneKind::Shm: return "shm";
    case DataPlaneKind::Tcp: return "tcp";
  }
  return "?";
}

constexpr std::optional<DataPlaneKind> parseDataPlaneKind(std::string_view s) {
  if (s == "auto") return DataPlaneKind::Auto;
  if (s == "zmq") return DataPlaneKind::Zmq;
  if (s == "shm") return DataPlaneKind::Shm;
  if (s == "tcp") return DataPlaneKind::Tcp;
  return std::nullopt;
}

// Fixed header in front of every data-plane payload. A receiver compares it with what its
// own schedule expects, so a mismatch is caught on the first receive and never summed.
struct ChunkHeader {
  uint32_t magic = kMagic;
  uint32_t opSignature = 0;  // hash of algorithm, collective, dtype, op, count, ranks, slice
  uint64_t epoch = 0;        // run epoch
  uint64_t seq = 0;          // collective sequence number within the run
  int32_t src = -1;          // sending rank
  uint32_t step = 0;
  uint32_t chunk = 0;
  uint32_t slice = 0;
  uint64_t offset = 0;  // element offset of the payload in the sender's view of the vector
  uint64_t length = 0;  // payload bytes

  static constexpr uint32_t kMagic = 0x41524C43;  // "ARLC"
  // A notice: a message whose payload describes data the receiver reads elsewhere (a slice
  // in the sender's device memory, transport/peer_transport.h). A caller that sets this
  // magic gets it delivered as it is; every other magic is the transport's to fill.
  static constexpr uint32_t kNoticeMagic = 0x41524C4E;  // "ARLN"
};
static_assert(sizeof(ChunkHeader) == 56);

// The first bytes of every notice's payload: what the shaped network charges for it. A
// notice stands for a slice that moves by another way, so the data planes pace it as
// `pacedBytes` of data, not as the few bytes it has; an unpaced notice (an acknowledgement)
// is not paced at all, not even by the added latency.
struct NoticeHead {
  uint64_t pacedBytes = 0;
  uint32_t paced = 0;  // 1: paced as pacedBytes; 0: not paced
  uint32_t reserved = 0;
};
static_assert(sizeof(NoticeHead) == 16);

// The bytes a message of `magic` with `bytes` of payload at `payload` occupies the shaped
// network for: `bytes` for data, NoticeHead::pacedBytes for a paced notice, nullopt for an
// unpaced notice (or one too short to hold its head, which the receiver refuses later).
std::optional<uint64_t> pacedBytesOf(uint32_t magic, const void* payload, size_t bytes);

// A timeout as the transports' errors name it: "3 s" when whole seconds, else "250 ms".
std::string formatDuration(std::chrono::milliseconds t);

// Completion of an asynchronous send: the sender may reuse the memory once done().
class SendCompletion {
 public:
  virtual ~SendCompletion() = default;
  virtual bool done() const = 0;
  virtual void wait() = 0;
};

// The completion of a send that returned with the caller's memory already free (the payload
// was copied, or delivered): done at once. One shared instance, so such a send allocates nothing.
const std::shared_ptr<SendCompletion>& completedSend();

// A received payload. Owns (or pins) its bytes until destroyed.
class InMessage {
 public:
  virtual ~InMessage() = default;
  virtual const ChunkHeader& header() const = 0;
  virtual const void* data() const = 0;
  virtual size_t size() const = 0;
  // True when data() is another process's device memory (a peer's slice read in place,
  // transport/peer_transport.h) rather than host memory.
  virtual bool inPeerMemory() const { return false; }
  // Called once the caller has issued every backend operation that reads data(): a message
  // in peer memory hands the slice back to its sender then (ordered after those operations
  // on the device). Host messages ignore it.
  virtual void readIssued() {}
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Starts sending `bytes` at `data` to `peer`. The memory must stay valid and unchanged
  // until the returned completion reports done. Throws PeerError if the peer is gone.
  virtual std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                               size_t bytes) = 0;
  // A hint, just before send(peer, ...): another send, to `nextPeer`, follows that one before
  // the caller could wait. A plane may hold the first and write both together (the TCP plane's
  // held sends); it still writes what it holds before the caller could wait on it, as recv()
  // and ready() do. The executor gives it where its next op only sends (exec/executor.cpp);
  // the default ignores it.
  virtual void sendFollows(int peer, int nextPeer) {
    (void)peer;
    (void)nextPeer;
  }
  // Next message from `peer` (FIFO). Throws PeerError naming the peer and `step` when
  // nothing arrives within `timeout` or the transport was aborted.
  virtual std::unique_ptr<InMessage> recv(int peer, uint32_t step,
                                          std::chrono::milliseconds timeout) = 0;
  // True when recv(peer) would return a message now, without waiting for one to arrive; false
  // when it would wait, or this transport cannot tell (the default). Never blocks; may throw
  // what recv() throws for a malformed message it meets (naming `step`). A caller that holds
  // back work only while a message is ready, and finishes it before waiting, cannot hold back
  // what a peer waits for (exec/executor.cpp).
  virtual bool ready(int peer, uint32_t step) {
    (void)peer;
    (void)step;
    return false;
  }
  // True when a message from `peer` has arrived: on a shaped data plane, recv() may still hold
  // it back for the network's pacing, where ready() says false. For a caller that serves
  // whichever peer has sent (training's asynchronous parameter server). Never blocks.
  virtual bool arrived(int peer) { return ready(peer, 0); }
  // Makes every blocked and future call fail promptly (run aborted elsewhere).
  virtual void abort() = 0;
  // True when send() to `peer` takes backend memory as it is (device memory the peer reads
  // in place) instead of host memory: the caller then passes backend addresses and must not
  // stage them. False for every plain data plane.
  virtual bool readsBackendMemory(int /*peer*/) const { return false; }
  // Called by the executor before a run ends, so that nothing of the run is left on the data
  // plane: a lending transport (readsBackendMemory) waits for every lent slice to come back,
  // the TCP plane writes the sends it holds (tcp_transport.h); a no-op for the other planes.
  virtual void reclaimAll(uint32_t /*step*/) {}
};

}  // namespace arl
