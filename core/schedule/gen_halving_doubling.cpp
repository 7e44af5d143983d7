// Halving-doubling all-reduce: Rabenseifner's algorithm as described by Thakur, Rabenseifner &
// Gropp, "Optimization of collective communication operations in MPICH", IJHPCA 19(1), 2005,
// in the form MPICH's allreduce uses (vector halving with distance doubling).
//
// Let p' be the largest power of two not above n and r = n - p'.
// - Fold (only when r > 0, one step): among the first 2r ranks, each even rank 2i sends its
//   whole vector to 2i+1, which adds its own. The even ranks then sit out; the remaining p'
//   ranks get new ranks 0..p'-1 (2i+1 -> i, rank k >= 2r -> k - r).
// - Reduce-scatter by recursive halving, log2 p' steps: at step k a rank exchanges with the
//   new rank that differs in bit k (distance 2^k). Both hold the same range of the vector;
//   the one with bit k clear keeps the lower half and sends the upper, its partner the
//   reverse, and each adds what it receives to the half it keeps. The range halves every step,
//   so a rank ends with the full sum of one p'-th of the vector.
// - All-gather by recursive doubling, log2 p' steps: the same exchanges in reverse order, each
//   rank sending everything it holds and receiving its partner's part, doubling the range.
// - Unfold (only when r > 0, one step): each 2i+1 sends the result to 2i.
// 2 log2 p' steps, plus 2 when folding. For a power of two, each rank sends
// count/2 + count/4 + ... + count/p' elements in each phase: 2(p-1)/p x count, as ring, in
// 2 log2 p steps instead of 2(p-1). Folding ranks send count elements once more (the rank that
// folds in sends count, its partner sends count back).
//
// The p' pieces are gen::part(count, p', i); a range is a run of whole pieces, so both partners
// compute the same element ranges and skip empty ones alike. Every exchange is pipelined by
// slice, each rank alternating "send slice j, receive slice j": the two directions of a pair
// use distinct channels, so one message per channel suffices (no deadlock at capacity 1).
// Input is read only until the rank's first write of the same elements of Output (the first
// exchange reads the half it sends from Input and writes the half it keeps), so the schedule
// is also correct in place.
#include <algorithm>
#include <vector>

#include "gen_util.h"

