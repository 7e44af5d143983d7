// k-nomial tree reduce, broadcast and all-reduce (k = GenParams::radix; k = 2 is the binomial
// tree of MPICH's MPIR_Reduce_intra_binomial / MPIR_Bcast_intra_binomial; the k-nomial
// generalisation is MPICH's and UCC's knomial reduce / bcast, and its analysis is in Thakur,
// Rabenseifner & Gropp, IJHPCA 2005, for k = 2).
//
// With v = (r - root) mod n, R = ceil(log_k n) rounds of distance d = 1, k, k^2, ...:
// - Reduce: in round i (d = k^i) each v with v mod kd == 0 receives from its children
//   v + j d (j = 1 .. k-1, those below n) one after the other and adds them, and each v with
//   v mod kd = j d sends its partial sum to v - j d and is done. R steps; every rank but the root
//   sends count elements once; the root receives up to (k-1) R messages.
// - Broadcast: the same tree from the root down, rounds in reverse: R steps; a rank sends count
//   elements to each of its children (the root up to (k-1) R of them).
// - AllReduce: Reduce to rank 0, then Broadcast from it: 2R steps.
// A larger k means fewer rounds (latency log_k n) but k-1 messages in a row into one parent per
// round: k trades the alpha term against the parent's port (Gropp's k-nomial trade-off).
//
// Every slice climbs the tree before the next (each rank: receive and add slice j from every
// child, then send it up), so slices pipeline along the tree and, the tree being acyclic, one
// message per channel suffices. The all-reduce broadcasts after the whole reduce. Step kinds:
// Send, RecvReduceCopy (reduce), Recv and Send (broadcast), Copy (the root's own input).
#include <algorithm>
#include <string>

#include "gen_util.h"

namespace arl {

namespace {

using gen::Range;

struct Tree {
  int n = 1;
  int k = 2;
  int root = 0;
  int rounds = 0;  // ceil(log_k n)

  int rankOf(int v) const { return (v + root) % n; }
  int vrankOf(int r) const { return (r - root + n) % n; }
  // The round in which v sends to its parent (rounds for the root).
  int sendRound(int v) const {
    int round = 0;
    for (long d = 1; d < n; d *= k, ++round) {
      if (v % (d * k) != 0) return round;
    }
    return rounds;
  }
  int parent(int v) const {
    long d = 1;
    for (int i = 0; i < sendRound(v); ++i) d *= k;
    return static_cast<int>(v - v % (d * k));
  }
  // Children of v by round (ascending), each round's in ascending order.
  std::vector<std::pair<int, int>> children(int v) const {
    std::vector<std::pair<int, int>> c;  // (round, child vrank)
    long d = 1;
    for (int i = 0; i < sendRound(v); ++i, d *= k) {
      for (int j = 1; j < k && v + j * d < n; ++j) c.push_back({i, static_cast<int>(v + j * d)});
    }
    return c;
  }
};

Tree makeTree(const GenParams& p, int root) {
  if (p.radix < 2) {
    throw GenError("knomial radix must be at least 2 (got " + std::to_string(p.radix) + ")");
  }
  Tree t{p.nranks, p.radix, root, 0};
  for (long d = 1; d < t.n; d *= t.k) ++t.rounds;
  return t;
}

void treeReduce(Schedule& s, const Tree& t, uint64_t sliceElems) {
  const uint64_t slices = gen::sliceCount(s.count, sliceElems);
  for (int v = 0; v < t.n; ++v) {
    auto& prog = s.ranks[static_cast<size_t>(t.rankOf(v))];
    const auto kids = t.children(v);
    for (uint64_t j = 0; j < slices; ++j) {
      const Range sl = gen::slice({0, s.count}, sliceElems, j);
      const auto js = static_cast<uint32_t>(j);
      BufRef partial = gen::in(sl.begin);
      for (const auto& [round, child] : kids) {
        prog.push_back(gen::makeOp(OpKind::RecvReduceCopy, Phase::Reduce, -1, t.rankOf(child),
                                   partial, gen::out(sl.begin), sl.len,
                                   static_cast<uint32_t>(round), 0, js));
        partial = gen::out(sl.begin);
      }
      if (v != 0) {
        prog.push_back(gen::makeOp(OpKind::Send, Phase::Reduce, t.rankOf(t.parent(v)), -1, partial,
                                   {}, sl.len, static_cast<uint32_t>(t.sendRound(v)), 0, js));
      }
    }
  }
}

// `first` numbers the broadcast's steps after a reduce; `fromInput`: the root's result is its
// own Input (Broadcast), copied to Output first.
void treeBroadcast(Schedule& s, const Tree& t, uint64_t sliceElems, uint32_t first,
                   bool fromInput) {
  const uint64_t slices = gen::sliceCount(s.count, sliceElems);
  auto stepOf = [&](int round) { return first + static_cast<uint32_t>(t.rounds - 1 - round); };
  for (int v = 0; v < t.n; ++v) {
    auto& prog = s.ranks[static_cast<size_t>(t.rankOf(v))];
    auto kids = t.children(v);
    std::reverse(kids.begin(), kids.end());  // farthest subtree first: it has the most to do
    for (uint64_t j = 0; j < slices; ++j) {
      const Range sl = gen::slice({0, s.count}, sliceElems, j);
      const auto js = static_cast<uint32_t>(j);
      if (v != 0) {
        prog.push_back(gen::makeOp(OpKind::Recv, Phase::Broadcast, -1, t.rankOf(t.parent(v)), {},
                                   gen::out(sl.begin), sl.len, stepOf(t.sendRound(v)), 0, js));
      } else if (fromInput) {
        prog.push_back(gen::makeOp(OpKind::Copy, Phase::Local, -1, -1, gen::in(sl.begin),
                                   gen::out(sl.begin), sl.len, 0, 0, js));
      }
      for (const auto& [round, child] : kids) {
        prog.push_back(gen::makeOp(OpKind::Send, Phase::Broadcast, t.rankOf(child), -1,
                                   gen::out(sl.begin), {}, sl.len, stepOf(round), 0, js));
      }
    }
  }
}

}  // namespace

Schedule knomialSchedule(const GenParams& p) {
  Schedule s = gen::makeSkeleton("knomial", p);
  const bool rooted = p.collective == Collective::Reduce || p.collective == Collective::Broadcast;
  const Tree t = makeTree(p, rooted ? p.root : 0);
  if (p.nranks == 1) {
    gen::singleRankCopy(s);
  } else if (p.collective == Collective::Reduce) {
    treeReduce(s, t, p.sliceElems);
  } else if (p.collective == Collective::Broadcast) {
    treeBroadcast(s, t, p.sliceElems, 0, true);
  } else {
    treeReduce(s, t, p.sliceElems);
    treeBroadcast(s, t, p.sliceElems, static_cast<uint32_t>(t.rounds), false);
  }
  gen::finishSteps(s);
  return s;
}

}  // namespace arl
