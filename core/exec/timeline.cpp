#include "exec/timeline.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

namespace arl {

namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

// a - b, saturated: timestamps come from other machines and files.
int64_t minus(int64_t a, int64_t b) {
  int64_t r = 0;
  if (!__builtin_sub_overflow(a, b, &r)) return r;
  return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

using Events = std::vector<TelemetryEvent>;
using Indices = std::vector<size_t>;

// A send's SendStart and SendEnd share these.
auto sendKey(const TelemetryEvent& e) {
  return std::make_tuple(e.runId, e.rank, e.iteration, e.peer, e.step, e.chunk, e.offset);
}

// A message's signature (see timeline.h), from either end.
auto signature(const TelemetryEvent& e, int sender, int receiver) {
  return std::make_tuple(e.runId, sender, receiver, e.iteration, e.step, e.chunk, e.bytes,
                         e.provenance);
}
auto sentSignature(const TelemetryEvent& e) { return signature(e, e.rank, e.peer); }
auto receivedSignature(const TelemetryEvent& e) { return signature(e, e.peer, e.rank); }

// Sorts `a` and `b` (event indices in time order) by key, keeping time order within a key, and
// calls group(aFirst, aCount, bFirst, bCount) for every key found on either side.
template <typename KeyA, typename KeyB, typename Group>
void joinByKey(const Events& ev, Indices a, Indices b, KeyA keyA, KeyB keyB, Group group) {
  std::stable_sort(a.begin(), a.end(),
                   [&](size_t x, size_t y) { return keyA(ev[x]) < keyA(ev[y]); });
  std::stable_sort(b.begin(), b.end(),
                   [&](size_t x, size_t y) { return keyB(ev[x]) < keyB(ev[y]); });
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    const bool takeA = j == b.size() || (i < a.size() && !(keyB(ev[b[j]]) < keyA(ev[a[i]])));
    const bool takeB = i == a.size() || (j < b.size() && !(keyA(ev[a[i]]) < keyB(ev[b[j]])));
    size_t ni = i, nj = j;
    if (takeA) {
      while (ni < a.size() && keyA(ev[a[ni]]) == keyA(ev[a[i]])) ++ni;
    }
    if (takeB) {
      while (nj < b.size() && keyB(ev[b[nj]]) == keyB(ev[b[j]])) ++nj;
    }
    group(a.data() + i, ni - i, b.data() + j, nj - j);
    i = ni;
    j = nj;
  }
}

struct Sorted {
  Indices byTime;  // every event, by time (then position)
  Indices sendStarts, sendEnds, recvEnds;
};

Sorted sortEvents(const Events& ev) {
  Sorted s;
  s.byTime.resize(ev.size());
  std::iota(s.byTime.begin(), s.byTime.end(), size_t{0});
  std::stable_sort(s.byTime.begin(), s.byTime.end(),
                   [&](size_t x, size_t y) { return ev[x].tNs < ev[y].tNs; });
  for (size_t i : s.byTime) {
    switch (ev[i].kind) {
      case EventKind::SendStart: s.sendStarts.push_back(i); break;
      case EventKind::SendEnd: s.sendEnds.push_back(i); break;
      case EventKind::RecvEnd: s.recvEnds.push_back(i); break;
      default: break;
    }
  }
  return s;
}

// sendEnd[i]: the SendEnd event of SendStart event i (kNone when lost or not a SendStart).
Indices pairSendEnds(const Events& ev, const Sorted& s, TimelineStats& stats) {
  Indices sendEnd(ev.size(), kNone);
  joinByKey(ev, s.sendStarts, s.sendEnds, sendKey, sendKey,
            [&](const size_t* a, size_t na, const size_t* b, size_t nb) {
              for (size_t k = 0; k < std::min(na, nb); ++k) sendEnd[a[k]] = b[k];
              if (nb > na) stats.unpairedSendEnds += nb - na;
            });
  return sendEnd;
}

Transfer makeTransfer(const Events& ev, size_t send, size_t sendEnd, size_t recv) {
  const TelemetryEvent& s = ev[send];
  const TelemetryEvent& r = ev[recv];
  Transfer x;
  x.runId = s.runId;
  x.iteration = s.iteration;
  x.step = s.step;
  x.phase = s.phase;
  x.sender = s.rank;
  x.receiver = r.rank;
  x.chunk = s.chunk;
  x.offset = s.offset;
  x.recvOffset = r.offset;
  x.bytes = s.bytes;
  x.provenance = s.provenance;
  x.sendStartNs = s.tNs;
  x.sendEndNs = sendEnd == kNone ? s.tNs : ev[sendEnd].tNs;
  x.recvEndNs = r.tNs;
  x.sendEvent = send;
  x.recvEvent = recv;
  return x;
}

// Whether the k-th send of a signature is the k-th receive: as many of each, and one offset
// difference between sender and receiver for all (the slices of a chunk lie in the same order
// in both ranks' buffers, so a lost slice on each side shows as a changed difference).
bool alignedInOrder(const Events& ev, const size_t* a, size_t na, const size_t* b, size_t nb) {
  if (na != nb) return false;
  for (size_t k = 1; k < na; ++k) {
    if (ev[a[k]].offset - ev[b[k]].offset != ev[a[0]].offset - ev[b[0]].offset) return false;
  }
  return true;
}

// Pairs sends with receives by signature; a signature that does not align pairs nothing.
std::vector<Transfer> pairMessages(const Events& ev, const Sorted& s, const Indices& sendEnd,
                                   TimelineStats& stats) {
  std::vector<Transfer> out;
  joinByKey(ev, s.sendStarts, s.recvEnds, sentSignature, receivedSignature,
            [&](const size_t* a, size_t na, const size_t* b, size_t nb) {
              if (!alignedInOrder(ev, a, na, b, nb)) {
                stats.unmatchedSends += na;
                stats.unmatchedRecvs += nb;
                return;
              }
              for (size_t k = 0; k < na; ++k) {
                out.push_back(makeTransfer(ev, a[k], sendEnd[a[k]], b[k]));
              }
            });
  std::stable_sort(out.begin(), out.end(), [](const Transfer& x, const Transfer& y) {
    return x.sendStartNs < y.sendStartNs;
  });
  stats.transfers = out.size();
  return out;
}

// Walks the events in time order and turns them into intervals.
class IntervalBuilder {
 public:
  IntervalBuilder(const Events& ev, const std::vector<Transfer>& transfers, const Indices& sendEnd)
      : ev_(ev), transfers_(transfers), sendEnd_(sendEnd), transferOf_(ev.size(), -1) {
    for (size_t t = 0; t < transfers.size(); ++t) {
      transferOf_[transfers[t].sendEvent] = static_cast<int64_t>(t);
      transferOf_[transfers[t].recvEvent] = static_cast<int64_t>(t);
    }
  }

