#include "backend/stream_plan.h"

#include <algorithm>
#include <string>

#include "base/errors.h"

namespace arl {

std::string_view toString(Lane l) {
  switch (l) {
    case Lane::Compute: return "compute";
    case Lane::CopyIn: return "copy-in";
    case Lane::CopyOut: return "copy-out";
  }
  return "?";
}

StreamPlan::StreamPlan(int streams, size_t maxHistory)
    : streams_(streams), maxHistory_(std::max<size_t>(maxHistory, 1)) {
  if (streams < 1 || streams > kMaxStreams) {
    throw ConfigError("streams: " + std::to_string(streams) + " is not 1, 2 or 3");
  }
  history_.resize(static_cast<size_t>(streams));
  dropped_.assign(static_cast<size_t>(streams), 0);
  completed_.assign(static_cast<size_t>(streams), 0);
}

int StreamPlan::streamOf(Lane lane) const {
  if (streams_ == 1 || lane == Lane::Compute) return 0;
  if (streams_ == 2) return 1;
  return lane == Lane::CopyIn ? 1 : 2;
}

bool StreamPlan::conflicts(const Rec& earlier, std::span<const MemRange> reads,
                           std::span<const MemRange> writes) {
  const auto any = [](std::span<const MemRange> a, std::span<const MemRange> b) {
    for (const MemRange& x : a) {
      for (const MemRange& y : b) {
        if (x.overlaps(y)) return true;
      }
    }
    return false;
  };
  return any(earlier.writes, reads) || any(earlier.writes, writes) || any(earlier.reads, writes);
}

StreamPlan::Planned StreamPlan::add(Lane lane, std::span<const MemRange> reads,
                                    std::span<const MemRange> writes) {
  Planned p;
  p.id = next_++;
  p.stream = streamOf(lane);
  for (int t = 0; t < streams_; ++t) {
    if (t == p.stream) continue;
    const auto& h = history_[static_cast<size_t>(t)];
    uint64_t waitFor = 0;
    for (auto it = h.rbegin(); it != h.rend(); ++it) {
      if (conflicts(*it, reads, writes)) {
        waitFor = it->id;
        break;
      }
    }
    // Nothing conflicting in the history: an operation dropped from it unchecked may still.
    const size_t ti = static_cast<size_t>(t);
    if (waitFor == 0 && dropped_[ti] > completed_[ti]) waitFor = dropped_[ti];
    if (waitFor != 0) p.waits.push_back({t, waitFor});
  }
  auto& mine = history_[static_cast<size_t>(p.stream)];
  mine.push_back({p.id, {reads.begin(), reads.end()}, {writes.begin(), writes.end()}});
  if (mine.size() > maxHistory_) {
    dropped_[static_cast<size_t>(p.stream)] = mine.front().id;
    mine.pop_front();
  }
  return p;
}

void StreamPlan::completed(int stream, uint64_t id) {
  ARL_ENFORCE(stream >= 0 && stream < streams_, "stream " << stream << " of " << streams_);
  const auto s = static_cast<size_t>(stream);
  completed_[s] = std::max(completed_[s], id);
  auto& h = history_[s];
  while (!h.empty() && h.front().id <= id) h.pop_front();
}

size_t StreamPlan::held(int stream) const {
  ARL_ENFORCE(stream >= 0 && stream < streams_, "stream " << stream << " of " << streams_);
  return history_[static_cast<size_t>(stream)].size();
}

}  // namespace arl
