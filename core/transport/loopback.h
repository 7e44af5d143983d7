// In-process loopback transport: n ranks in one process, one thread per rank, each using its
// own LoopbackTransport from a shared LoopbackFabric. It is a real Transport (FIFO per channel,
// timeouts, failure and abort) that can be shaped like the process data planes, so collective
// tests need no sockets.
//
// Sends copy the payload into the receiver's queue: the sender may reuse its buffer at once,
// and an unshaped send is complete on return (SendEnd telemetry marks that copy).
//
// Shaping (a LinkShaping, given to the fabric when it is made) paces every rank as the other
// data planes do (transport/pacing.h): a send is complete once its bytes have left the
// sender's port, and a message becomes visible to its receiver once they have passed the
// sender's port, the link and the receiver's ingress, plus the added latency. Waits sleep
// until then, yielding for the last fraction of a millisecond. Times are on the lab's
// steady clock (steadyNowNs(), base/clock.h), which telemetry uses too.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "base/shaping.h"
#include "transport/pacing.h"
#include "transport/transport.h"

namespace arl {

class LoopbackFabric;

// One rank's endpoint. Use it from one thread only (the rank's); other threads may call
// abort() on it or on the fabric at any time.
class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(LoopbackFabric& fabric, int rank) : fabric_(fabric), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override;
  std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                       size_t bytes) override;
  std::unique_ptr<InMessage> recv(int peer, uint32_t step,
                                  std::chrono::milliseconds timeout) override;
  // A message from `peer` is queued and, when shaped, has arrived by the pacing.
  bool ready(int peer, uint32_t step) override;
  // Aborts this rank's endpoint only: its blocked and future calls throw PeerError.
  void abort() override;

 private:
  LoopbackFabric& fabric_;
  int rank_;
};

class LoopbackFabric {
 public:
  // Creates the n endpoints, paced by `shaping` (none when it is empty). Throws ConfigError
  // when n < 1 or the shaping does not fit n ranks (checkShaping).
  explicit LoopbackFabric(int nranks, const LinkShaping& shaping = {});
  LoopbackFabric(const LoopbackFabric&) = delete;
  LoopbackFabric& operator=(const LoopbackFabric&) = delete;
  ~LoopbackFabric();

  int size() const { return static_cast<int>(transports_.size()); }
  LoopbackTransport& transport(int rank);

  // Declares `rank` dead: once the messages it sent before are drained, every receive from
  // it throws PeerError "rank P failed" at once, as do sends to it and its own calls.
  void fail(int rank);
  // Aborts the whole run: every blocked and future call on every endpoint throws PeerError.
  void abort();

 private:
  friend class LoopbackTransport;

  struct Message {
    ChunkHeader header;
    std::vector<unsigned char> payload;
    int64_t startNs = 0;       // when it started to leave the sender (shaped runs)
    int64_t visibleAtNs = -1;  // when the receiver may take it; -1 = not paced yet
  };
  struct Channel {
    std::deque<Message> queue;
  };
  // Everything a receiving rank waits on is guarded by that rank's own mutex, so senders to
  // different receivers never contend.
  struct Inbox {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Channel> from;  // from[src]
    // Set under mu (so a waiter cannot miss it); read without it by pacing waits.
    std::atomic<bool> aborted{false};
  };

  // Returns when the message has left the sender's port (0 when unshaped).
  int64_t send(int src, int dst, const ChunkHeader& h, const void* data, size_t bytes);
  std::unique_ptr<InMessage> recv(int dst, int src, uint32_t step,
                                  std::chrono::milliseconds timeout);
  bool ready(int dst, int src);
  void abortRank(int rank);
  void checkRank(int rank, const char* what) const;
  bool failed(int rank) const;
  bool stopped(int rank) const;  // aborted or failed
  // Waits (without the inbox lock) until the front message of dst's channel from src is
  // visible; throws PeerError when the run is aborted meanwhile.
  void paceReceive(int dst, int src, uint32_t step, int64_t visibleAtNs);

  std::vector<std::unique_ptr<Inbox>> inboxes_;
  std::vector<std::unique_ptr<LoopbackTransport>> transports_;
  std::unique_ptr<std::atomic<bool>[]> failed_;
  std::vector<std::unique_ptr<Pacer>> pacers_;  // by rank; empty when unshaped
};

}  // namespace arl
