// Binary-tree schedules for all five collectives.
//
// The tree. Positions 0..n-1 form NCCL's in-order binary tree (NCCL 2.4, "double binary
// trees"; after Sanders, Speck & Traeff, "Two-tree algorithms for full bandwidth broadcast,
// reduction and scan", Parallel Computing 35(12), 2009). Position 0 is the root and has a single
// child, the largest power of two below n. Any other position v with lowest set bit b has
// parent (v - b) + 2b, or v - b when that is n or more; its children are therefore v - b/2 and
// the first of v + b/2, v + b/4, ... below n. Odd positions are leaves, even ones interior, and
// the depth is ceil(log2 n) edges. A collective maps positions to ranks (mirrored, shifted or
// rotated to a root) and moves data along the edges.
//
// A "step" is one level of the tree: in a reduction, step k is the hop made by the ranks at
// depth D - k (D the tree's depth) towards their parents, so leaves at the bottom move at step 0
// and the root's children at step D - 1; in a broadcast, step k is the hop from depth k to depth
// k + 1. Every hop is pipelined by slice, so a deep tree still streams one slice per hop time.
//
// Deadlock freedom at channel capacity 1 holds by construction. The schedule is a sequence of
// rounds, each moving one slice through one whole tree (a reduction bottom-up or a broadcast
// top-down); every rank's program is its part of each round, in round order. A round alone
// runs to completion at capacity 1 (each edge carries one message, leaves first), and leaves
// every channel empty, so any sequence of rounds runs to completion; since every rank's
// program is deterministic, all executions then finish (Kahn networks are confluent).
//
// Rounds of one tree run back to back ("passes"): a pass streams its slices down a pipeline
// at one slice per hop. Interleaving the rounds of several trees slice by slice would tie
// every tree's pipeline to the others': a rank's program is sequential, so a rank waiting for
// slice j of one tree holds back its ops in the other, and at capacity 1 no rank can run
// ahead to hide that. (In model.h's simulate(), when it charged only the sender's port, 16M
// floats in 128K slices: interleaved, the all-reduce took 1.6x ring's time at 4 ranks and
// 5.8x at 31; in passes, 1.25x to 1.5x from 2 to 64 ranks. Charging ingress as well, a
// parent taking two children's halves through one port, and pacing ports as the data planes
// do, passes take 3.5 S per iteration against the ring's 2(n-1)/n S: 2.3x at 4 ranks, 2.0x
// at 8 (model.cpp, treeAllReduceCost).)
//
// allreduce - NCCL's double binary tree. Tree 0 uses rank = position; tree 1 is mirrored
//   (rank n-1-position) for even n and shifted (rank position+1 mod n) for odd n, so that a
//   rank that is a leaf in one tree is interior in the other (for odd n exactly one rank is
//   interior in both) and every rank does about the same work. Each tree carries one half of
//   the vector, reduced up to its root and broadcast back down. Four passes: tree 0 up, tree 1
//   up, tree 0 down, tree 1 down (NCCL's non-split tree kernel likewise runs its up loop
//   before its down loop). 2D steps. A rank sends each half at most once up and at most twice
//   down: at most 2 x count elements, 2(n-1)/n x count on average, as in ring.
// reduce - one tree rotated so that position 0 is p.root; the slices stream up. D steps; every
//   non-root rank sends count elements once.
// broadcast - the same tree; the root sends from Input and copies it to its Output. D steps;
//   interior ranks send count elements once per child.
// reducescatter - for every rank b, a tree rotated to root b reduces block b of the Input into
//   b's Output, one pass per block. D steps; every rank sends (n-1) x count elements, as in
//   ring.
// allgather - for every rank b, a tree rotated to root b broadcasts b's block, one pass per
//   block. D steps; every rank receives (n-1) x count elements and sends each block at most
//   twice, so it takes up to twice ring's time on one port per rank, as broadcast does.
//
// Partial sums of ranks with two children go to Output for allreduce (overwritten by the
// broadcast later) and to Scratch for reduce and reducescatter, whose Output is not theirs to
// use on those ranks (in place it would be the caller's Input).
#include <algorithm>
#include <vector>

#include "gen_util.h"

