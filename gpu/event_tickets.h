// Tickets over several CUDA streams (Backend::Ticket). issue() plans an operation with
// StreamPlan (backend/stream_plan.h): its lane's stream first waits for the events of the
// earlier operations on other streams it conflicts with (cudaStreamWaitEvent), then the
// operation is enqueued, then an event is recorded after it: ticket k is complete when its
// event is. One stream runs in order, so a complete ticket completes every earlier one on its
// stream, and says nothing of other streams. Events come from a pool and go back to it once
// their ticket is known complete (after the first operations nothing is allocated per
// ticket); an operation known complete is also forgotten by the plan.
//
// With a DeviceClock the events are timed: when a ticket is found complete, its event's
// device time is kept (the newest kStamps of them), for deviceEndNs(). With recording on,
// an event before each operation times its start as well (for tests and benchmarks of the
// overlap: opTimes()). Private to gpu/. Thread-safe.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/stream_plan.h"
#include "gpu/cuda_backend.h"
#include "gpu/device_clock.h"

namespace arl::gpu {

class EventTickets {
 public:
  using Ticket = uint64_t;
  static constexpr size_t kStamps = 4096;

  // `streams`: 1 to 3, indexed as StreamPlan numbers them. `clock` (may be null: untimed
  // events) must outlive this.
  EventTickets(std::vector<cudaStream_t> streams, DeviceClock* clock);
  // Destroys the events; the streams must have been synchronised (the backend does it).
  ~EventTickets();
  EventTickets(const EventTickets&) = delete;
  EventTickets& operator=(const EventTickets&) = delete;

  // Enqueues one operation on `lane`'s stream, after the operations it must wait for:
  // `enqueue(stream)` issues the work itself. Returns its ticket (from 1). When enqueue
  // throws, the ticket is still recorded (after nothing) and the exception passes on.
  Ticket issue(Lane lane, std::span<const MemRange> reads, std::span<const MemRange> writes,
               const std::function<void(cudaStream_t)>& enqueue);
  // Has ticket t completed? Never blocks. Asking about a ticket never issued is a bug.
  bool done(Ticket t);
  // Blocks until ticket t has completed.
  void wait(Ticket t);
  // After the caller synchronised every stream: every ticket issued is complete.
  void markAllDone();
  // The device end time of a ticket found complete, on the host's steady clock; nullopt
  // without a clock, or when it is older than the last kStamps found complete.
  std::optional<int64_t> deviceEndNs(Ticket t);

  // Start and end times of every operation issued while recording, once complete.
  void recordOpTimes(bool on);
  std::vector<OpTime> takeOpTimes();

  int streams() const { return static_cast<int>(streams_.size()); }

 private:
  struct Pending {
    Ticket ticket = 0;
    cudaEvent_t end = nullptr;
    cudaEvent_t start = nullptr;  // recording only
    Lane lane = Lane::Compute;
  };
  struct Stamp {
    Ticket ticket = 0;
    int64_t deviceNs = 0;
  };

  cudaEvent_t takeEvent();
  void waitForConflicts(cudaStream_t s, const std::vector<StreamPlan::Wait>& waits);
  void retireFront(int stream);  // its oldest pending ticket is complete
  void retireCompleted(int stream, size_t atMost);
  std::deque<Pending>& pendingOf(int stream) { return pending_[static_cast<size_t>(stream)]; }

  std::vector<cudaStream_t> streams_;
  DeviceClock* clock_;
  mutable std::mutex mu_;
  StreamPlan plan_;
  std::vector<std::deque<Pending>> pending_;  // per stream, oldest first
  std::unordered_map<Ticket, int> streamOf_;  // pending tickets
  std::vector<cudaEvent_t> free_;
  std::vector<cudaEvent_t> all_;  // every event made, destroyed with this
  Ticket last_ = 0;
  std::array<Stamp, kStamps> stamps_{};
  bool recording_ = false;
  std::vector<OpTime> opTimes_;
};

}  // namespace arl::gpu
