#include "gpu/event_tickets.h"

#include "base/errors.h"
#include "gpu/cuda_check.h"

namespace arl::gpu {

namespace {
// Completed operations looked for on a stream at each issue, so that tickets nobody asks
// about (a copy-in inside a reduction) do not pile up.
constexpr size_t kRetireAtIssue = 8;
}  // namespace

EventTickets::EventTickets(std::vector<cudaStream_t> streams, DeviceClock* clock)
    : streams_(std::move(streams)),
      clock_(clock),
      plan_(static_cast<int>(streams_.size())),
      pending_(streams_.size()) {}

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
  // Timed events cost a little more to record; they are what puts device times in telemetry.
  ARL_CUDA_CHECK(
      cudaEventCreateWithFlags(&e, clock_ != nullptr ? cudaEventDefault : cudaEventDisableTiming));
  all_.push_back(e);
  if (free_.capacity() < all_.size()) free_.reserve(all_.capacity());
  return e;
}

void EventTickets::waitForConflicts(cudaStream_t s, const std::vector<StreamPlan::Wait>& waits) {
  for (const StreamPlan::Wait& w : waits) {
    // The plan forgets what was found complete, so a wait names a pending ticket; one that
    // is not pending has completed and needs no wait.
    for (const Pending& p : pendingOf(w.stream)) {
      if (p.ticket != w.id) continue;
      ARL_CUDA_CHECK(cudaStreamWaitEvent(s, p.end, 0));
      break;
    }
  }
}

EventTickets::Ticket EventTickets::issue(Lane lane, std::span<const MemRange> reads,
                                         std::span<const MemRange> writes,
                                         const std::function<void(cudaStream_t)>& enqueue) {
  std::lock_guard lock(mu_);
  if (clock_ != nullptr) clock_->maybePair();
  const StreamPlan::Planned p = plan_.add(lane, reads, writes);
  ARL_ENFORCE(p.id == last_ + 1, "ticket " << p.id << " after " << last_);
  cudaStream_t s = streams_[static_cast<size_t>(p.stream)];
  retireCompleted(p.stream, kRetireAtIssue);
  Pending rec;
  rec.ticket = p.id;
  rec.lane = lane;
  rec.end = takeEvent();
  if (recording_) {
    rec.start = takeEvent();
  }
  // Whatever fails below, the ticket exists once planned: later operations may wait for it.
  const auto record = [&] {
    last_ = p.id;
    streamOf_[p.id] = p.stream;
    pendingOf(p.stream).push_back(rec);
    detail::check(cudaEventRecord(rec.end, s), "cudaEventRecord");
  };
  try {
    waitForConflicts(s, p.waits);
    if (rec.start != nullptr) ARL_CUDA_CHECK(cudaEventRecord(rec.start, s));
    enqueue(s);
  } catch (...) {
    record();
    throw;
  }
  record();
  return p.id;
}

void EventTickets::retireFront(int stream) {
  std::deque<Pending>& q = pendingOf(stream);
  const Pending p = q.front();
  q.pop_front();
  streamOf_.erase(p.ticket);
  plan_.completed(stream, p.ticket);
  if (clock_ != nullptr) {
    try {
      const int64_t end = clock_->deviceNs(p.end);
      stamps_[p.ticket % kStamps] = {p.ticket, end};
      if (p.start != nullptr) {
        opTimes_.push_back({p.ticket, p.lane, stream, clock_->toHost(clock_->deviceNs(p.start)),
                            clock_->toHost(end)});
      }
    } catch (const CudaError&) {
      // An event whose record failed has no time: the ticket is reported untimed.
    }
  }
  free_.push_back(p.end);
  if (p.start != nullptr) free_.push_back(p.start);
}

void EventTickets::retireCompleted(int stream, size_t atMost) {
  std::deque<Pending>& q = pendingOf(stream);
  for (size_t i = 0; i < atMost && !q.empty(); ++i) {
    const cudaError_t rc = cudaEventQuery(q.front().end);
    if (rc == cudaErrorNotReady) return;
    detail::check(rc, "cudaEventQuery");
    retireFront(stream);
  }
}

bool EventTickets::done(Ticket t) {
  std::lock_guard lock(mu_);
  ARL_ENFORCE(t >= 1 && t <= last_, "ticket " << t << " was never issued (last " << last_ << ")");
  const auto it = streamOf_.find(t);
  if (it == streamOf_.end()) return true;
  const int s = it->second;
  std::deque<Pending>& q = pendingOf(s);
  while (!q.empty() && q.front().ticket <= t) {
    const cudaError_t rc = cudaEventQuery(q.front().end);
    if (rc == cudaErrorNotReady) return false;
    detail::check(rc, "cudaEventQuery");
    retireFront(s);
  }
  return true;
}

void EventTickets::wait(Ticket t) {
  std::lock_guard lock(mu_);
  ARL_ENFORCE(t >= 1 && t <= last_, "ticket " << t << " was never issued (last " << last_ << ")");
  const auto it = streamOf_.find(t);
  if (it == streamOf_.end()) return;
  const int s = it->second;
  std::deque<Pending>& q = pendingOf(s);
  for (const Pending& p : q) {
    if (p.ticket != t) continue;
    ARL_CUDA_CHECK(cudaEventSynchronize(p.end));
    break;
  }
  while (!q.empty() && q.front().ticket <= t) retireFront(s);
}

void EventTickets::markAllDone() {
  std::lock_guard lock(mu_);
  for (int s = 0; s < streams(); ++s) {
    while (!pendingOf(s).empty()) retireFront(s);
  }
}

std::optional<int64_t> EventTickets::deviceEndNs(Ticket t) {
  std::lock_guard lock(mu_);
  if (clock_ == nullptr) return std::nullopt;
  const Stamp& st = stamps_[t % kStamps];
  if (st.ticket != t) return std::nullopt;
  return clock_->toHost(st.deviceNs);
}

void EventTickets::recordOpTimes(bool on) {
  std::lock_guard lock(mu_);
  recording_ = on;
}

std::vector<OpTime> EventTickets::takeOpTimes() {
  std::lock_guard lock(mu_);
  return std::move(opTimes_);
}

}  // namespace arl::gpu
