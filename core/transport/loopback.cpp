#include "transport/loopback.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "base/clock.h"
#include "base/errors.h"

namespace arl {

namespace {

class LoopbackMessage final : public InMessage {
 public:
  LoopbackMessage(const ChunkHeader& h, std::vector<unsigned char> payload)
      : header_(h), payload_(std::move(payload)) {}
  const ChunkHeader& header() const override { return header_; }
  const void* data() const override { return payload_.data(); }
  size_t size() const override { return payload_.size(); }

 private:
  ChunkHeader header_;
  std::vector<unsigned char> payload_;
};

}  // namespace

int LoopbackTransport::size() const { return fabric_.size(); }

std::shared_ptr<SendCompletion> LoopbackTransport::send(int peer, const ChunkHeader& h,
                                                        const void* data, size_t bytes) {
  const int64_t leftNs = fabric_.send(rank_, peer, h, data, bytes);
  if (leftNs == 0) return completedSend();  // the payload was copied into the receiver's queue
  LoopbackFabric* f = &fabric_;
  const int me = rank_;
  return std::make_shared<PacedCompletion>(
      leftNs, [f, me] { return f->stopped(me); }, rank_, peer, h.step);
}

std::unique_ptr<InMessage> LoopbackTransport::recv(int peer, uint32_t step,
                                                   std::chrono::milliseconds timeout) {
  return fabric_.recv(rank_, peer, step, timeout);
}

bool LoopbackTransport::ready(int peer, uint32_t step) {
  (void)step;
  return fabric_.ready(rank_, peer);
}

void LoopbackTransport::abort() { fabric_.abortRank(rank_); }

LoopbackFabric::LoopbackFabric(int nranks, const LinkShaping& shaping) {
  if (nranks < 1) throw ConfigError("loopback fabric needs at least 1 rank");
  checkShaping(shaping, nranks);
  failed_ = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    failed_[static_cast<size_t>(r)].store(false);
    auto box = std::make_unique<Inbox>();
    box->from.resize(static_cast<size_t>(nranks));
    inboxes_.push_back(std::move(box));
    transports_.push_back(std::make_unique<LoopbackTransport>(*this, r));
  }
  if (!shaping.empty()) {
    for (int r = 0; r < nranks; ++r) pacers_.push_back(Pacer::make(shaping, r, nranks));
  }
}

LoopbackFabric::~LoopbackFabric() = default;

LoopbackTransport& LoopbackFabric::transport(int rank) {
  ARL_ENFORCE(rank >= 0 && rank < size(), "rank " << rank << " of " << size());
  return *transports_[static_cast<size_t>(rank)];
}

bool LoopbackFabric::failed(int rank) const {
  return failed_[static_cast<size_t>(rank)].load(std::memory_order_acquire);
}

bool LoopbackFabric::stopped(int rank) const {
  return failed(rank) || inboxes_[static_cast<size_t>(rank)]->aborted.load();
}

void LoopbackFabric::fail(int rank) {
  ARL_ENFORCE(rank >= 0 && rank < size(), "rank " << rank << " of " << size());
  failed_[static_cast<size_t>(rank)].store(true, std::memory_order_release);
  // Wake every receiver: any of them may be waiting on the failed rank. Taking the lock
  // before notifying closes the window between a waiter's check and its wait.
  for (auto& box : inboxes_) {
    std::lock_guard<std::mutex> lock(box->mu);
    box->cv.notify_all();
  }
}

void LoopbackFabric::abortRank(int rank) {
  Inbox& box = *inboxes_[static_cast<size_t>(rank)];
  std::lock_guard<std::mutex> lock(box.mu);
  box.aborted = true;
  box.cv.notify_all();
}

void LoopbackFabric::abort() {
  for (int r = 0; r < size(); ++r) abortRank(r);
}

void LoopbackFabric::checkRank(int rank, const char* what) const {
  ARL_ENFORCE(rank >= 0 && rank < size(), what << " rank " << rank << " of " << size());
}

