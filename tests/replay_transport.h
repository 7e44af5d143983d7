// Two transports for tests of one rank's executor: Capturing keeps a copy of every message a
// rank sends over a real transport, and Replay plays a recorded run's messages back to one
// rank on its own, with no peer running. Replayed messages can be held back (each one a
// fixed gap after the previous, from the first receive), and their payloads can live in
// memory of the test's choosing (pinned host memory for a device backend).
#pragma once

#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/errors.h"
#include "transport/forwarding_transport.h"
#include "transport/transport.h"

namespace arl::testutil {

struct Sent {
  int peer = -1;
  ChunkHeader header;
  std::vector<unsigned char> payload;
};

// Forwards everything to `inner` and keeps a copy of every message sent.
class Capturing final : public ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                       size_t bytes) override {
    const auto* b = static_cast<const unsigned char*>(data);
    sent.push_back({peer, h, {b, b + bytes}});
    return ForwardingTransport::send(peer, h, data, bytes);
  }

  std::vector<Sent> sent;
};

// Replays `incoming` (messages other ranks sent to `rank`) in order per sender. Message k
// (over all senders, in the order given) arrives `gap` x k after the first receive or ready();
// ready() says whether the next one from a peer has arrived. Sends are kept in `sent`, not
// delivered, and complete at once. `store` (optional) gives the memory a payload is held in,
// filled when the replay is made (so that a receive costs no copy), and `release` takes it
// back when the message is destroyed.
class Replay final : public Transport {
 public:
  using Store = std::function<void*(size_t)>;
  using Release = std::function<void(void*)>;

  Replay(int rank, int size, const std::vector<Sent>& incoming,
         std::chrono::nanoseconds gap = std::chrono::nanoseconds(0), Store store = {},
         Release release = {})
      : rank_(rank),
        size_(size),
        gap_(gap),
        store_(std::move(store)),
        release_(std::move(release)) {
    int64_t k = 0;
    for (const Sent& m : incoming) {
      queues_[m.header.src].push_back({std::make_unique<Message>(m, store_, release_), k++});
    }
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                       size_t bytes) override {
    const auto* b = static_cast<const unsigned char*>(data);
    sent.push_back({peer, h, {b, b + bytes}});
    return completedSend();
  }
  std::unique_ptr<InMessage> recv(int peer, uint32_t step, std::chrono::milliseconds) override {
    auto& q = queues_[peer];
    if (q.empty()) throw PeerError(rank_, peer, step, "the replay has no more messages");
    const int64_t at = arrival(q.front().index);
    while (steadyNowNs() < at) std::this_thread::yield();
    std::unique_ptr<InMessage> m = std::move(q.front().m);
    q.pop_front();
    return m;
  }
  bool ready(int peer, uint32_t) override {
    auto& q = queues_[peer];
    return !q.empty() && steadyNowNs() >= arrival(q.front().index);
  }
  void abort() override {}

  std::vector<Sent> sent;

 private:
  class Message final : public InMessage {
   public:
    Message(Sent m, const Store& store, Release release)
        : m_(std::move(m)), release_(std::move(release)) {
      data_ = m_.payload.data();
      if (store) {
        data_ = store(m_.payload.size());
        std::memcpy(data_, m_.payload.data(), m_.payload.size());
      }
    }
    ~Message() override {
      if (release_ && data_ != m_.payload.data()) release_(data_);
    }
    const ChunkHeader& header() const override { return m_.header; }
    const void* data() const override { return data_; }
    size_t size() const override { return m_.payload.size(); }

   private:
    Sent m_;
    void* data_ = nullptr;
    Release release_;
  };

  struct Queued {
    std::unique_ptr<Message> m;
    int64_t index = 0;
  };

  int64_t arrival(int64_t index) {
    if (start_ == 0) start_ = steadyNowNs();
    return start_ + index * static_cast<int64_t>(gap_.count());
  }

  int rank_;
  int size_;
  std::chrono::nanoseconds gap_;
  Store store_;
  Release release_;
  int64_t start_ = 0;
  std::map<int, std::deque<Queued>> queues_;
};

}  // namespace arl::testutil
