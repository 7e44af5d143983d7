// Ring algorithms for every collective.
//
// The ranks form a ring in gen::ringOrder(p): the rank at position i sends only to position
// i+1 and receives only from position i-1, so every link carries the same load and the
// all-reduce is bandwidth-optimal (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms
// for clusters of workstations", JPDC 2009). Step kinds and their order follow NCCL's ring
// kernels (all_reduce.h: Send, RecvReduceSend x (n-2), RecvReduceCopySend, RecvCopySend x (n-2),
// Recv).
//
// - AllReduce: the vector is cut into n chunks (gen::part). Reduce-scatter, n-1 steps: at step
//   j the rank at position i sends its partial sum of chunk (i-1-j) mod n and receives chunk
//   (i-2-j) mod n, adding its own input; after n-1 steps it holds the full sum of chunk i.
//   All-gather, n-1 steps: the finished chunks travel once more around the ring. 2(n-1) steps,
//   each rank sends 2(n-1)/n of the vector.
// - ReduceScatter: the reduce-scatter half alone over Input chunks of `count` elements, with
//   the rank's own chunk ending in its Output. n-1 steps, (n-1)*count elements sent per rank.
// - AllGather: each rank copies its Input into its slot of Output, then the all-gather half.
//   n-1 steps, (n-1)*count elements sent per rank.
// - Reduce: a chain along the ring that starts after the root and ends at it, each rank adding
//   its input; n-1 steps, count elements sent by every rank but the root.
// - Broadcast: a chain from the root along the ring; n-1 steps, count elements sent by every
//   rank but the last.
//
// Every chunk is cut into slices of p.sliceElems elements. By default ops are emitted slice-major
// (for each slice, all of its steps), so one message per channel suffices (no deadlock at
// channel capacity 1). In AllReduce, ReduceScatter and AllGather every rank starts each slice
// with a send and every later step waits for the previous rank's, so slice by slice the ranks
// move in lockstep: a slice costs its 2(n-1) (or n-1) message latencies, one after the other,
// and with small slices the latency is the run's time.
//
// A window of W slices (p.window) takes W slices together, step by step: each rank sends the W
// slices of step 0, then receives, reduces and forwards the W of step 1, and so on, before the
// next W slices. The W messages of a step are on the wire at once, so a step's latency is paid
// once per W slices. This is how NCCL's primitives move a chunk: its slices go out back to back
// through a FIFO of NCCL_STEPS (8) slots a channel, and the receiver works on each as it lands
// (NCCL, src/device/prims_simple.h). A rank then sends up to W messages on a channel before it
// reads one, so the schedule is free of deadlock at channel capacity W (Schedule::window) and
// not below it. Reduce and Broadcast are chains: slice-major, they pipeline already, and a
// window changes nothing there.
//
// An op's step is the step of the message it sends, or of the message it receives for
// receive-only ops; chunks too small to hold a given slice skip it on every rank.
#include <algorithm>

#include "gen_util.h"

