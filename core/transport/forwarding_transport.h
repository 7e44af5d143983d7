// ForwardingTransport: passes every Transport call to an inner transport. A base for wrappers
// that change or watch a few calls (fault injection, tests), so that each call a wrapper does
// not override still reaches the plane underneath, hints and reclaims included.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "transport/transport.h"

namespace arl {

class ForwardingTransport : public Transport {
 public:
  explicit ForwardingTransport(Transport& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                       size_t bytes) override {
    return inner_.send(peer, h, data, bytes);
  }
  void sendFollows(int peer, int nextPeer) override { inner_.sendFollows(peer, nextPeer); }
  std::unique_ptr<InMessage> recv(int peer, uint32_t step,
                                  std::chrono::milliseconds timeout) override {
    return inner_.recv(peer, step, timeout);
  }
  bool ready(int peer, uint32_t step) override { return inner_.ready(peer, step); }
  bool arrived(int peer) override { return inner_.arrived(peer); }
  void abort() override { inner_.abort(); }
  bool readsBackendMemory(int peer) const override { return inner_.readsBackendMemory(peer); }
  void reclaimAll(uint32_t step) override { inner_.reclaimAll(step); }

 private:
  Transport& inner_;
};

}  // namespace arl
