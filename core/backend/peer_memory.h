// PeerMemory: backend memory that another process on the same host reads in place (CUDA IPC
// on the cuda backend), and the events that order such reads. The engine sees handles as
// opaque bytes; the backend that offers this (Backend::peerMemory) knows what they are.
//
// A slice lent to a peer: the sender names the allocation that holds it (exportMemory) and
// records one of its events after the work that produced it (recordEvent); the receiver maps
// the allocation (openMemory), orders its own work after that event (waitEvent), reads, and
// records an event of its own after the read, which the sender waits for in turn before it
// writes there again. transport/peer_transport.h runs that exchange over a data plane.
// Threads: the executor's thread makes every call.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace arl {

class PeerMemory {
 public:
  // An opaque handle (cudaIpcMemHandle_t and cudaIpcEventHandle_t are 64 bytes each).
  using Handle = std::array<unsigned char, 64>;

  virtual ~PeerMemory() = default;

  // The device this backend's memory lives on, as every process on the host names it (its
  // UUID, "GPU-8f6c..."), and the devices whose memory this backend can map in place (its
  // own first, then those it has peer access to).
  virtual std::string deviceId() const = 0;
  virtual std::vector<std::string> reachableDevices() const = 0;

  // The allocation holding [p, p + bytes), as a handle another process opens, and p's byte
  // offset within it. Throws EnforceError when that range is not this backend's memory.
  virtual Handle exportMemory(const void* p, size_t bytes, uint64_t* offset) = 0;
  // Records this process's interprocess event `slot` after the work issued so far and returns
  // its handle (the same for a slot every time). Slots are made on first use.
  virtual Handle recordEvent(uint32_t slot) = 0;

  // The address of [offset, offset + bytes) of `peer`'s allocation `memory`, mapped on first
  // use and kept until closePeers().
  virtual const void* openMemory(int peer, const Handle& memory, uint64_t offset, size_t bytes) = 0;
  // Orders every later operation of this backend after the peer's event `slot` (as recorded
  // when this is called).
  virtual void waitEvent(int peer, uint32_t slot, const Handle& event) = 0;
  // Unmaps every peer allocation and event this process opened (the end of a run). Never
  // throws.
  virtual void closePeers() noexcept = 0;
};

}  // namespace arl