int64_t LoopbackFabric::send(int src, int dst, const ChunkHeader& h, const void* data,
                             size_t bytes) {
  checkRank(dst, "send to");
  if (failed(src)) throw PeerError(src, -1, h.step, "this rank has failed");
  if (failed(dst)) {
    throw PeerError(src, dst, h.step, "rank " + std::to_string(dst) + " failed");
  }
  Message m;
  int64_t leftNs = 0;
  const std::optional<uint64_t> paced = pacedBytesOf(h.magic, data, bytes);
  if (!pacers_.empty() && paced) {
    const Pacer::SendSlot slot = pacers_[static_cast<size_t>(src)]->claimSend(
        dst, static_cast<size_t>(*paced), steadyNowNs());
    m.startNs = slot.startNs;
    leftNs = slot.leftNs;
  } else {
    m.visibleAtNs = 0;
  }
  // Copy outside the lock: the copy is the expensive part and touches no shared state.
  m.header = h;
  m.payload.resize(bytes);
  if (bytes > 0) std::memcpy(m.payload.data(), data, bytes);

  Inbox& box = *inboxes_[static_cast<size_t>(dst)];
  {
    std::lock_guard<std::mutex> lock(box.mu);
    if (box.aborted) {
      throw PeerError(src, dst, h.step, "run aborted while sending to rank " + std::to_string(dst));
    }
    box.from[static_cast<size_t>(src)].queue.push_back(std::move(m));
  }
  box.cv.notify_all();
  return leftNs;
}

void LoopbackFabric::paceReceive(int dst, int src, uint32_t step, int64_t visibleAtNs) {
  if (!paceUntil(visibleAtNs, [&] { return stopped(dst); })) {
    throw PeerError(dst, src, step,
                    "run aborted while data from rank " + std::to_string(src) + " for step " +
                        std::to_string(step) + " was on its way");
  }
}

bool LoopbackFabric::ready(int dst, int src) {
  checkRank(src, "probe of");
  Inbox& box = *inboxes_[static_cast<size_t>(dst)];
  std::lock_guard<std::mutex> lock(box.mu);
  Channel& ch = box.from[static_cast<size_t>(src)];
  if (box.aborted || ch.queue.empty()) return false;
  Message& m = ch.queue.front();
  // Claimed once, here or in recv(): only this rank's thread takes from its channels.
  if (m.visibleAtNs < 0) {
    m.visibleAtNs =
        pacers_[static_cast<size_t>(dst)]->claimReceive(src, m.payload.size(), m.startNs);
  }
  return m.visibleAtNs <= steadyNowNs();
}

std::unique_ptr<InMessage> LoopbackFabric::recv(int dst, int src, uint32_t step,
                                                std::chrono::milliseconds timeout) {
  checkRank(src, "receive from");
  Inbox& box = *inboxes_[static_cast<size_t>(dst)];
  Channel& ch = box.from[static_cast<size_t>(src)];
  const auto deadline = deadlineAfter(timeout);
  std::unique_lock<std::mutex> lock(box.mu);
  for (;;) {
    if (box.aborted) {
      throw PeerError(dst, src, step,
                      "run aborted while waiting for data from rank " + std::to_string(src) +
                          " for step " + std::to_string(step));
    }
    if (failed(dst)) throw PeerError(dst, -1, step, "this rank has failed");
    // Woken by a send or an abort; the 1 s cap keeps an unbounded wait off the clock's edge.
    auto wakeAt = std::min(deadline, SteadyClock::now() + std::chrono::seconds(1));
    if (!ch.queue.empty()) {
      Message& m = ch.queue.front();
      int64_t now = steadyNowNs();
      if (m.visibleAtNs < 0) {
        // Only this rank's thread takes from its channels: the front stays the front.
        const auto paced = pacedBytesOf(m.header.magic, m.payload.data(), m.payload.size());
        m.visibleAtNs = paced ? pacers_[static_cast<size_t>(dst)]->claimReceive(
                                    src, static_cast<size_t>(*paced), m.startNs)
                              : 0;
        if (m.visibleAtNs > now) {
          const int64_t visible = m.visibleAtNs;
          lock.unlock();
          paceReceive(dst, src, step, visible);
          lock.lock();
          continue;
        }
        now = steadyNowNs();
      }
      if (m.visibleAtNs <= now) {
        auto out = std::make_unique<LoopbackMessage>(m.header, std::move(m.payload));
        ch.queue.pop_front();
        return out;
      }
      const auto visible = SteadyClock::now() + std::chrono::nanoseconds(m.visibleAtNs - now);
      wakeAt = std::min(wakeAt, visible);
    } else if (failed(src)) {
      throw PeerError(dst, src, step, "rank " + std::to_string(src) + " failed");
    }
    if (SteadyClock::now() >= deadline) {
      throw PeerError(dst, src, step,
                      "no data from rank " + std::to_string(src) + " for step " +
                          std::to_string(step) + " within " + formatDuration(timeout));
    }
    box.cv.wait_until(lock, wakeAt);
  }
}

}  // namespace arl
