#include "exec/sent_bytes.h"

#include <algorithm>

namespace arl {

void SentTally::add(const TelemetryEvent& e) {
  if (e.kind != EventKind::IterationEnd && e.kind != EventKind::SendEnd) return;
  RankSent& r = byRank_[e.rank];
  if (e.kind == EventKind::SendEnd) {
    ++r.sendEnds;
    r.sendEndBytes += e.bytes;
    return;
  }
  if (r.iterations > 0 && e.bytes != r.bytes) r.varies = true;
  r.bytes = r.iterations == 0 ? e.bytes : std::max(r.bytes, e.bytes);
  ++r.iterations;
}

void SentTally::add(const std::vector<TelemetryEvent>& events) {
  for (const TelemetryEvent& e : events) add(e);
}

std::vector<RankSent> SentTally::ranks(int nranks) const {
  std::vector<RankSent> out(static_cast<size_t>(std::max(nranks, 0)));
  for (const auto& [rank, sent] : byRank_) {
    if (rank >= 0 && rank < nranks) out[static_cast<size_t>(rank)] = sent;
  }
  return out;
}

std::vector<RankSent> sentOf(const std::vector<TelemetryEvent>& events, int nranks) {
  SentTally t;
  t.add(events);
  return t.ranks(nranks);
}

}  // namespace arl
