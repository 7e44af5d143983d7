// Swing all-reduce: De Sensi, Bonato, Saam & Hoefler, "Swing: Short-cutting Rings for Higher
// Bandwidth Allreduce", NSDI 2024 (arXiv:2401.09356).
//
// At step s an even rank r talks to r + rho(s), an odd one to r - rho(s) (mod n), with
// rho(s) = sum_{i=0..s} (-2)^i = 1, -1, 3, -5, 11, ...: the peers alternate sides and the
// distance grows as |rho(s)| ~ 2^(s+1)/3, shorter than recursive doubling's 2^s, which on a
// torus or ring-like fabric crosses fewer links. rho(s) is odd, so the peer of an even rank is
// odd and vice versa: every step pairs the ranks.
// - swing (bandwidth-optimal): reduce-scatter then all-gather, log2 n steps each. Let
//   reach(r, s) be the ranks r reaches in steps s .. log2 n - 1 (itself included):
//   reach(r, log2 n) = {r}, reach(r, s) = reach(r, s+1) u reach(peer(r, s), s+1), disjoint for a
//   power of two. At reduce-scatter step s rank r sends its partial sums
//   of the blocks of reach(peer, s+1) and adds the peer's partial sums of reach(r, s+1): the blocks
//   halve every step, n/2, n/4, ..., 1. The all-gather is its transpose. 2 log2 n steps; each rank
//   sends 2(n-1)/n of the vector when n divides count, as ring and halving-doubling.
// - swing-latency (latency-optimal): log2 n steps, each an exchange of the whole partial sum
//   with peer(r, s) and a reduction; each rank sends log2 n x count elements.
// Both need a power-of-two number of ranks here: the paper's extension to other counts is not
// implemented, and the generators refuse such counts (rankCountRefusal()). Step kinds: Send and
// RecvReduceCopy (reduce-scatter, latency-optimal), Send and Recv (all-gather).
#include <bit>
#include <string>

#include "gen_blocks.h"

namespace arl {

namespace {

using gen::Range;

int swingPeer(int r, int s, int n) {
  int rho = 0;
  int term = 1;
  for (int i = 0; i <= s; ++i, term *= -2) rho += term;
  const int peer = (r % 2 == 0) ? r + rho : r - rho;
  return ((peer % n) + n) % n;
}

int stepsOf(std::string_view algo, const GenParams& p) {
  if (std::string why = rankCountRefusal(algo, p.nranks); !why.empty()) throw GenError(why);
  return std::countr_zero(static_cast<unsigned>(p.nranks));
}

// reach[s][r] as a rank mask (n <= kMaxRanks = 64): the ranks r reaches in steps s .. L-1.
std::vector<std::vector<uint64_t>> reachSets(int n) {
  const int steps = std::countr_zero(static_cast<unsigned>(n));
  std::vector<std::vector<uint64_t>> reach(static_cast<size_t>(steps) + 1,
                                           std::vector<uint64_t>(static_cast<size_t>(n)));
  for (int r = 0; r < n; ++r) reach[static_cast<size_t>(steps)][static_cast<size_t>(r)] = 1ULL << r;
  for (int s = steps - 1; s >= 0; --s) {
    const auto& next = reach[static_cast<size_t>(s) + 1];
    for (int r = 0; r < n; ++r) {
      const uint64_t mine = next[static_cast<size_t>(r)];
      const uint64_t theirs = next[static_cast<size_t>(swingPeer(r, s, n))];
      ARL_ENFORCE((mine & theirs) == 0, "swing reach sets overlap at step " << s << ", rank " << r);
      reach[static_cast<size_t>(s)][static_cast<size_t>(r)] = mine | theirs;
    }
  }
  return reach;
}

// The all-gather half: steps s = L-1 .. 0, rank r handing reach(r, s+1) to its peer.
std::vector<gen::BlockStep> swingAllGather(int n) {
  const auto reach = reachSets(n);
  std::vector<gen::BlockStep> out;
  for (int s = static_cast<int>(reach.size()) - 2; s >= 0; --s) {
    gen::BlockStep step;
    for (int r = 0; r < n; ++r) {
      const uint64_t mine = reach[static_cast<size_t>(s) + 1][static_cast<size_t>(r)];
      for (int b = 0; b < n; ++b) {
        if ((mine >> b) & 1) step.push_back({r, swingPeer(r, s, n), b});
      }
    }
    out.push_back(std::move(step));
  }
  return out;
}

// The reach sets nest (each of step s is two of step s+1), so listing the blocks depth first
// along that nesting makes every reach set a run of neighbouring pieces: each step of the
// reduce-scatter and the all-gather is one message, as the paper's contiguous layout.
void appendDepthFirst(const std::vector<std::vector<uint64_t>>& reach, uint64_t group, size_t s,
                      std::vector<int>& order) {
  if (s + 1 == reach.size()) {
    order.push_back(std::countr_zero(group));
    return;
  }
  const uint64_t first = reach[s + 1][static_cast<size_t>(std::countr_zero(group))];
  ARL_ENFORCE((first & ~group) == 0, "swing reach sets do not nest at step " << s);
  appendDepthFirst(reach, first, s + 1, order);
  appendDepthFirst(reach, group & ~first, s + 1, order);
}

std::vector<int> swingOrder(int n) {
  const auto reach = reachSets(n);
  std::vector<int> order;
  appendDepthFirst(reach, reach[0][0], 0, order);
  std::vector<int> piece(static_cast<size_t>(n));
  for (int pos = 0; pos < n; ++pos)
    piece[static_cast<size_t>(order[static_cast<size_t>(pos)])] = pos;
  return piece;
}

}  // namespace

Schedule swingAllReduce(const GenParams& p) {
  gen::makeSkeleton("swing", p);
  stepsOf("swing", p);
  return gen::blockCollective("swing", p, swingAllGather, swingOrder);
}

// Within a step each slice is sent and then received and reduced, on both partners alike (as
// recursive-doubling does), so one message per channel suffices.
Schedule swingLatencyAllReduce(const GenParams& p) {
  Schedule s = gen::makeSkeleton("swing-latency", p);
  const int steps = stepsOf("swing-latency", p);
  if (p.nranks == 1) {
    gen::singleRankCopy(s);
    gen::finishSteps(s);
    return s;
  }
  const uint64_t slices = gen::sliceCount(p.count, p.sliceElems);
  for (int r = 0; r < p.nranks; ++r) {
    auto& prog = s.ranks[static_cast<size_t>(r)];
    for (int k = 0; k < steps; ++k) {
      const int peer = swingPeer(r, k, p.nranks);
      for (uint64_t j = 0; j < slices; ++j) {
        const Range sl = gen::slice({0, p.count}, p.sliceElems, j);
        const BufRef partial = k == 0 ? gen::in(sl.begin) : gen::out(sl.begin);
        const auto step = static_cast<uint32_t>(k);
        const auto js = static_cast<uint32_t>(j);
        prog.push_back(
            gen::makeOp(OpKind::Send, Phase::Reduce, peer, -1, partial, {}, sl.len, step, 0, js));
        prog.push_back(gen::makeOp(OpKind::RecvReduceCopy, Phase::Reduce, -1, peer, partial,
                                   gen::out(sl.begin), sl.len, step, 0, js));
      }
    }
  }
  gen::finishSteps(s);
  return s;
}

}  // namespace arl