  std::vector<Interval> build(const Indices& byTime, const std::vector<IterationTime>& its) {
    iterations(byTime, its);
    for (size_t i : byTime) {
      switch (ev_[i].kind) {
        case EventKind::SendStart: send(i); break;
        case EventKind::SendEnd: break;
        case EventKind::RecvEnd: recv(i); break;
        case EventKind::ReduceEnd: reduce(i); break;
        case EventKind::StepEnd: step(i); break;
        case EventKind::IterationEnd: break;
        case EventKind::NcclColl: collEvents_.push_back(i); break;
        case EventKind::NcclGroupStart:
        case EventKind::NcclKernelStart:
        case EventKind::NcclSendStepStart:
        case EventKind::NcclRecvStepStart: ncclStart_[ncclKey(ev_[i])] = i; break;
        case EventKind::NcclGroupEnd:
        case EventKind::NcclKernelEnd:
        case EventKind::NcclSendStepEnd:
        case EventKind::NcclRecvStepEnd: ncclEnd(i); break;
        case EventKind::ComputeForward: compute(Activity::Forward, i); break;
        case EventKind::ComputeBackward: compute(Activity::Backward, i); break;
        case EventKind::ComputeOptimizer: compute(Activity::Optimizer, i); break;
      }
    }
    ncclColls();
    std::stable_sort(out_.begin(), out_.end(),
                     [](const Interval& a, const Interval& b) { return a.startNs < b.startNs; });
    return std::move(out_);
  }

