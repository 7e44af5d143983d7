// Tickets over one CUDA stream (Backend::Ticket): record() marks the point after the work
// enqueued so far with an event, and ticket k is complete when that event is. The stream runs
// in order, so a complete ticket completes every earlier one. Events come from a pool and go
// back to it once their ticket is known complete: after the first operations nothing is
// allocated per ticket. Private to gpu/. Thread-safe.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <vector>

namespace arl::gpu {

class EventTickets {
 public:
  using Ticket = uint64_t;

  explicit EventTickets(cudaStream_t stream);
  // Destroys the events; the stream must have been synchronised (the backend does it).
  ~EventTickets();
  EventTickets(const EventTickets&) = delete;
  EventTickets& operator=(const EventTickets&) = delete;

  // Records an event after the work enqueued on the stream so far; returns its ticket (from 1).
  Ticket record();
  // The newest ticket issued (0: none yet).
  Ticket last() const;
  // Has ticket t completed? Never blocks. Asking about a ticket never issued is a bug.
  bool done(Ticket t);
  // Blocks until ticket t has completed.
  void wait(Ticket t);
  // After the caller synchronised the stream: every ticket issued is complete.
  void markAllDone();

 private:
  struct Pending {
    Ticket ticket;
    cudaEvent_t event;
  };
  cudaEvent_t takeEvent();
  void retireFront();  // the oldest pending ticket is complete: its event goes back
  Pending& front() { return ring_[head_]; }

  cudaStream_t stream_;
  mutable std::mutex mu_;
  std::vector<Pending> ring_;  // pending tickets, oldest at head_, count_ of them
  size_t head_ = 0;
  size_t count_ = 0;
  std::vector<cudaEvent_t> free_;
  std::vector<cudaEvent_t> all_;  // every event made, destroyed with this
  Ticket last_ = 0;
  Ticket completed_ = 0;  // every ticket <= completed_ is known complete
};

}  // namespace arl::gpu
