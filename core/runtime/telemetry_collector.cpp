// TelemetryCollector (telemetry_collector.h): a k-way merge of the ranks' time-ordered streams.
#include "runtime/telemetry_collector.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "base/errors.h"
#include "base/limits.h"

namespace arl {

void sortByTime(std::vector<TelemetryEvent>& events) {
  std::stable_sort(events.begin(), events.end(),
                   [](const TelemetryEvent& x, const TelemetryEvent& y) { return x.tNs < y.tNs; });
}

void TelemetryCollector::add(int rank, std::vector<TelemetryEvent>&& events) {
  ARL_ENFORCE(rank >= 0 && rank < kMaxRanks, "telemetry of rank " << rank);
  if (events.empty()) return;
  const auto r = static_cast<size_t>(rank);
  if (batches_.size() <= r) batches_.resize(r + 1);
  size_ += events.size();
  batches_[r].push_back(std::move(events));
}

namespace {

bool inTimeOrder(const std::vector<std::vector<TelemetryEvent>>& batches) {
  int64_t last = std::numeric_limits<int64_t>::min();
  for (const auto& b : batches) {
    for (const TelemetryEvent& e : b) {
      if (e.tNs < last) return false;
      last = e.tNs;
    }
  }
  return true;
}

// One rank's events as one run in time order: its batches as they are when they already
// are in order, else concatenated and sorted.
void orderRank(std::vector<std::vector<TelemetryEvent>>& batches) {
  if (inTimeOrder(batches)) return;
  std::vector<TelemetryEvent> all;
  for (auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  sortByTime(all);
  batches.clear();
  batches.push_back(std::move(all));
}

}  // namespace

std::vector<TelemetryEvent> TelemetryCollector::take() {
  // A cursor per rank with events: (rank, batch, position). The heap's top is the cursor
  // whose next event is the earliest, the lower rank on a tie.
  struct Cursor {
    size_t rank = 0;
    size_t batch = 0;
    size_t pos = 0;
  };
  std::vector<Cursor> heap;
  for (size_t r = 0; r < batches_.size(); ++r) {
    if (batches_[r].empty()) continue;
    orderRank(batches_[r]);
    heap.push_back({r, 0, 0});
  }
  const auto at = [&](const Cursor& c) -> const TelemetryEvent& {
    return batches_[c.rank][c.batch][c.pos];
  };
  const auto later = [&](const Cursor& a, const Cursor& b) {
    const int64_t ta = at(a).tNs;
    const int64_t tb = at(b).tNs;
    return ta != tb ? ta > tb : a.rank > b.rank;
  };
  std::make_heap(heap.begin(), heap.end(), later);
  std::vector<TelemetryEvent> out;
  out.reserve(size_);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Cursor& c = heap.back();
    const auto& rankBatches = batches_[c.rank];
    // Take this rank's events while they are no later than the next rank's earliest.
    const bool alone = heap.size() == 1;
    const int64_t bound = alone ? std::numeric_limits<int64_t>::max() : at(heap.front()).tNs;
    const size_t boundRank = alone ? 0 : heap.front().rank;
    for (;;) {
      const TelemetryEvent& e = at(c);
      if (!alone && (e.tNs > bound || (e.tNs == bound && c.rank > boundRank))) break;
      out.push_back(e);
      if (++c.pos == rankBatches[c.batch].size()) {
        c.pos = 0;
        if (++c.batch == rankBatches.size()) break;
      }
    }
    if (c.batch == rankBatches.size()) {
      heap.pop_back();
    } else {
      std::push_heap(heap.begin(), heap.end(), later);
    }
  }
  batches_.clear();
  size_ = 0;
  return out;
}

}  // namespace arl
