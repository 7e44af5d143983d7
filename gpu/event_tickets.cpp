#include "gpu/event_tickets.h"

#include "base/errors.h"
#include "gpu/cuda_check.h"

namespace arl::gpu {

namespace {
constexpr size_t kInitialEvents = 64;
}

EventTickets::EventTickets(cudaStream_t stream) : stream_(stream) {
  ring_.resize(kInitialEvents);
  free_.reserve(kInitialEvents);
  all_.reserve(kInitialEvents);
}

EventTickets::~EventTickets() {
  for (cudaEvent_t e : all_) (void)cudaEventDestroy(e);
}

cudaEvent_t EventTickets::takeEvent() {
  if (!free_.empty()) {
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  ARL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  all_.push_back(e);
  if (free_.capacity() < all_.size()) free_.reserve(all_.capacity());
  return e;
}

EventTickets::Ticket EventTickets::record() {
  std::lock_guard lock(mu_);
  if (count_ == ring_.size()) {
    // Grow the ring, keeping the pending tickets in order from index 0.
    std::vector<Pending> bigger(ring_.size() * 2);
    for (size_t i = 0; i < count_; ++i) bigger[i] = ring_[(head_ + i) % ring_.size()];
    ring_ = std::move(bigger);
    head_ = 0;
  }
  cudaEvent_t e = takeEvent();
  const cudaError_t rc = cudaEventRecord(e, stream_);
  if (rc != cudaSuccess) {
    free_.push_back(e);
    detail::check(rc, "cudaEventRecord");
  }
  ring_[(head_ + count_) % ring_.size()] = {++last_, e};
  ++count_;
  return last_;
}

EventTickets::Ticket EventTickets::last() const {
  std::lock_guard lock(mu_);
  return last_;
}

void EventTickets::retireFront() {
  completed_ = front().ticket;
  free_.push_back(front().event);
  head_ = (head_ + 1) % ring_.size();
  --count_;
}

bool EventTickets::done(Ticket t) {
  std::lock_guard lock(mu_);
  ARL_ENFORCE(t >= 1 && t <= last_, "ticket " << t << " was never issued (last " << last_ << ")");
  while (t > completed_) {
    const cudaError_t rc = cudaEventQuery(front().event);
    if (rc == cudaErrorNotReady) return false;
    detail::check(rc, "cudaEventQuery");
    retireFront();
  }
  return true;
}

void EventTickets::wait(Ticket t) {
  std::lock_guard lock(mu_);
  ARL_ENFORCE(t >= 1 && t <= last_, "ticket " << t << " was never issued (last " << last_ << ")");
  if (t <= completed_) return;
  // Pending tickets are consecutive: t's event is (t - oldest) places after the oldest.
  const size_t at = (head_ + static_cast<size_t>(t - front().ticket)) % ring_.size();
  ARL_CUDA_CHECK(cudaEventSynchronize(ring_[at].event));
  while (count_ > 0 && front().ticket <= t) retireFront();
}

void EventTickets::markAllDone() {
  std::lock_guard lock(mu_);
  while (count_ > 0) retireFront();
}

}  // namespace arl::gpu