namespace arl {

namespace {

using gen::Range;

// NCCL's in-order binary tree over positions 0..n-1 (see the file comment).
struct PosTree {
  int n = 0;
  std::vector<int> parent;                 // -1 for the root (position 0)
  std::vector<std::vector<int>> children;  // ascending positions, at most two
  std::vector<int> depth;                  // edges from the root
  int maxDepth = 0;
};

PosTree inOrderTree(int n) {
  PosTree t;
  t.n = n;
  t.parent.assign(static_cast<size_t>(n), -1);
  t.children.assign(static_cast<size_t>(n), {});
  t.depth.assign(static_cast<size_t>(n), 0);
  for (int v = 1; v < n; ++v) {
    const int low = v & -v;
    const int natural = (v - low) | (low << 1);
    t.parent[static_cast<size_t>(v)] = natural < n ? natural : v - low;
  }
  for (int v = 1; v < n; ++v) {
    t.children[static_cast<size_t>(t.parent[static_cast<size_t>(v)])].push_back(v);
  }
  // Depths by a walk from the root; parents are not always smaller than their children.
  std::vector<int> stack{0};
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    for (int c : t.children[static_cast<size_t>(v)]) {
      t.depth[static_cast<size_t>(c)] = t.depth[static_cast<size_t>(v)] + 1;
      t.maxDepth = std::max(t.maxDepth, t.depth[static_cast<size_t>(c)]);
      stack.push_back(c);
    }
  }
  for (int v = 0; v < n; ++v) {
    ARL_ENFORCE(
        t.children[static_cast<size_t>(v)].size() <= 2,
        "position " << v << " has " << t.children[static_cast<size_t>(v)].size() << " children");
  }
  return t;
}

// A tree laid onto ranks: rankOf[position].
struct RankTree {
  const PosTree* shape = nullptr;
  std::vector<int> rankOf;
  int rank(int pos) const { return rankOf[static_cast<size_t>(pos)]; }
};

RankTree rotated(const PosTree& shape, int root) {
  RankTree t{&shape, std::vector<int>(static_cast<size_t>(shape.n))};
  for (int v = 0; v < shape.n; ++v) {
    t.rankOf[static_cast<size_t>(v)] = (v + root) % shape.n;
  }
  return t;
}

// NCCL's second tree: mirrored for even n, shifted by one for odd n.
RankTree complementary(const PosTree& shape) {
  const int n = shape.n;
  RankTree t{&shape, std::vector<int>(static_cast<size_t>(n))};
  for (int v = 0; v < n; ++v) {
    t.rankOf[static_cast<size_t>(v)] = (n % 2 == 0) ? n - 1 - v : (v + 1) % n;
  }
  return t;
}

// Where one round's data lives on every rank. Offsets are of the round's slice start.
struct RoundBuffers {
  BufRef src;         // each rank's contribution (reduction) / the root's data (broadcast)
  BufRef rootDst;     // where the root's result goes (reduction)
  BufRef partial;     // where ranks with several children accumulate (reduction)
  BufRef dst;         // where non-root ranks receive (broadcast)
  bool* usedPartial;  // set when `partial` is written (so the caller sizes Scratch)
};

struct RoundTag {
  Phase phase;
  uint32_t stepBase;  // step of the first hop of this round's kind
  uint32_t chunk;
  uint32_t slice;
};

// One slice reduced up the tree: leaves Send, a rank with children reduces the first child's
// payload with its own contribution, then any further child's, and passes the sum up; the root
// keeps it. Step of a hop = stepBase + D - depth(sender).
void reduceRound(std::vector<std::vector<Op>>& progs, const RankTree& t, const RoundBuffers& b,
                 uint64_t count, const RoundTag& tag) {
  const PosTree& sh = *t.shape;
  for (int v = 0; v < sh.n; ++v) {
    const int r = t.rank(v);
    const auto& kids = sh.children[static_cast<size_t>(v)];
    auto& prog = progs[static_cast<size_t>(r)];
    const int depth = sh.depth[static_cast<size_t>(v)];
    const uint32_t sendStep = tag.stepBase + static_cast<uint32_t>(sh.maxDepth - depth);
    const uint32_t recvStep = sendStep - 1;  // children sit one level deeper
    const bool root = sh.parent[static_cast<size_t>(v)] < 0;
    const int up = root ? -1 : t.rank(sh.parent[static_cast<size_t>(v)]);
    if (kids.empty()) {
      if (root) {
        prog.push_back(gen::makeOp(OpKind::Copy, tag.phase, -1, -1, b.src, b.rootDst, count,
                                   tag.stepBase, tag.chunk, tag.slice));
      } else {
        prog.push_back(gen::makeOp(OpKind::Send, tag.phase, up, -1, b.src, {}, count, sendStep,
                                   tag.chunk, tag.slice));
      }
      continue;
    }
    const BufRef acc = root ? b.rootDst : b.partial;
    for (size_t k = 0; k < kids.size(); ++k) {
      const int child = t.rank(kids[k]);
      const BufRef operand = k == 0 ? b.src : acc;
      const bool last = k + 1 == kids.size();
      if (last && !root) {
        prog.push_back(gen::makeOp(OpKind::RecvReduceSend, tag.phase, up, child, operand, {}, count,
                                   sendStep, tag.chunk, tag.slice));
      } else {
        prog.push_back(gen::makeOp(OpKind::RecvReduceCopy, tag.phase, -1, child, operand, acc,
                                   count, recvStep, tag.chunk, tag.slice));
        if (!root) {
          *b.usedPartial = true;
        }
      }
    }
  }
}

// One slice broadcast down the tree: the root sends its data to each child; an interior rank
// receives into `dst`, forwarding to its first child in the same op and sending to the second
// from `dst`; leaves receive. Step of a hop = stepBase + depth(sender).
void broadcastRound(std::vector<std::vector<Op>>& progs, const RankTree& t, const RoundBuffers& b,
                    uint64_t count, const RoundTag& tag) {
  const PosTree& sh = *t.shape;
  for (int v = 0; v < sh.n; ++v) {
    const int r = t.rank(v);
    const auto& kids = sh.children[static_cast<size_t>(v)];
    auto& prog = progs[static_cast<size_t>(r)];
    const int depth = sh.depth[static_cast<size_t>(v)];
    const uint32_t sendStep = tag.stepBase + static_cast<uint32_t>(depth);
    const bool root = sh.parent[static_cast<size_t>(v)] < 0;
    if (root) {
      for (int kid : kids) {
        prog.push_back(gen::makeOp(OpKind::Send, tag.phase, t.rank(kid), -1, b.src, {}, count,
                                   sendStep, tag.chunk, tag.slice));
      }
      continue;
    }
    const int up = t.rank(sh.parent[static_cast<size_t>(v)]);
    if (kids.empty()) {
      prog.push_back(gen::makeOp(OpKind::Recv, tag.phase, -1, up, {}, b.dst, count, sendStep - 1,
                                 tag.chunk, tag.slice));
      continue;
    }
    prog.push_back(gen::makeOp(OpKind::RecvCopySend, tag.phase, t.rank(kids[0]), up, {}, b.dst,
                               count, sendStep, tag.chunk, tag.slice));
    for (size_t k = 1; k < kids.size(); ++k) {
      prog.push_back(gen::makeOp(OpKind::Send, tag.phase, t.rank(kids[k]), -1, b.dst, {}, count,
                                 sendStep, tag.chunk, tag.slice));
    }
  }
}

// n == 1: every collective is a copy of Input into Output.
void singleRank(Schedule& s) {
  const uint64_t len = std::min(s.inputElems, s.outputElems);
  if (len == 0) {
    return;
  }
  s.ranks[0].push_back(
      gen::makeOp(OpKind::Copy, Phase::Local, -1, -1, gen::in(0), gen::out(0), len, 0, 0, 0));
}

void treeAllReduce(Schedule& s, const GenParams& p) {
  const PosTree shape = inOrderTree(p.nranks);
  const RankTree trees[2] = {rotated(shape, 0), complementary(shape)};
  const auto D = static_cast<uint32_t>(shape.maxDepth);
  bool unusedFlag = false;
  // Four passes, each a whole pipeline: tree 0 up, tree 1 up, tree 0 down, tree 1 down.
  for (const bool up : {true, false}) {
    for (uint32_t t = 0; t < 2; ++t) {
      const Range half = gen::part(p.count, 2, t);
      for (uint64_t j = 0; j < gen::sliceCount(half.len, p.sliceElems); ++j) {
        const Range sl = gen::slice(half, p.sliceElems, j);
        const auto js = static_cast<uint32_t>(j);
        // The sum accumulates in Output: the broadcast overwrites it later, and Input is read
        // only by the first op of each slice, before Output is written (safe in place).
        RoundBuffers b{gen::in(sl.begin), gen::out(sl.begin), gen::out(sl.begin),
                       gen::out(sl.begin), &unusedFlag};
        if (up) {
          reduceRound(s.ranks, trees[t], b, sl.len, {Phase::Reduce, 0, t, js});
        } else {
          b.src = gen::out(sl.begin);  // the root broadcasts the sum it holds in Output
          broadcastRound(s.ranks, trees[t], b, sl.len, {Phase::Broadcast, D, t, js});
        }
      }
    }
  }
}

void treeReduce(Schedule& s, const GenParams& p) {
  const PosTree shape = inOrderTree(p.nranks);
  const RankTree tree = rotated(shape, p.root);
  const Range all{0, p.count};
  bool usedScratch = false;
  for (uint64_t j = 0; j < gen::sliceCount(p.count, p.sliceElems); ++j) {
    const Range sl = gen::slice(all, p.sliceElems, j);
    RoundBuffers b{gen::in(sl.begin), gen::out(sl.begin), gen::scratch(sl.begin), {}, &usedScratch};
    reduceRound(s.ranks, tree, b, sl.len, {Phase::Reduce, 0, 0, static_cast<uint32_t>(j)});
  }
  if (usedScratch) {
    s.scratchElems = p.count;
  }
}

void treeBroadcast(Schedule& s, const GenParams& p) {
  const PosTree shape = inOrderTree(p.nranks);
  const RankTree tree = rotated(shape, p.root);
  if (p.count > 0) {
    s.ranks[static_cast<size_t>(p.root)].push_back(
        gen::makeOp(OpKind::Copy, Phase::Local, -1, -1, gen::in(0), gen::out(0), p.count, 0, 0, 0));
  }
  const Range all{0, p.count};
  bool unusedFlag = false;
  for (uint64_t j = 0; j < gen::sliceCount(p.count, p.sliceElems); ++j) {
    const Range sl = gen::slice(all, p.sliceElems, j);
    RoundBuffers b{gen::in(sl.begin), {}, {}, gen::out(sl.begin), &unusedFlag};
    broadcastRound(s.ranks, tree, b, sl.len, {Phase::Broadcast, 0, 0, static_cast<uint32_t>(j)});
  }
}

void treeReduceScatter(Schedule& s, const GenParams& p) {
  const PosTree shape = inOrderTree(p.nranks);
  std::vector<RankTree> trees;
  trees.reserve(static_cast<size_t>(p.nranks));
  for (int b = 0; b < p.nranks; ++b) {
    trees.push_back(rotated(shape, b));
  }
  const Range block{0, p.count};
  bool usedScratch = false;
  for (int b = 0; b < p.nranks; ++b) {
    for (uint64_t j = 0; j < gen::sliceCount(p.count, p.sliceElems); ++j) {
      const Range sl = gen::slice(block, p.sliceElems, j);
      const uint64_t base = static_cast<uint64_t>(b) * p.count + sl.begin;
      // Partial sums of every block use the same count elements of Scratch: a rank writes a
      // slice there and reads it back in its next op, before any other block's round.
      RoundBuffers buf{gen::in(base), gen::out(sl.begin), gen::scratch(sl.begin), {}, &usedScratch};
      reduceRound(s.ranks, trees[static_cast<size_t>(b)], buf, sl.len,
                  {Phase::ReduceScatter, 0, static_cast<uint32_t>(b), static_cast<uint32_t>(j)});
    }
  }
  if (usedScratch) {
    s.scratchElems = p.count;
  }
}

void treeAllGather(Schedule& s, const GenParams& p) {
  const PosTree shape = inOrderTree(p.nranks);
  std::vector<RankTree> trees;
  trees.reserve(static_cast<size_t>(p.nranks));
  for (int b = 0; b < p.nranks; ++b) {
    trees.push_back(rotated(shape, b));
  }
  if (p.count > 0) {
    for (int r = 0; r < p.nranks; ++r) {
      s.ranks[static_cast<size_t>(r)].push_back(gen::makeOp(
          OpKind::Copy, Phase::Local, -1, -1, gen::in(0),
          gen::out(static_cast<uint64_t>(r) * p.count), p.count, 0, static_cast<uint32_t>(r), 0));
    }
  }
  const Range block{0, p.count};
  bool unusedFlag = false;
  for (int b = 0; b < p.nranks; ++b) {
    for (uint64_t j = 0; j < gen::sliceCount(p.count, p.sliceElems); ++j) {
      const Range sl = gen::slice(block, p.sliceElems, j);
      const uint64_t base = static_cast<uint64_t>(b) * p.count + sl.begin;
      RoundBuffers buf{gen::in(sl.begin), {}, {}, gen::out(base), &unusedFlag};
      broadcastRound(s.ranks, trees[static_cast<size_t>(b)], buf, sl.len,
                     {Phase::AllGather, 0, static_cast<uint32_t>(b), static_cast<uint32_t>(j)});
    }
  }
}

}  // namespace

// Binary-tree schedule for any collective (see the file comment for each one).
Schedule treeSchedule(const GenParams& p) {
  Schedule s = gen::makeSkeleton("tree", p);
  if (p.nranks == 1) {
    singleRank(s);
  } else {
    switch (p.collective) {
      case Collective::AllReduce: treeAllReduce(s, p); break;
      case Collective::Reduce: treeReduce(s, p); break;
      case Collective::Broadcast: treeBroadcast(s, p); break;
      case Collective::ReduceScatter: treeReduceScatter(s, p); break;
      case Collective::AllGather: treeAllGather(s, p); break;
    }
  }
  gen::finishSteps(s);
  return s;
}

}  // namespace arl
