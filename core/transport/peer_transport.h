// PeerMemoryTransport: lends slices in device memory to ranks of the same host instead of
// sending their bytes (CUDA IPC; backend/peer_memory.h), over any data plane, which carries
// small notices in their place. Pairs that do not share memory (transport/peer_pairing.h)
// go through to the data plane unchanged, staged as before.
//
// A slice, sender S to receiver R, the k-th on that channel:
//  - S's send() takes backend memory (readsBackendMemory), copies it into a buffer of its own
//    on the device (PeerMemory::lend, ordered after the op that produced it), records one of
//    its interprocess events after the copy, and sends a slice notice: the buffer's handle,
//    the offset, the length, the event's slot and handle. The data plane paces the notice as
//    the slice's bytes (NoticeHead), so link shaping charges a lent slice as it charges a
//    sent one. The send is complete once the notice is: the caller's memory is free.
//  - R's recv() maps the buffer (once per run), makes its backend wait for S's event and
//    returns a message whose data() is S's buffer (inPeerMemory). R's executor issues the
//    reduction or copy that reads it, then calls readIssued(): R records an event of its own
//    after that read and sends a return notice (unpaced) naming it.
//  - When S takes the return, its backend waits for R's event and the buffer may be lent
//    again (PeerMemory::giveBack). S takes returns as they come on the channel from R, when it
//    has `loansPerPeer` slices out to R (then it waits for the oldest, as a full ring makes a
//    sender wait), and in reclaimAll() at the end of every run.
//
// Why a copy: a receiver reading the sender's run buffer itself races with the sender's next
// write there; in recursive doubling both ranks of a pair reduce into the very slices they
// lend each other, so neither may write before the other has read, and neither reads before
// it has written: lending in place deadlocks or corrupts. The copy is device to device.
//
// Event slots. Each direction of each channel has `loansPerPeer` events, used in turn. S
// records slot k mod loansPerPeer for slice k only once return k - loansPerPeer has been
// waited for, and tells R in every notice how many returns it has waited for, so R checks
// that the event it records for return k is no longer awaited. Returns arrive in the order of
// their slices; anything else fails the run.
//
// Threads: the executor's thread makes every call except abort().
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "backend/peer_memory.h"
#include "transport/peer_pairing.h"
#include "transport/transport.h"

namespace arl {

// What the two notices carry after their NoticeHead; fixed layouts, little-endian as the
// ChunkHeader (docs/dataplane.md).
struct SliceNotice {
  uint64_t seq = 0;          // the slice's number on its channel (0, 1, ...)
  uint64_t offset = 0;       // byte offset of the slice within the allocation
  uint64_t length = 0;       // slice bytes
  uint64_t returnsSeen = 0;  // returns of the receiver the sender has waited for so far
  uint32_t eventSlot = 0;
  PeerMemory::Handle memory{};
  PeerMemory::Handle event{};
  bool operator==(const SliceNotice&) const = default;
};

struct ReturnNotice {
  uint64_t seq = 0;  // the slice it hands back
  uint32_t eventSlot = 0;
  PeerMemory::Handle event{};
  bool operator==(const ReturnNotice&) const = default;
};

using PeerNotice = std::variant<SliceNotice, ReturnNotice>;

// A notice's payload (NoticeHead included), and back. decodeNotice never throws: it returns
// the one-line reason a payload is refused ("a slice notice is 208 bytes, got 40").
std::vector<unsigned char> encodeNotice(const SliceNotice& n);
std::vector<unsigned char> encodeNotice(const ReturnNotice& n);
std::variant<PeerNotice, std::string> decodeNotice(const void* payload, size_t bytes);

class PeerMemoryTransport final : public Transport {
 public:
  static constexpr uint32_t kDefaultLoansPerPeer = 64;

  // `inner` carries the notices (and every message between ranks that do not share memory),
  // `memory` is this rank's backend's; both must outlive this. `pairing` is this rank's
  // (pairPeerMemory), its refusals quoted when a peer sends a notice all the same. Every
  // rank of a run must be given the same `loansPerPeer` (>= 1).
  PeerMemoryTransport(Transport& inner, PeerMemory& memory, PeerPairing pairing,
                      uint32_t loansPerPeer = kDefaultLoansPerPeer);
  // Closes what it opened of the peers' memory (close()).
  ~PeerMemoryTransport() override;
  PeerMemoryTransport(const PeerMemoryTransport&) = delete;
  PeerMemoryTransport& operator=(const PeerMemoryTransport&) = delete;

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                       size_t bytes) override;
  // To `inner` when both sends are plain ones on it (a lent slice's send may wait first).
  void sendFollows(int peer, int nextPeer) override {
    if (!readsBackendMemory(peer) && !readsBackendMemory(nextPeer)) {
      inner_.sendFollows(peer, nextPeer);
    }
  }
  std::unique_ptr<InMessage> recv(int peer, uint32_t step,
                                  std::chrono::milliseconds timeout) override;
  void abort() override { inner_.abort(); }
  bool readsBackendMemory(int peer) const override;
  void reclaimAll(uint32_t step) override;
  uint32_t loansPerPeer() const { return loansPerPeer_; }

  // Unmaps the peers' memory and events. Call once every backend operation that read them
  // has completed (the end of a run). Never throws; idempotent.
  void close() noexcept;

 private:
  class SliceMessage;
  struct Channel {
    uint64_t slicesSent = 0;
    uint64_t returnsWaited = 0;  // returns of our slices taken and waited for
    std::deque<uint64_t> loans;  // PeerMemory loan ids of slices returnsWaited, ...
    uint64_t slicesReceived = 0;
    uint64_t returnsSent = 0;
    std::deque<std::pair<ChunkHeader, SliceNotice>> pending;  // slices not yet asked for
  };

  // Takes one message from `peer` on an IPC channel: a return is handled, a slice queued.
  void pull(int peer, uint32_t step, std::chrono::milliseconds timeout);
  // Blocks until our slice `seq` to `peer` has come back.
  void awaitReturn(int peer, uint64_t seq, uint32_t step);
  void sendReturn(int peer, uint64_t seq, uint32_t step);
  [[noreturn]] void malformed(int peer, uint32_t step, const std::string& what) const;
  uint32_t slot(int peer, bool returns, uint64_t seq) const;

  Transport& inner_;
  PeerMemory& memory_;
  PeerPairing pairing_;
  uint32_t loansPerPeer_;
  std::vector<Channel> channels_;  // by peer
  bool closed_ = false;
};

}  // namespace arl