 private:
  using RankKey = std::tuple<uint64_t, int>;            // run, rank
  using IterKey = std::tuple<uint64_t, int, uint32_t>;  // run, rank, iteration
  using PlaceKey = std::tuple<uint64_t, int, uint32_t, int, uint32_t, uint64_t>;

  void add(Activity a, size_t i, int peer, int64_t start, int64_t end, int64_t transfer = -1) {
    Interval x;
    x.activity = a;
    x.rank = ev_[i].rank;
    x.peer = peer;
    x.startNs = std::min(start, end);
    x.endNs = end;
    x.event = i;
    x.transfer = transfer;
    out_.push_back(x);
  }

  // Iterations are back-dated from their IterationEnd by the time the rank measured. A
  // training step runs a collective per bucket, each ending in an IterationEnd of the step,
  // and ends with its optimizer: the last of those ends it.
  void iterations(const Indices& byTime, const std::vector<IterationTime>& its) {
    std::map<std::pair<int, uint32_t>, int64_t> timeOf;
    for (const IterationTime& t : its) timeOf[{t.rank, t.iteration}] = t.timeNs;
    std::map<IterKey, size_t> lastEnd;
    for (size_t i : byTime) {
      const TelemetryEvent& e = ev_[i];
      if (e.kind == EventKind::IterationEnd || e.kind == EventKind::ComputeOptimizer)
        lastEnd[{e.runId, e.rank, e.iteration}] = i;
    }
    for (const auto& [key, i] : lastEnd) {
      const TelemetryEvent& e = ev_[i];
      auto it = timeOf.find({e.rank, e.iteration});
      if (it == timeOf.end()) continue;
      const int64_t start = minus(e.tNs, std::max<int64_t>(it->second, 0));
      iterStart_[{e.runId, e.rank, e.iteration}] = start;
      add(Activity::Iteration, i, -1, start, e.tNs);
    }
  }

  void send(size_t i) {
    const size_t end = sendEnd_[i];
    add(Activity::Send, i, ev_[i].peer, ev_[i].tNs, end == kNone ? ev_[i].tNs : ev_[end].tNs,
        transferOf_[i]);
  }

  void recv(size_t i) {
    const TelemetryEvent& e = ev_[i];
    int64_t start = e.tNs;
    const int64_t t = transferOf_[i];
    auto prev = prevArrival_.find({e.runId, e.rank});
    if (t >= 0) {
      start = transfers_[static_cast<size_t>(t)].sendStartNs;
      if (prev != prevArrival_.end()) start = std::max(start, prev->second);
    }
    prevArrival_[{e.runId, e.rank}] = e.tNs;
    lastRecvEnd_[{e.runId, e.rank, e.iteration, e.peer, e.chunk, e.offset}] = e.tNs;
    add(Activity::Recv, i, e.peer, start, e.tNs, t);
  }

  void reduce(size_t i) {
    const TelemetryEvent& e = ev_[i];
    int64_t start = e.tNs;
    auto it = lastRecvEnd_.find({e.runId, e.rank, e.iteration, e.peer, e.chunk, e.offset});
    if (it != lastRecvEnd_.end()) {
      start = it->second;
      lastRecvEnd_.erase(it);
    }
    add(Activity::Reduce, i, e.peer, start, e.tNs);
  }

  void step(size_t i) {
    const TelemetryEvent& e = ev_[i];
    const IterKey key{e.runId, e.rank, e.iteration};
    int64_t start = e.tNs;
    if (auto it = lastStepEnd_.find(key); it != lastStepEnd_.end()) {
      start = it->second;
    } else if (auto is = iterStart_.find(key); is != iterStart_.end()) {
      start = is->second;
    }
    lastStepEnd_[key] = e.tNs;
    add(Activity::Step, i, -1, start, e.tNs);
  }

  void compute(Activity a, size_t i) {
    const TelemetryEvent& e = ev_[i];
    add(a, i, -1, computeSpanStartNs(e), e.tNs);
  }

