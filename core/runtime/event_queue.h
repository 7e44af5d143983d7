// The queue between the coordinator's thread and its client (coordinator.h): control events
// always go in; telemetry and iteration reports only while they fit a capacity, so a client
// that falls behind costs memory up to that bound and never stalls the coordinator. Private
// to runtime/.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "runtime/run_types.h"

namespace arl {

class EventQueue {
 public:
  EventQueue(size_t capacity, std::function<void()> onReady)
      : capacity_(capacity), onReady_(std::move(onReady)) {}

  // Always queues `ev` (a control event).
  void push(CoordinatorEvent ev) { add(std::move(ev), 0); }

  // Queues `ev` if `weight` more fits under the capacity; false (and `ev` untouched) if not.
  bool tryPush(CoordinatorEvent& ev, size_t weight) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (load_ + weight > capacity_) return false;
    }
    add(std::move(ev), weight);
    return true;
  }

  // Queues the events of `evs`, in order, while `weightEach` more fits under the capacity,
  // with one wake-up for all of them; returns how many it queued (moved out of `evs`).
  size_t tryPushAll(std::vector<CoordinatorEvent>& evs, size_t weightEach) {
    size_t n = 0;
    bool wasEmpty = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      wasEmpty = items_.empty();
      for (; n < evs.size() && load_ + weightEach <= capacity_; ++n) {
        load_ += weightEach;
        items_.push_back(Item{std::move(evs[n]), weightEach});
      }
    }
    if (n > 0 && wasEmpty) wake();
    return n;
  }

  // Moves up to `max` events into `out`, waiting up to `wait` for the first.
  size_t take(std::vector<CoordinatorEvent>& out, std::chrono::milliseconds wait, size_t max) {
    std::unique_lock<std::mutex> lock(mu_);
    if (items_.empty() && wait.count() > 0) {
      cv_.wait_for(lock, wait, [&] { return !items_.empty(); });
    }
    size_t n = 0;
    while (n < max && !items_.empty()) {
      load_ -= items_.front().weight;
      out.push_back(std::move(items_.front().ev));
      items_.pop_front();
      ++n;
    }
    return n;
  }

  bool empty() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.empty();
  }

 private:
  struct Item {
    CoordinatorEvent ev;
    size_t weight;
  };

  // Wakes the client only when the queue turns non-empty: take() waits only on an empty
  // queue, and a wake-up per event made the client and the coordinator take turns on a core
  // for every iteration report of a batch, while the ranks ran on the same cores.
  void add(CoordinatorEvent ev, size_t weight) {
    bool wasEmpty = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      wasEmpty = items_.empty();
      load_ += weight;
      items_.push_back(Item{std::move(ev), weight});
    }
    if (wasEmpty) wake();
  }

  void wake() {
    cv_.notify_all();
    if (onReady_) onReady_();
  }

  const size_t capacity_;
  std::function<void()> onReady_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  size_t load_ = 0;
};

}  // namespace arl
