// Baseline all-reduce algorithms that move the whole vector at every step. They are what the
// bandwidth-optimal ring and halving-doubling are measured against in a classroom.
#include "gen_util.h"

namespace arl {

namespace {

using gen::in;
using gen::makeOp;
using gen::out;
using gen::Range;

// Number of slices of the whole vector; the k-th slice is gen::slice(whole, sliceElems, k).
uint64_t wholeSlices(const Schedule& s) { return gen::sliceCount(s.count, s.sliceElems); }

Range wholeSlice(const Schedule& s, uint64_t k) {
  return gen::slice({0, s.count}, s.sliceElems, k);
}

// A single rank's all-reduce is a copy of its input.
void singleRankCopy(Schedule& s) {
  if (s.count == 0) {
    return;
  }
  s.ranks[0].push_back(makeOp(OpKind::Copy, Phase::Local, -1, -1, in(0), out(0), s.count, 0, 0, 0));
}

int ceilLog2(int n) {
  int l = 0;
  while ((1 << l) < n) {
    ++l;
  }
  return l;
}

int floorLog2(int n) {
  int l = 0;
  while ((2 << l) <= n) {
    ++l;
  }
  return l;
}

}  // namespace

// reduce-broadcast: binomial-tree reduce to rank 0, then binomial-tree broadcast from rank 0
// (Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
// MPICH", IJHPCA 2005, sections on MPI_Reduce and MPI_Bcast).
//
// With L = ceil(log2 n): in reduce step k (0 <= k < L) every rank r with r mod 2^(k+1) = 2^k
// sends its partial sum of the whole vector to r - 2^k, which adds it to its own. In broadcast
// step L + j the tree is walked back down, the farthest child (largest 2^k) first. 2L steps;
// every step carries the full vector, so a rank sends up to L * count elements (the root
// sends L * count in the broadcast alone) and the busiest rank's time grows with log2 n times
// the vector, against 2(n-1)/n for the ring. Both halves are pipelined by slice.
Schedule reduceBroadcastAllReduce(const GenParams& p) {
  Schedule s = gen::makeSkeleton("reduce-broadcast", p);
  const int n = p.nranks;
  if (n == 1) {
    singleRankCopy(s);
    gen::finishSteps(s);
    return s;
  }
  const int levels = ceilLog2(n);
  const uint64_t slices = wholeSlices(s);
  for (int r = 0; r < n; ++r) {
    auto& ops = s.ranks[static_cast<size_t>(r)];
    // Level at which r talks to its parent (its lowest set bit); rank 0 has none.
    const int up = r == 0 ? levels : __builtin_ctz(static_cast<unsigned>(r));
    const int parent = r == 0 ? -1 : r - (1 << up);
    std::vector<int> childLevels;
    for (int k = 0; k < up; ++k) {
      if (r + (1 << k) < n) {
        childLevels.push_back(k);
      }
    }

    // Reduce: children in increasing level, the last child's sum forwarded straight on.
    for (uint64_t sl = 0; sl < slices; ++sl) {
      const Range x = wholeSlice(s, sl);
      bool inOutput = false;  // does Output already hold this rank's partial sum?
      for (size_t c = 0; c < childLevels.size(); ++c) {
        const int k = childLevels[c];
        const int child = r + (1 << k);
        const BufRef src = inOutput ? out(x.begin) : in(x.begin);
        if (c + 1 == childLevels.size() && parent >= 0) {
          ops.push_back(makeOp(OpKind::RecvReduceSend, Phase::Reduce, parent, child, src,
                               out(x.begin), x.len, static_cast<uint32_t>(up), 0,
                               static_cast<uint32_t>(sl)));
        } else {
          ops.push_back(makeOp(OpKind::RecvReduceCopy, Phase::Reduce, -1, child, src, out(x.begin),
                               x.len, static_cast<uint32_t>(k), 0, static_cast<uint32_t>(sl)));
          inOutput = true;
        }
      }
      if (childLevels.empty() && parent >= 0) {
        ops.push_back(makeOp(OpKind::Send, Phase::Reduce, parent, -1, in(x.begin), out(x.begin),
                             x.len, static_cast<uint32_t>(up), 0, static_cast<uint32_t>(sl)));
      }
    }

    // Broadcast: the same tree from the root down, farthest child first.
    auto bcastStep = [&](int k) { return static_cast<uint32_t>(levels + (levels - 1 - k)); };
    for (uint64_t sl = 0; sl < slices; ++sl) {
      const Range x = wholeSlice(s, sl);
      size_t c = childLevels.size();
      if (parent >= 0) {
        if (c > 0) {
          --c;
          const int k = childLevels[c];
          ops.push_back(makeOp(OpKind::RecvCopySend, Phase::Broadcast, r + (1 << k), parent,
                               in(x.begin), out(x.begin), x.len, bcastStep(k), 0,
                               static_cast<uint32_t>(sl)));
        } else {
          ops.push_back(makeOp(OpKind::Recv, Phase::Broadcast, -1, parent, in(x.begin),
                               out(x.begin), x.len, bcastStep(up), 0, static_cast<uint32_t>(sl)));
        }
      }
      while (c > 0) {
        --c;
        const int k = childLevels[c];
        ops.push_back(makeOp(OpKind::Send, Phase::Broadcast, r + (1 << k), -1, out(x.begin),
                             out(x.begin), x.len, bcastStep(k), 0, static_cast<uint32_t>(sl)));
      }
    }
  }
  gen::finishSteps(s);
  return s;
}

// parameter-server: rank 0 is the server (the push/pull pattern of Li et al., "Scaling
// distributed machine learning with the parameter server", OSDI 2014, reduced to a single
// server shard).
//
// Step 0 (push): every worker sends its whole vector, slice by slice; the server adds each
// arrival into its Output. Step 1 (pull): the server sends the sum back to every worker. The
// two are pipelined by slice, as a server that answers each key once it has every worker's
// push: the server takes slice j from every worker, then sends slice j to every worker, then
// takes slice j + 1; a worker pushes slice j + 2 before it pulls slice j, so the next slices
// are on their way in while the server's sends go out (one slice ahead is not enough with two
// ranks: each slice's round trip would then pay two latencies). A port is full duplex, so the
// server's ingress and egress each carry (n-1) * count elements at once: its port is the bottleneck
// and the time grows linearly with n, against 2(n-1)/n of the vector per port for the ring.
// 2 steps. No deadlock at channel capacity 1: the server's send of slice j + 1 to a worker
// waits for that worker to pull slice j, which follows the worker's push of slice j + 2, which
// waits for the server to take slice j + 1, and the server does that before sending it.
Schedule parameterServerAllReduce(const GenParams& p) {
  constexpr uint64_t kPushAhead = 2;  // slices a worker pushes before it pulls the first
  Schedule s = gen::makeSkeleton("parameter-server", p);
  const int n = p.nranks;
  if (n == 1) {
    singleRankCopy(s);
    gen::finishSteps(s);
    return s;
  }
  const uint64_t slices = wholeSlices(s);
  auto& server = s.ranks[0];
  for (uint64_t sl = 0; sl < slices; ++sl) {
    const Range x = wholeSlice(s, sl);
    const auto js = static_cast<uint32_t>(sl);
    for (int w = 1; w < n; ++w) {
      const BufRef src = w == 1 ? in(x.begin) : out(x.begin);
      server.push_back(
          makeOp(OpKind::RecvReduceCopy, Phase::Reduce, -1, w, src, out(x.begin), x.len, 0, 0, js));
    }
    for (int w = 1; w < n; ++w) {
      server.push_back(makeOp(OpKind::Send, Phase::Broadcast, w, -1, out(x.begin), out(x.begin),
                              x.len, 1, 0, js));
    }
  }
  for (int w = 1; w < n; ++w) {
    auto& ops = s.ranks[static_cast<size_t>(w)];
    auto pull = [&](uint64_t sl) {
      const Range x = wholeSlice(s, sl);
      ops.push_back(makeOp(OpKind::Recv, Phase::Broadcast, -1, 0, in(x.begin), out(x.begin), x.len,
                           1, 0, static_cast<uint32_t>(sl)));
    };
    for (uint64_t sl = 0; sl < slices; ++sl) {
      const Range x = wholeSlice(s, sl);
      ops.push_back(makeOp(OpKind::Send, Phase::Reduce, 0, -1, in(x.begin), out(x.begin), x.len, 0,
                           0, static_cast<uint32_t>(sl)));
      if (sl >= kPushAhead) pull(sl - kPushAhead);
    }
    for (uint64_t sl = slices > kPushAhead ? slices - kPushAhead : 0; sl < slices; ++sl) pull(sl);
  }
  gen::finishSteps(s);
  return s;
}

// recursive-doubling (Thakur, Rabenseifner & Gropp 2005, MPI_Allreduce for short messages).
//
// With m = 2^floor(log2 n) and e = n - m extra ranks: if e > 0, step 0 folds each extra rank
// m + i into rank i (a send of its whole vector). Then log2(m) exchange steps among ranks
// 0..m-1: in exchange step k each rank swaps its partial sum with partner r XOR 2^k and adds
// the partner's. A last step sends the result back to each extra rank. log2(m) steps (+2 when n
// is not a power of two); every rank sends log2(m) * count elements (+count for fold and
// unfold): latency-optimal, but each step moves the whole vector.
//
// Within an exchange step each slice is sent and then received and reduced, on both partners
// alike, so one message per channel suffices; the send reads the partial sum before the
// receive overwrites it.
Schedule recursiveDoublingAllReduce(const GenParams& p) {
  Schedule s = gen::makeSkeleton("recursive-doubling", p);
  const int n = p.nranks;
  if (n == 1) {
    singleRankCopy(s);
    gen::finishSteps(s);
    return s;
  }
  const int logM = floorLog2(n);
  const int m = 1 << logM;
  const int extra = n - m;
  const uint32_t first = extra > 0 ? 1 : 0;  // first exchange step
  const auto last = static_cast<uint32_t>(first + static_cast<uint32_t>(logM));  // unfold step
  const uint64_t slices = wholeSlices(s);
  for (int r = 0; r < n; ++r) {
    auto& ops = s.ranks[static_cast<size_t>(r)];
    if (r >= m) {
      for (uint64_t sl = 0; sl < slices; ++sl) {
        const Range x = wholeSlice(s, sl);
        ops.push_back(makeOp(OpKind::Send, Phase::Reduce, r - m, -1, in(x.begin), out(x.begin),
                             x.len, 0, 0, static_cast<uint32_t>(sl)));
      }
      for (uint64_t sl = 0; sl < slices; ++sl) {
        const Range x = wholeSlice(s, sl);
        ops.push_back(makeOp(OpKind::Recv, Phase::Broadcast, -1, r - m, in(x.begin), out(x.begin),
                             x.len, last, 0, static_cast<uint32_t>(sl)));
      }
      continue;
    }
    bool inOutput = false;  // does Output hold this rank's partial sum yet?
    if (r < extra) {
      for (uint64_t sl = 0; sl < slices; ++sl) {
        const Range x = wholeSlice(s, sl);
        ops.push_back(makeOp(OpKind::RecvReduceCopy, Phase::Reduce, -1, r + m, in(x.begin),
                             out(x.begin), x.len, 0, 0, static_cast<uint32_t>(sl)));
      }
      inOutput = true;
    }
    for (int k = 0; k < logM; ++k) {
      const int partner = r ^ (1 << k);
      const auto step = static_cast<uint32_t>(first + static_cast<uint32_t>(k));
      for (uint64_t sl = 0; sl < slices; ++sl) {
        const Range x = wholeSlice(s, sl);
        const BufRef src = inOutput ? out(x.begin) : in(x.begin);
        ops.push_back(makeOp(OpKind::Send, Phase::Reduce, partner, -1, src, out(x.begin), x.len,
                             step, 0, static_cast<uint32_t>(sl)));
        ops.push_back(makeOp(OpKind::RecvReduceCopy, Phase::Reduce, -1, partner, src, out(x.begin),
                             x.len, step, 0, static_cast<uint32_t>(sl)));
      }
      inOutput = true;
    }
    if (r < extra) {
      for (uint64_t sl = 0; sl < slices; ++sl) {
        const Range x = wholeSlice(s, sl);
        ops.push_back(makeOp(OpKind::Send, Phase::Broadcast, r + m, -1, out(x.begin), out(x.begin),
                             x.len, last, 0, static_cast<uint32_t>(sl)));
      }
    }
  }
  gen::finishSteps(s);
  return s;
}

}  // namespace arl
