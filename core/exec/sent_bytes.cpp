#include "exec/sent_bytes.h"

#include <algorithm>

namespace arl {

namespace {

void count(RankSent& r, const TelemetryEvent& e) {
  if (e.kind == EventKind::SendEnd) {
    ++r.sendEnds;
    r.sendEndBytes += e.bytes;
    return;
  }
  if (e.kind != EventKind::IterationEnd) return;
  if (r.iterations > 0 && e.bytes != r.bytes) r.varies = true;
  r.bytes = r.iterations == 0 ? e.bytes : std::max(r.bytes, e.bytes);
  ++r.iterations;
}

}  // namespace

SentTally::SentTally(int nranks) : ranks_(static_cast<size_t>(std::max(nranks, 0))) {}

void SentTally::add(const TelemetryEvent& e) {
  if (e.rank >= 0 && static_cast<size_t>(e.rank) < ranks_.size()) {
    count(ranks_[static_cast<size_t>(e.rank)], e);
  }
}

void SentTally::add(int rank, std::span<const TelemetryEvent> events) {
  if (rank < 0 || static_cast<size_t>(rank) >= ranks_.size()) return;
  RankSent& r = ranks_[static_cast<size_t>(rank)];
  for (const TelemetryEvent& e : events) count(r, e);
}

std::vector<RankSent> sentOf(const std::vector<TelemetryEvent>& events, int nranks) {
  SentTally t(nranks);
  for (const TelemetryEvent& e : events) t.add(e);
  return t.ranks();
}

}  // namespace arl
