// Two data planes chosen per peer (split_transport.h).
#include "transport/split_transport.h"

#include "base/errors.h"

namespace arl {

std::vector<bool> sameHostPeers(const std::vector<std::string>& hosts,
                                const std::vector<uint64_t>& pidNamespaces, int rank) {
  const auto n = hosts.size();
  ARL_ENFORCE(rank >= 0 && static_cast<size_t>(rank) < n, "rank " << rank << " of " << n);
  ARL_ENFORCE(pidNamespaces.empty() || pidNamespaces.size() == n,
              pidNamespaces.size() << " pid namespaces for " << n << " hosts");
  std::vector<bool> out(n, false);
  const auto me = static_cast<size_t>(rank);
  for (size_t p = 0; p < n; ++p) {
    const bool oneNamespace = pidNamespaces.empty() || pidNamespaces[p] == pidNamespaces[me];
    out[p] = p != me && hosts[p] == hosts[me] && oneNamespace;
  }
  return out;
}

std::string joinEndpoints(const std::string& near, const std::string& far) {
  if (near.empty()) return far;
  if (far.empty()) return near;
  return near + "," + far;
}

std::string endpointOfScheme(std::string_view joined, std::string_view scheme) {
  while (!joined.empty()) {
    const size_t comma = joined.find(',');
    const std::string_view one = joined.substr(0, comma);
    if (one.substr(0, scheme.size()) == scheme) return std::string(one);
    if (comma == std::string_view::npos) break;
    joined.remove_prefix(comma + 1);
  }
  return {};
}

SplitTransport::SplitTransport(Transport& near, Transport& far, std::vector<bool> viaNear,
                               std::function<void()> flushFar)
    : near_(near), far_(far), viaNear_(std::move(viaNear)), flushFar_(std::move(flushFar)) {
  if (near.rank() != far.rank() || near.size() != far.size() ||
      viaNear_.size() != static_cast<size_t>(near.size())) {
    throw ConfigError("split data plane: rank " + std::to_string(near.rank()) + " of " +
                      std::to_string(near.size()) + " beside rank " + std::to_string(far.rank()) +
                      " of " + std::to_string(far.size()) + ", with " +
                      std::to_string(viaNear_.size()) + " peers placed");
  }
}

Transport& SplitTransport::of(int peer) const {
  ARL_ENFORCE(peer >= 0 && peer < near_.size(), "peer " << peer << " of " << near_.size());
  return viaNear_[static_cast<size_t>(peer)] ? near_ : far_;
}

std::shared_ptr<SendCompletion> SplitTransport::send(int peer, const ChunkHeader& h,
                                                     const void* data, size_t bytes) {
  return of(peer).send(peer, h, data, bytes);
}

void SplitTransport::sendFollows(int peer, int nextPeer) {
  Transport& t = of(peer);
  if (&t == &of(nextPeer)) t.sendFollows(peer, nextPeer);
}

std::unique_ptr<InMessage> SplitTransport::recv(int peer, uint32_t step,
                                                std::chrono::milliseconds timeout) {
  Transport& t = of(peer);
  if (flushFar_ && &t == &near_ && !near_.arrived(peer)) flushFar_();
  return t.recv(peer, step, timeout);
}

bool SplitTransport::ready(int peer, uint32_t step) {
  Transport& t = of(peer);
  const bool yes = t.ready(peer, step);
  if (!yes && flushFar_ && &t == &near_) flushFar_();
  return yes;
}

bool SplitTransport::arrived(int peer) {
  Transport& t = of(peer);
  const bool yes = t.arrived(peer);
  if (!yes && flushFar_ && &t == &near_) flushFar_();
  return yes;
}

void SplitTransport::reclaimAll(uint32_t step) {
  far_.reclaimAll(step);
  near_.reclaimAll(step);
}

void SplitTransport::abort() {
  near_.abort();
  far_.abort();
}

}  // namespace arl
