// Hierarchical (two-level) all-reduce: reduce-scatter inside each host, all-reduce across hosts
// among the ranks that own the same shard, all-gather inside each host. This is the scheme of
// Horovod's hierarchical allreduce and of 2D-ring / "hierarchical ring" all-reduce (Jia et
// al., "Highly scalable deep learning training system with mixed-precision", 2018; Ueno &
// Yokota, "Exhaustive study of hierarchical allreduce patterns for large messages", CCGrid
// 2019): the slow inter-host links carry only 1/K of the vector per rank.
//
// Hosts hold p.ranksPerHost = K consecutive ranks (0, or K >= n: one host), H = ceil(n / K)
// hosts; the last host may hold m < K ranks. The vector is cut into K shards
// (gen::part(count, K, s)); on a host of m ranks, local rank j owns the shards s with
// s % m == j (one shard each when m = K).
// - Phase 1, reduce-scatter inside each host: shard s travels along the host's ring as a chain
//   that starts after its owner and ends at it, each rank adding its Input (Send,
//   RecvReduceSend..., RecvReduceCopy into the owner's Output). With m = K this is ring
//   reduce-scatter; with m < K the shards form ceil(K/m) successive ring passes, each rank
//   handling at most one shard per step of a pass. K - 1 steps (m - 1 on the last host).
// - Phase 2, across hosts: for each shard, its owners (one per host, in host order) run a ring
//   all-reduce of it (the shard cut into H sub-blocks; NCCL's Send, RecvReduceSend,
//   RecvReduceCopySend, RecvCopySend, Recv). 2(H - 1) steps.
// - Phase 3, all-gather inside each host: each shard travels from its owner along the host's
//   ring (Send, RecvCopySend..., Recv). K - 1 steps.
// 2(K - 1) + 2(H - 1) steps. On a full host a rank sends 2(K-1)/K x count elements inside the
// host and 2(H-1)/H of its shard (count/K) across hosts; on a smaller last host its ranks own
// several shards and send correspondingly more.
//
// Op fields: `chunk` is the shard in phases 1 and 3 and shard x H + sub-block in phase 2.
// Every chain is pipelined by slice, slice-major like NCCL's ring loop, so one message per
// channel suffices (no deadlock at capacity 1): within a slice and pass every rank handles at most
// one chain per step, receiving before it sends. The phases use disjoint channels (inside a host,
// across hosts) and each runs to completion before the next on every rank. Input is read only
// in phase 1, and only for shards whose Output the rank does not write before reading them, so
// the schedule is also correct in place.
#include <algorithm>
#include <vector>

#include "gen_util.h"

