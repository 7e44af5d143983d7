// PeerMemory: backend memory that another process on the same host reads in place (CUDA IPC
// on the cuda backend), and the events that order such reads. The engine sees handles as
// opaque bytes; the backend that offers this (Backend::peerMemory) knows what they are.
//
// A slice lent to a peer: the sender copies it into a buffer that the peer can open (lend)
// and records one of its events after the copy (recordEvent); the receiver maps the buffer
// (openMemory), orders its own work after that event (waitEvent), reads, and records an event
// of its own after the read, which the sender waits for in turn before it lends the buffer
// again (giveBack). transport/peer_transport.h runs that exchange over a data plane.
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

  // A slice lent to a peer: the handle of the buffer holding it, its byte offset there, and
  // the loan's number for giveBack().
  struct Loan {
    Handle memory{};
    uint64_t offset = 0;
    uint64_t id = 0;
  };
  // Copies [p, p + bytes) of this backend's memory into a buffer of its own that another
  // process can open, after the work issued so far (in the backend's order), and lends that
  // buffer until giveBack(). Lending a copy leaves p free at once: a peer reading p itself
  // would race with this rank's next write there (a step that reduces into what it sends).
  virtual Loan lend(const void* p, size_t bytes) = 0;
  // The peer has read loan `id` (its read is ordered before this backend's later work, by
  // waitEvent): its buffer may be lent again.
  virtual void giveBack(uint64_t id) = 0;
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
