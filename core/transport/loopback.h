// In-process loopback transport: n ranks in one process, one thread per rank, each using its
// own LoopbackTransport from a shared LoopbackFabric. It is a real Transport (FIFO per channel,
// timeouts, failure and abort) with injectable link shaping, so collective tests need no
// sockets.
//
// Sends copy the payload into the receiver's queue, so a send completes as soon as send()
// returns: the sender may reuse its buffer at once, and SendEnd telemetry marks that copy.
//
// Link shaping is modelled with timestamps, never by sleeping in the sender: a message of b
// bytes sent at time t on a channel busy until u becomes visible to the receiver at
// max(t, u) + b / bandwidth + latency, and the channel is then busy until max(t, u) +
// b / bandwidth. The receiver waits (on a condition variable) until that time. Times are on
// the lab's steady clock (steadyNowNs(), base/clock.h), which telemetry uses too.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/transport.h"

namespace arl {

// Shaping of a loopback link.
struct LinkShape {
  std::chrono::microseconds latency{0};  // added to every message
  double bytesPerSecond = 0;             // 0 = uncapped
};

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
  // Aborts this rank's endpoint only: its blocked and future calls throw PeerError.
  void abort() override;

 private:
  LoopbackFabric& fabric_;
  int rank_;
};

class LoopbackFabric {
 public:
  // Creates the n endpoints. Throws ConfigError when n < 1.
  explicit LoopbackFabric(int nranks);
  LoopbackFabric(const LoopbackFabric&) = delete;
  LoopbackFabric& operator=(const LoopbackFabric&) = delete;
  ~LoopbackFabric();

  int size() const { return static_cast<int>(transports_.size()); }
  LoopbackTransport& transport(int rank);

  // Shaping of the link src -> dst, or of every link. Takes effect for messages sent after.
  void setLink(int src, int dst, LinkShape shape);
  void setAllLinks(LinkShape shape);

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
    int64_t visibleAtNs = 0;
  };
  struct Channel {
    std::deque<Message> queue;
    LinkShape shape;
    int64_t busyUntilNs = 0;
  };
  // Everything a receiving rank waits on is guarded by that rank's own mutex, so senders to
  // different receivers never contend.
  struct Inbox {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Channel> from;  // from[src]
    bool aborted = false;
  };

  void send(int src, int dst, const ChunkHeader& h, const void* data, size_t bytes);
  std::unique_ptr<InMessage> recv(int dst, int src, uint32_t step,
                                  std::chrono::milliseconds timeout);
  void abortRank(int rank);
  void checkRank(int rank, const char* what) const;
  bool failed(int rank) const;

  std::vector<std::unique_ptr<Inbox>> inboxes_;
  std::vector<std::unique_ptr<LoopbackTransport>> transports_;
  std::unique_ptr<std::atomic<bool>[]> failed_;
};

}  // namespace arl
