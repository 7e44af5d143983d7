#include "transport/peer_pairing.h"

#include <algorithm>

#include "base/errors.h"

namespace arl {

namespace {

std::string who(const std::vector<PeerPlace>& places, int r) {
  return "rank " + std::to_string(r) + " (host " + places[static_cast<size_t>(r)].host + ")";
}

bool reaches(const PeerPlace& from, const std::string& device) {
  return std::find(from.reach.begin(), from.reach.end(), device) != from.reach.end();
}

// Why ranks a and b cannot share memory, or "" when they can.
std::string whyNot(const std::vector<PeerPlace>& places, int a, int b) {
  const PeerPlace& pa = places[static_cast<size_t>(a)];
  const PeerPlace& pb = places[static_cast<size_t>(b)];
  if (pa.host != pb.host) return "they are on different hosts";
  if (pa.pidNamespace != pb.pidNamespace) {
    return "they are in different pid namespaces (" + std::to_string(pa.pidNamespace) + " and " +
           std::to_string(pb.pidNamespace) + ")";
  }
  for (const int x : {a, b}) {
    if (places[static_cast<size_t>(x)].device.empty()) {
      return "rank " + std::to_string(x) + " has no device memory to share";
    }
  }
  for (const auto& [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
    const PeerPlace& px = places[static_cast<size_t>(x)];
    const PeerPlace& py = places[static_cast<size_t>(y)];
    if (!reaches(py, px.device)) {
      return "rank " + std::to_string(x) + "'s device " + px.device + " is not one rank " +
             std::to_string(y) + " can map";
    }
  }
  return {};
}

}  // namespace

PeerPairing pairPeerMemory(const std::vector<PeerPlace>& places, int rank, bool enabled) {
  const int n = static_cast<int>(places.size());
  ARL_ENFORCE(rank >= 0 && rank < n, "rank " << rank << " of " << n << " places");
  PeerPairing out;
  out.viaPeerMemory.assign(places.size(), false);
  out.refused.assign(places.size(), "");
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    // Said the same way from both ends: the lower rank first.
    const int a = std::min(rank, p);
    const int b = std::max(rank, p);
    const std::string why =
        enabled ? whyNot(places, a, b) : "CUDA IPC is switched off for this run";
    if (why.empty()) {
      out.viaPeerMemory[static_cast<size_t>(p)] = true;
    } else {
      out.refused[static_cast<size_t>(p)] = "CUDA IPC between " + who(places, a) + " and " +
                                            who(places, b) + " refused: " + why +
                                            "; they use staged copies";
    }
  }
  return out;
}

}  // namespace arl