namespace arl {

namespace {

using gen::Range;

int mod(int a, int m) { return ((a % m) + m) % m; }

struct Layout {
  int n = 0;
  int K = 0;  // ranks per full host, also the number of shards
  int H = 0;  // hosts
  uint64_t count = 0;
  int hostSize(int h) const { return std::min(K, n - h * K); }
  int rank(int host, int local) const { return host * K + local; }
  Range shard(int s) const {
    return gen::part(count, static_cast<uint64_t>(K), static_cast<uint64_t>(s));
  }
};

// Phases 1 (reduce = true) and 3 (reduce = false) on one host of m >= 2 ranks.
void intraHost(Schedule& s, const Layout& L, int host, bool reduce, uint32_t stepBase,
               uint64_t sliceElems) {
  const int m = L.hostSize(host);
  const int passes = (L.K + m - 1) / m;
  const uint64_t maxSlices = gen::sliceCount(L.shard(0).len, sliceElems);  // shard 0 is largest
  const Phase phase = reduce ? Phase::ReduceScatter : Phase::AllGather;
  for (int j = 0; j < m; ++j) {
    auto& prog = s.ranks[static_cast<size_t>(L.rank(host, j))];
    const int next = L.rank(host, (j + 1) % m);
    const int prev = L.rank(host, (j + m - 1) % m);
    for (uint64_t i = 0; i < maxSlices; ++i) {
      for (int u = 0; u < passes; ++u) {
        for (int t = 0; t < m; ++t) {
          // Reduce-scatter: the chain of shard class c ends at local rank c, so this rank is at
          // position t of it when c = j - t - 1. All-gather: the chain starts at c, c = j - t.
          const int c = mod(reduce ? j - t - 1 : j - t, m);
          const int sh = u * m + c;
          if (sh >= L.K) {
            continue;
          }
          const Range range = L.shard(sh);
          if (i >= gen::sliceCount(range.len, sliceElems)) {
            continue;
          }
          const Range sl = gen::slice(range, sliceElems, i);
          const auto chunk = static_cast<uint32_t>(sh);
          const auto slice = static_cast<uint32_t>(i);
          const uint32_t step = stepBase + static_cast<uint32_t>(t == m - 1 ? m - 2 : t);
          Op op;
          if (t == 0) {
            op = gen::makeOp(OpKind::Send, phase, next, -1,
                             reduce ? gen::in(sl.begin) : gen::out(sl.begin), {}, sl.len, step,
                             chunk, slice);
          } else if (t < m - 1) {
            op = reduce ? gen::makeOp(OpKind::RecvReduceSend, phase, next, prev, gen::in(sl.begin),
                                      {}, sl.len, step, chunk, slice)
                        : gen::makeOp(OpKind::RecvCopySend, phase, next, prev, {},
                                      gen::out(sl.begin), sl.len, step, chunk, slice);
          } else {
            op = reduce ? gen::makeOp(OpKind::RecvReduceCopy, phase, -1, prev, gen::in(sl.begin),
                                      gen::out(sl.begin), sl.len, step, chunk, slice)
                        : gen::makeOp(OpKind::Recv, phase, -1, prev, {}, gen::out(sl.begin), sl.len,
                                      step, chunk, slice);
          }
          prog.push_back(op);
        }
      }
    }
  }
}

// Phase 2: for every shard, a ring all-reduce over its owners (one per host) on Output.
void interHost(Schedule& s, const Layout& L, uint32_t stepBase, uint64_t sliceElems) {
  const int H = L.H;
  for (int host = 0; host < H; ++host) {
    const int m = L.hostSize(host);
    for (int j = 0; j < m; ++j) {
      auto& prog = s.ranks[static_cast<size_t>(L.rank(host, j))];
      std::vector<int> owned;
      for (int sh = j; sh < L.K; sh += m) {
        owned.push_back(sh);
      }
      // Ring neighbours of this rank in shard sh's ring: the owners on the adjacent hosts.
      auto owner = [&](int h, int sh) { return L.rank(h, sh % L.hostSize(h)); };
      const uint64_t maxSlices =
          gen::sliceCount(gen::part(L.shard(0).len, static_cast<uint64_t>(H), 0).len, sliceElems);
      for (uint64_t i = 0; i < maxSlices; ++i) {
        for (int sh : owned) {
          const Range shard = L.shard(sh);
          const int next = owner((host + 1) % H, sh);
          const int prev = owner((host + H - 1) % H, sh);
          for (int t = 0; t <= 2 * H - 2; ++t) {
            int b = 0;
            OpKind kind = OpKind::RecvCopySend;
            if (t == 0) {
              b = host - 1;
              kind = OpKind::Send;
            } else if (t < H - 1) {
              b = host - t - 1;
              kind = OpKind::RecvReduceSend;
            } else if (t == H - 1) {
              b = host;
              kind = OpKind::RecvReduceCopySend;
            } else if (t < 2 * H - 2) {
              b = host - (t - H + 1);
            } else {
              b = host + 1;
              kind = OpKind::Recv;
            }
            b = mod(b, H);
            Range sub = gen::part(shard.len, static_cast<uint64_t>(H), static_cast<uint64_t>(b));
            sub.begin += shard.begin;
            if (i >= gen::sliceCount(sub.len, sliceElems)) {
              continue;
            }
            const Range sl = gen::slice(sub, sliceElems, i);
            const uint32_t step = stepBase + static_cast<uint32_t>(t == 2 * H - 2 ? 2 * H - 3 : t);
            const Phase phase = t < H - 1 ? Phase::ReduceScatter : Phase::AllGather;
            const int sendTo = opSends(kind) ? next : -1;
            const int recvFrom = opRecvs(kind) ? prev : -1;
            prog.push_back(gen::makeOp(kind, phase, sendTo, recvFrom, gen::out(sl.begin),
                                       opWritesDst(kind) ? gen::out(sl.begin) : BufRef{}, sl.len,
                                       step, static_cast<uint32_t>(sh * H + b),
                                       static_cast<uint32_t>(i)));
          }
        }
      }
    }
  }
}

}  // namespace

// Two-level all-reduce over hosts of p.ranksPerHost ranks (see the file comment).
Schedule hierarchicalAllReduce(const GenParams& p) {
  Schedule s = gen::makeSkeleton("hierarchical", p);
  Layout L;
  L.n = p.nranks;
  L.K = (p.ranksPerHost == 0 || p.ranksPerHost >= p.nranks) ? p.nranks : p.ranksPerHost;
  L.H = (L.n + L.K - 1) / L.K;
  L.count = p.count;
  const auto base2 = static_cast<uint32_t>(L.K - 1);
  const auto base3 = base2 + static_cast<uint32_t>(2 * (L.H - 1));
  for (int h = 0; h < L.H; ++h) {
    if (L.hostSize(h) == 1) {
      // A rank alone on its host owns every shard; its Output starts as its Input.
      if (p.count > 0) {
        s.ranks[static_cast<size_t>(L.rank(h, 0))].push_back(gen::makeOp(
            OpKind::Copy, Phase::Local, -1, -1, gen::in(0), gen::out(0), p.count, 0, 0, 0));
      }
    } else {
      intraHost(s, L, h, true, 0, p.sliceElems);
    }
  }
  if (L.H > 1) {
    interHost(s, L, base2, p.sliceElems);
  }
  for (int h = 0; h < L.H; ++h) {
    if (L.hostSize(h) > 1) {
      intraHost(s, L, h, false, base3, p.sliceElems);
    }
  }
  gen::finishSteps(s);
  return s;
}

}  // namespace arl