namespace arl {

namespace {

using gen::in;
using gen::makeOp;
using gen::out;
using gen::Range;

int mod(int a, int n) { return ((a % n) + n) % n; }

struct Ring {
  std::vector<int> order;
  int n = 0;
  int rankAt(int pos) const { return order[static_cast<size_t>(mod(pos, n))]; }
  int positionOf(int rank) const {
    for (int i = 0; i < n; ++i) {
      if (order[static_cast<size_t>(i)] == rank) {
        return i;
      }
    }
    return -1;
  }
};

// One local copy of the whole range (a single rank has nothing to exchange).
void localCopy(Schedule& s, uint64_t count) {
  if (count == 0) {
    return;
  }
  s.ranks[0].push_back(makeOp(OpKind::Copy, Phase::Local, -1, -1, in(0), out(0), count, 0, 0, 0));
}

// The first slice past the window that starts at slice `first`, of `slices` in all.
uint64_t windowEnd(uint64_t first, uint64_t slices, uint32_t window) {
  return std::min(slices, first + window);
}

void ringAllReduce(Schedule& s, const Ring& ring, uint64_t sliceElems) {
  const int n = ring.n;
  const uint64_t count = s.count;
  const uint64_t slices = gen::sliceCount(gen::part(count, n, 0).len, sliceElems);
  for (int i = 0; i < n; ++i) {
    auto& ops = s.ranks[static_cast<size_t>(ring.rankAt(i))];
    const int next = ring.rankAt(i + 1);
    const int prev = ring.rankAt(i - 1);
    for (uint64_t first = 0; first < slices; first += s.window) {
      const uint64_t end = windowEnd(first, slices, s.window);
      for (int j = 0; j <= 2 * n - 2; ++j) {
        const int chunk = ring.rankAt(i - 1 - j);
        const Range ch = gen::part(count, n, static_cast<uint64_t>(chunk));
        const auto step = static_cast<uint32_t>(j == 2 * n - 2 ? 2 * n - 3 : j);
        const Phase phase = j < n - 1 ? Phase::ReduceScatter : Phase::AllGather;
        OpKind kind = OpKind::RecvCopySend;
        if (j == 0) {
          kind = OpKind::Send;
        } else if (j < n - 1) {
          kind = OpKind::RecvReduceSend;
        } else if (j == n - 1) {
          kind = OpKind::RecvReduceCopySend;
        } else if (j == 2 * n - 2) {
          kind = OpKind::Recv;
        }
        const uint64_t held = gen::sliceCount(ch.len, sliceElems);  // slices this chunk has
        for (uint64_t sl = first; sl < std::min(end, held); ++sl) {
          const Range r = gen::slice(ch, sliceElems, sl);
          ops.push_back(makeOp(kind, phase, opSends(kind) ? next : -1, opRecvs(kind) ? prev : -1,
                               in(r.begin), out(r.begin), r.len, step, static_cast<uint32_t>(chunk),
                               static_cast<uint32_t>(sl)));
        }
      }
    }
  }
}

void ringReduceScatter(Schedule& s, const Ring& ring, uint64_t sliceElems) {
  const int n = ring.n;
  const uint64_t count = s.count;
  const uint64_t slices = gen::sliceCount(count, sliceElems);
  for (int i = 0; i < n; ++i) {
    auto& ops = s.ranks[static_cast<size_t>(ring.rankAt(i))];
    const int next = ring.rankAt(i + 1);
    const int prev = ring.rankAt(i - 1);
    for (uint64_t first = 0; first < slices; first += s.window) {
      const uint64_t end = windowEnd(first, slices, s.window);
      for (int j = 0; j <= n - 1; ++j) {
        const int chunk = ring.rankAt(i - 1 - j);
        const uint64_t base = static_cast<uint64_t>(chunk) * count;
        OpKind kind = OpKind::RecvReduceSend;
        if (j == 0) {
          kind = OpKind::Send;
        } else if (j == n - 1) {
          kind = OpKind::RecvReduceCopy;  // chunk == own rank: the finished sum stays here
        }
        const auto step = static_cast<uint32_t>(j == n - 1 ? n - 2 : j);
        for (uint64_t sl = first; sl < end; ++sl) {
          const Range r = gen::slice({0, count}, sliceElems, sl);
          ops.push_back(makeOp(kind, Phase::ReduceScatter, opSends(kind) ? next : -1,
                               opRecvs(kind) ? prev : -1, in(base + r.begin), out(r.begin), r.len,
                               step, static_cast<uint32_t>(chunk), static_cast<uint32_t>(sl)));
        }
      }
    }
  }
}

void ringAllGather(Schedule& s, const Ring& ring, uint64_t sliceElems) {
  const int n = ring.n;
  const uint64_t count = s.count;
  const uint64_t slices = gen::sliceCount(count, sliceElems);
  for (int i = 0; i < n; ++i) {
    const int me = ring.rankAt(i);
    auto& ops = s.ranks[static_cast<size_t>(me)];
    const int next = ring.rankAt(i + 1);
    const int prev = ring.rankAt(i - 1);
    const uint64_t own = static_cast<uint64_t>(me) * count;
    for (uint64_t first = 0; first < slices; first += s.window) {
      const uint64_t end = windowEnd(first, slices, s.window);
      for (uint64_t sl = first; sl < end; ++sl) {
        const Range r = gen::slice({0, count}, sliceElems, sl);
        ops.push_back(makeOp(OpKind::Copy, Phase::Local, -1, -1, in(r.begin), out(own + r.begin),
                             r.len, 0, static_cast<uint32_t>(me), static_cast<uint32_t>(sl)));
      }
      for (int j = 0; j <= n - 1; ++j) {
        const int chunk = ring.rankAt(i - j);
        const uint64_t base = static_cast<uint64_t>(chunk) * count;
        OpKind kind = OpKind::RecvCopySend;
        if (j == 0) {
          kind = OpKind::Send;
        } else if (j == n - 1) {
          kind = OpKind::Recv;
        }
        const auto step = static_cast<uint32_t>(j == n - 1 ? n - 2 : j);
        for (uint64_t sl = first; sl < end; ++sl) {
          const Range r = gen::slice({0, count}, sliceElems, sl);
          ops.push_back(makeOp(kind, Phase::AllGather, opSends(kind) ? next : -1,
                               opRecvs(kind) ? prev : -1, in(r.begin), out(base + r.begin), r.len,
                               step, static_cast<uint32_t>(chunk), static_cast<uint32_t>(sl)));
        }
      }
    }
  }
}

void ringReduce(Schedule& s, const Ring& ring, uint64_t sliceElems) {
  const int n = ring.n;
  const int rootPos = ring.positionOf(s.root);
  const uint64_t slices = gen::sliceCount(s.count, sliceElems);
  for (int i = 0; i < n; ++i) {
    auto& ops = s.ranks[static_cast<size_t>(ring.rankAt(i))];
    const int d = mod(i - rootPos - 1, n);  // distance from the start of the chain
    OpKind kind = OpKind::RecvReduceSend;
    if (d == 0) {
      kind = OpKind::Send;
    } else if (d == n - 1) {
      kind = OpKind::RecvReduceCopy;
    }
    const auto step = static_cast<uint32_t>(d == n - 1 ? n - 2 : d);
    for (uint64_t sl = 0; sl < slices; ++sl) {
      const Range r = gen::slice({0, s.count}, sliceElems, sl);
      ops.push_back(makeOp(kind, Phase::Reduce, opSends(kind) ? ring.rankAt(i + 1) : -1,
                           opRecvs(kind) ? ring.rankAt(i - 1) : -1, in(r.begin), out(r.begin),
                           r.len, step, 0, static_cast<uint32_t>(sl)));
    }
  }
}

void ringBroadcast(Schedule& s, const Ring& ring, uint64_t sliceElems) {
  const int n = ring.n;
  const int rootPos = ring.positionOf(s.root);
  const uint64_t slices = gen::sliceCount(s.count, sliceElems);
  for (int i = 0; i < n; ++i) {
    auto& ops = s.ranks[static_cast<size_t>(ring.rankAt(i))];
    const int d = mod(i - rootPos, n);  // distance from the root
    OpKind kind = OpKind::RecvCopySend;
    if (d == 0) {
      kind = OpKind::Send;
    } else if (d == n - 1) {
      kind = OpKind::Recv;
    }
    const auto step = static_cast<uint32_t>(d == n - 1 ? n - 2 : d);
    for (uint64_t sl = 0; sl < slices; ++sl) {
      const Range r = gen::slice({0, s.count}, sliceElems, sl);
      if (d == 0) {
        // The root's own result is its input (NCCL copies sendbuff to recvbuff likewise).
        ops.push_back(makeOp(OpKind::Copy, Phase::Local, -1, -1, in(r.begin), out(r.begin), r.len,
                             0, 0, static_cast<uint32_t>(sl)));
      }
      ops.push_back(makeOp(kind, Phase::Broadcast, opSends(kind) ? ring.rankAt(i + 1) : -1,
                           opRecvs(kind) ? ring.rankAt(i - 1) : -1, in(r.begin), out(r.begin),
                           r.len, step, 0, static_cast<uint32_t>(sl)));
    }
  }
}

}  // namespace

Schedule ringSchedule(const GenParams& p) {
  Schedule s = gen::makeSkeleton("ring", p);
  Ring ring{gen::ringOrder(p), p.nranks};
  if (p.nranks == 1) {
    localCopy(s, s.count);
  } else {
    switch (p.collective) {
      case Collective::AllReduce: ringAllReduce(s, ring, p.sliceElems); break;
      case Collective::ReduceScatter: ringReduceScatter(s, ring, p.sliceElems); break;
      case Collective::AllGather: ringAllGather(s, ring, p.sliceElems); break;
      case Collective::Reduce: ringReduce(s, ring, p.sliceElems); break;
      case Collective::Broadcast: ringBroadcast(s, ring, p.sliceElems); break;
    }
  }
  // A chain's slices, or one rank's copy, never wait on a channel for more than one message.
  if (p.nranks == 1 || p.collective == Collective::Reduce ||
      p.collective == Collective::Broadcast) {
    s.window = 1;
  }
  gen::finishSteps(s);
  return s;
}

}  // namespace arl
