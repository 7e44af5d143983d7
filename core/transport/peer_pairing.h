// Which pairs of ranks read each other's device memory in place (CUDA IPC) and which use the
// staged path (device to host, the data plane, host to device). A pure function of what the
// ranks reported, so every rank computes the same answer for a pair, and so does a test.
//
// Two ranks share memory when they run on one host (same host name) in one pid namespace
// (as the shared-memory data plane decides: another namespace may be a container with
// devices and IPC of its own), both have device memory to share, and each one's device is
// among those the other can map (its own, or one it has peer access to). Any other pair is
// refused, with a reason that names both ranks and their hosts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace arl {

// What one rank reported about itself.
struct PeerPlace {
  std::string host;
  uint64_t pidNamespace = 0;       // 0: unknown (equal to any other unknown)
  std::string device;              // the device its memory lives on ("": no memory to share)
  std::vector<std::string> reach;  // devices whose memory it can map
};

struct PeerPairing {
  std::vector<bool> viaPeerMemory;   // by rank: true when this rank and that one share memory
  std::vector<std::string> refused;  // by rank: why not ("" when shared, and for itself)
};

// The pairing of `rank` with every rank of `places`. With `enabled` false (switched off
// for the run) every pair is refused with that reason.
PeerPairing pairPeerMemory(const std::vector<PeerPlace>& places, int rank, bool enabled = true);

}  // namespace arl
