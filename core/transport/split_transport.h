// SplitTransport: one rank's messages over two data planes at once, chosen per peer: shared
// memory to the ranks of its own host, the network to the others (docs/hosts.md). Each pair
// of ranks uses one plane both ways, so FIFO per channel holds as each plane keeps it.
//
// A rank on both planes reports both endpoints in one (protocol 13), the shared-memory one
// first: "shm://NAME,tcp://HOST:PORT".
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "transport/transport.h"

namespace arl {

// The ranks this one reaches over shared memory: same host name and same pid namespace (as
// pairPeerMemory and the shared-memory plane require), by rank; false for itself.
std::vector<bool> sameHostPeers(const std::vector<std::string>& hosts,
                                const std::vector<uint64_t>& pidNamespaces, int rank);

// "near,far" of two endpoints; either alone when the other is empty.
std::string joinEndpoints(const std::string& near, const std::string& far);
// The endpoint of `scheme` ("shm://", "tcp://") within an endpoint joinEndpoints made, or
// "" when it has none.
std::string endpointOfScheme(std::string_view joined, std::string_view scheme);

class SplitTransport final : public Transport {
 public:
  // `near` carries the messages of the peers with viaNear[peer], `far` the others; both
  // outlive this and have the same rank and size. `flushFar` writes what `far` holds back
  // (TcpDataPlane::flush with held sends); it runs before a receive from `near` that would
  // wait, so that no peer across waits for what this rank has sent. Throws ConfigError when
  // the planes differ or viaNear has not one entry per rank.
  SplitTransport(Transport& near, Transport& far, std::vector<bool> viaNear,
                 std::function<void()> flushFar = {});

  int rank() const override { return near_.rank(); }
  int size() const override { return near_.size(); }
  std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                       size_t bytes) override;
  // To the plane of `peer`, when `nextPeer` is on it too: a plane holds a send only for one
  // of its own that follows (a send on the other plane may wait for room meanwhile).
  void sendFollows(int peer, int nextPeer) override;
  std::unique_ptr<InMessage> recv(int peer, uint32_t step,
                                  std::chrono::milliseconds timeout) override;
  bool ready(int peer, uint32_t step) override;
  bool arrived(int peer) override;
  // Aborts both planes.
  void abort() override;
  // Both planes', the far one first.
  void reclaimAll(uint32_t step) override;

 private:
  Transport& of(int peer) const;

  Transport& near_;
  Transport& far_;
  std::vector<bool> viaNear_;
  std::function<void()> flushFar_;
};

}  // namespace arl