  // An NCCL start and its end share this key: the kind's pair (the start's kind), run, rank,
  // iteration, channel, peer and step (the fields an NCCL event of that pair has).
  using NcclKey = std::tuple<int, uint64_t, int, uint32_t, uint32_t, int, uint32_t>;
  static NcclKey ncclKey(const TelemetryEvent& e) {
    int pair = static_cast<int>(e.kind);
    if (e.kind == EventKind::NcclGroupEnd || e.kind == EventKind::NcclKernelEnd ||
        e.kind == EventKind::NcclSendStepEnd || e.kind == EventKind::NcclRecvStepEnd) {
      --pair;  // each End follows its Start in EventKind
    }
    return {pair, e.runId, e.rank, e.iteration, e.chunk, e.peer, e.step};
  }

  void ncclEnd(size_t i) {
    const TelemetryEvent& e = ev_[i];
    auto it = ncclStart_.find(ncclKey(e));
    if (it == ncclStart_.end()) return;
    const int64_t start = ev_[it->second].tNs;
    ncclStart_.erase(it);
    switch (e.kind) {
      case EventKind::NcclGroupEnd: add(Activity::NcclGroup, i, -1, start, e.tNs); break;
      case EventKind::NcclKernelEnd: {
        add(Activity::NcclKernel, i, -1, start, e.tNs);
        auto [last, fresh] = lastKernelEnd_.try_emplace({e.runId, e.rank, e.iteration}, e.tNs);
        if (!fresh) last->second = std::max(last->second, e.tNs);
        break;
      }
      case EventKind::NcclSendStepEnd: add(Activity::NcclSend, i, e.peer, start, e.tNs); break;
      default: add(Activity::NcclRecv, i, e.peer, start, e.tNs); break;
    }
  }

  void ncclColls() {
    for (size_t i : collEvents_) {
      const TelemetryEvent& e = ev_[i];
      auto it = lastKernelEnd_.find({e.runId, e.rank, e.iteration});
      add(Activity::NcclColl, i, -1, e.tNs, it == lastKernelEnd_.end() ? e.tNs : it->second);
    }
  }

  const Events& ev_;
  const std::vector<Transfer>& transfers_;
  const Indices& sendEnd_;
  std::vector<int64_t> transferOf_;  // per event: its transfer, or -1
  std::vector<Interval> out_;
  std::map<IterKey, int64_t> iterStart_, lastStepEnd_;
  std::map<RankKey, int64_t> prevArrival_;
  std::map<PlaceKey, int64_t> lastRecvEnd_;
  std::map<NcclKey, size_t> ncclStart_;
  std::map<IterKey, int64_t> lastKernelEnd_;
  Indices collEvents_;
};

}  // namespace

Timeline::Timeline(const std::vector<TelemetryEvent>& events,
                   const std::vector<IterationTime>& iterations) {
  const Sorted sorted = sortEvents(events);
  const Indices sendEnd = pairSendEnds(events, sorted, stats_);
  transfers_ = pairMessages(events, sorted, sendEnd, stats_);
  intervals_ = IntervalBuilder(events, transfers_, sendEnd).build(sorted.byTime, iterations);
  for (const Transfer& x : transfers_) {
    longestFlightNs_ = std::max(longestFlightNs_, minus(x.recvEndNs, x.sendStartNs));
  }
}

size_t Timeline::firstStartingAt(int64_t t) const {
  auto it = std::lower_bound(transfers_.begin(), transfers_.end(), t,
                             [](const Transfer& x, int64_t v) { return x.sendStartNs < v; });
  return static_cast<size_t>(it - transfers_.begin());
}

std::vector<size_t> Timeline::inFlightAt(int64_t t) const {
  std::vector<size_t> out;
  // A saturated longest flight may be shorter than the real one: then look from the start.
  const bool saturated = longestFlightNs_ == std::numeric_limits<int64_t>::max();
  for (size_t i = saturated ? 0 : firstStartingAt(minus(t, longestFlightNs_));
       i < transfers_.size(); ++i) {
    const Transfer& x = transfers_[i];
    if (x.sendStartNs > t) break;
    if (t < x.recvEndNs) out.push_back(i);
  }
  return out;
}

double Timeline::progress(const Transfer& x, int64_t t) {
  if (t <= x.sendStartNs) return 0;
  if (t >= x.recvEndNs) return 1;
  const auto ns = [](int64_t v) { return static_cast<double>(v); };
  return (ns(t) - ns(x.sendStartNs)) / (ns(x.recvEndNs) - ns(x.sendStartNs));
}

}  // namespace arl