namespace arl {

namespace {

using gen::Range;

struct Exchange {
  uint32_t step;
  Phase phase;
  int peer;
  Range send;
  Range recv;
  uint32_t sendChunk;  // first of the p' pieces in `send` / `recv` (the op's chunk id)
  uint32_t recvChunk;
  Buffer sendFrom;  // Input for a rank's first reduce-scatter exchange, then Output
  bool reduce;      // reduce-scatter (RecvReduceCopy) or all-gather (Recv)
  Buffer reduceWith;
};

// Emits one pipelined exchange on one rank: for each slice index, its send then its receive.
void emitExchange(std::vector<Op>& prog, const Exchange& x, uint64_t sliceElems) {
  const uint64_t ns = gen::sliceCount(x.send.len, sliceElems);
  const uint64_t nr = gen::sliceCount(x.recv.len, sliceElems);
  for (uint64_t j = 0; j < std::max(ns, nr); ++j) {
    if (j < ns) {
      const Range sl = gen::slice(x.send, sliceElems, j);
      prog.push_back(gen::makeOp(OpKind::Send, x.phase, x.peer, -1, {x.sendFrom, sl.begin}, {},
                                 sl.len, x.step, x.sendChunk, static_cast<uint32_t>(j)));
    }
    if (j < nr) {
      const Range sl = gen::slice(x.recv, sliceElems, j);
      if (x.reduce) {
        prog.push_back(gen::makeOp(OpKind::RecvReduceCopy, x.phase, -1, x.peer,
                                   {x.reduceWith, sl.begin}, gen::out(sl.begin), sl.len, x.step,
                                   x.recvChunk, static_cast<uint32_t>(j)));
      } else {
        prog.push_back(gen::makeOp(OpKind::Recv, x.phase, -1, x.peer, {}, gen::out(sl.begin),
                                   sl.len, x.step, x.recvChunk, static_cast<uint32_t>(j)));
      }
    }
  }
}

// Emits a one-way transfer of `range` (fold or unfold) pipelined by slice.
void emitOneWay(Schedule& s, int from, int to, Range range, OpKind recvKind, Buffer sendFrom,
                Phase phase, uint32_t step, uint64_t sliceElems) {
  auto& tx = s.ranks[static_cast<size_t>(from)];
  auto& rx = s.ranks[static_cast<size_t>(to)];
  for (uint64_t j = 0; j < gen::sliceCount(range.len, sliceElems); ++j) {
    const Range sl = gen::slice(range, sliceElems, j);
    const auto js = static_cast<uint32_t>(j);
    tx.push_back(
        gen::makeOp(OpKind::Send, phase, to, -1, {sendFrom, sl.begin}, {}, sl.len, step, 0, js));
    const BufRef own = opReduces(recvKind) ? gen::in(sl.begin) : BufRef{};
    rx.push_back(
        gen::makeOp(recvKind, phase, -1, from, own, gen::out(sl.begin), sl.len, step, 0, js));
  }
}

}  // namespace

// Rabenseifner's all-reduce (see the file comment). Supports AllReduce only.
Schedule halvingDoublingAllReduce(const GenParams& p) {
  Schedule s = gen::makeSkeleton("halving-doubling", p);
  const int n = p.nranks;
  const uint64_t count = p.count;
  if (n == 1) {
    if (count > 0) {
      s.ranks[0].push_back(
          gen::makeOp(OpKind::Copy, Phase::Local, -1, -1, gen::in(0), gen::out(0), count, 0, 0, 0));
    }
    gen::finishSteps(s);
    return s;
  }
  int pp = 1;  // p'
  int logp = 0;
  while (pp * 2 <= n) {
    pp *= 2;
    ++logp;
  }
  const int extra = n - pp;  // r
  const auto fold = static_cast<uint32_t>(extra > 0 ? 1 : 0);
  const Range all{0, count};

  // Rank of new rank v, and new rank of rank k (-1 for ranks that fold in and sit out).
  auto rankOfNew = [&](int v) { return v < extra ? 2 * v + 1 : v + extra; };

  for (int i = 0; i < extra; ++i) {
    emitOneWay(s, 2 * i, 2 * i + 1, all, OpKind::RecvReduceCopy, Buffer::Input, Phase::Reduce, 0,
               p.sliceElems);
  }

  // Element range of pieces [a, b) of the p'-way split.
  auto pieces = [&](uint64_t a, uint64_t b) {
    const uint64_t begin = gen::part(count, static_cast<uint64_t>(pp), a).begin;
    const uint64_t end = b < static_cast<uint64_t>(pp)
                             ? gen::part(count, static_cast<uint64_t>(pp), b).begin
                             : count;
    return Range{begin, end - begin};
  };

  for (int v = 0; v < pp; ++v) {
    const int r = rankOfNew(v);
    auto& prog = s.ranks[static_cast<size_t>(r)];
    const bool folded = v < extra;  // its Output already holds its pair's sum
    // keep[k] / give[k]: piece ranges kept and sent at reduce-scatter step k.
    std::vector<std::pair<uint64_t, uint64_t>> keep(static_cast<size_t>(logp));
    std::vector<std::pair<uint64_t, uint64_t>> give(static_cast<size_t>(logp));
    uint64_t lo = 0;
    uint64_t hi = static_cast<uint64_t>(pp);
    for (int k = 0; k < logp; ++k) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (((v >> k) & 1) == 0) {
        keep[static_cast<size_t>(k)] = {lo, mid};
        give[static_cast<size_t>(k)] = {mid, hi};
        hi = mid;
      } else {
        keep[static_cast<size_t>(k)] = {mid, hi};
        give[static_cast<size_t>(k)] = {lo, mid};
        lo = mid;
      }
    }
    for (int k = 0; k < logp; ++k) {
      const auto ks = static_cast<size_t>(k);
      const bool first = k == 0 && !folded;
      Exchange x{fold + static_cast<uint32_t>(k),
                 Phase::ReduceScatter,
                 rankOfNew(v ^ (1 << k)),
                 pieces(give[ks].first, give[ks].second),
                 pieces(keep[ks].first, keep[ks].second),
                 static_cast<uint32_t>(give[ks].first),
                 static_cast<uint32_t>(keep[ks].first),
                 first ? Buffer::Input : Buffer::Output,
                 true,
                 first ? Buffer::Input : Buffer::Output};
      emitExchange(prog, x, p.sliceElems);
    }
    for (int k = logp - 1; k >= 0; --k) {
      const auto ks = static_cast<size_t>(k);
      Exchange x{fold + static_cast<uint32_t>(logp + (logp - 1 - k)),
                 Phase::AllGather,
                 rankOfNew(v ^ (1 << k)),
                 pieces(keep[ks].first, keep[ks].second),
                 pieces(give[ks].first, give[ks].second),
                 static_cast<uint32_t>(keep[ks].first),
                 static_cast<uint32_t>(give[ks].first),
                 Buffer::Output,
                 false,
                 Buffer::Output};
      emitExchange(prog, x, p.sliceElems);
    }
  }

  for (int i = 0; i < extra; ++i) {
    emitOneWay(s, 2 * i + 1, 2 * i, all, OpKind::Recv, Buffer::Output, Phase::Broadcast,
               fold + static_cast<uint32_t>(2 * logp), p.sliceElems);
  }
  gen::finishSteps(s);
  return s;
}

}  // namespace arl
