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
// On a D-dimensional torus (GenParams::torusDims) the steps take the dimensions in turn, as the
// paper runs Swing on tori: step s moves along dimension d = s mod D (a dimension whose log2
// steps are spent is skipped), at that dimension's k-th step, and a rank whose coordinate c in
// d is even talks to the rank at c + rho(k) in d, an odd one to c - rho(k), the other
// coordinates kept. Every peer is then |rho(k)| hops away along one dimension, where the 1-D
// form over the row-major ranks reaches across rows (ranks 0 and 11 are 3 hops apart on a 4x4
// torus). The reach sets and the two halves are as above. The paper's multi-port form (D
// collectives at once, each starting in another dimension) is left out: a lab rank sends one
// message at a time per peer and the lab's torus is distance-priced, so the single-port form
// shows the hops saved.
// Both need a power-of-two number of ranks here (every torus dimension a power of two): the
// paper's extension to other counts is not implemented, and the generators refuse such counts
// (rankCountRefusal()). Step kinds: Send and RecvReduceCopy (reduce-scatter, latency-optimal),
// Send and Recv (all-gather).
#include <bit>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gen_blocks.h"

namespace arl {

namespace {

using gen::Range;

int rho(int k) {
  int sum = 0;
  int term = 1;
  for (int i = 0; i <= k; ++i, term *= -2) sum += term;
  return sum;
}

int wrap(int v, int n) { return ((v % n) + n) % n; }

// The steps on a torus of `dims`: the dimensions in turn, each for its log2 steps.
std::vector<SwingStep> swingSteps(const std::vector<int>& dims) {
  std::vector<SwingStep> steps;
  std::vector<int> taken(dims.size(), 0);
  for (bool more = true; more;) {
    more = false;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (taken[d] == std::countr_zero(static_cast<unsigned>(dims[d]))) continue;
      steps.push_back({static_cast<int>(d), taken[d]++});
      more = true;
    }
  }
  return steps;
}

// Every step's peers: one dimension of n ranks without GenParams::torusDims, else the torus's.
class SwingPeers {
 public:
  SwingPeers(std::string_view algo, const GenParams& p) : n_(p.nranks) {
    if (std::string why = rankCountRefusal(algo, p.nranks); !why.empty()) throw GenError(why);
    dims_ = p.torusDims.empty() ? std::vector<int>{p.nranks} : p.torusDims;
    checkDims(algo);
    // Dimension d's stride in the row-major rank number, and the steps taken in turn.
    strides_.assign(dims_.size(), 1);
    for (size_t d = dims_.size() - 1; d > 0; --d) strides_[d - 1] = strides_[d] * dims_[d];
    steps_ = swingSteps(dims_);
  }
  int steps() const { return static_cast<int>(steps_.size()); }
  int ranks() const { return n_; }
  int peer(int r, int s) const {
    const auto [d, k] = steps_[static_cast<size_t>(s)];
    const int stride = strides_[static_cast<size_t>(d)], size = dims_[static_cast<size_t>(d)];
    const int c = (r / stride) % size;
    const int to = wrap(c % 2 == 0 ? c + rho(k) : c - rho(k), size);
    return r + (to - c) * stride;
  }

 private:
  void checkDims(std::string_view algo) const {
    int product = 1;
    for (int d : dims_) {
      if (d < 1 || (d & (d - 1)) != 0) {
        throw GenError(std::string(algo) +
                       " on a torus needs every dimension a power of two (got " +
                       std::to_string(d) + ")");
      }
      product *= d;
    }
    if (product != n_) {
      throw GenError(std::string(algo) + ": the torus's dimensions hold " +
                     std::to_string(product) + " ranks, the run has " + std::to_string(n_));
    }
  }

  int n_;
  std::vector<int> dims_, strides_;
  std::vector<SwingStep> steps_;
};

// reach[s][r] as a rank mask (n <= kMaxRanks = 64): the ranks r reaches in steps s .. L-1.
std::vector<std::vector<uint64_t>> reachSets(const SwingPeers& peers) {
  const int n = peers.ranks();
  const int steps = peers.steps();
  std::vector<std::vector<uint64_t>> reach(static_cast<size_t>(steps) + 1,
                                           std::vector<uint64_t>(static_cast<size_t>(n)));
  for (int r = 0; r < n; ++r) reach[static_cast<size_t>(steps)][static_cast<size_t>(r)] = 1ULL << r;
  for (int s = steps - 1; s >= 0; --s) {
    const auto& next = reach[static_cast<size_t>(s) + 1];
    for (int r = 0; r < n; ++r) {
      const uint64_t mine = next[static_cast<size_t>(r)];
      const uint64_t theirs = next[static_cast<size_t>(peers.peer(r, s))];
      ARL_ENFORCE((mine & theirs) == 0, "swing reach sets overlap at step " << s << ", rank " << r);
      reach[static_cast<size_t>(s)][static_cast<size_t>(r)] = mine | theirs;
    }
  }
  return reach;
}

// The all-gather half: steps s = L-1 .. 0, rank r handing reach(r, s+1) to its peer.
std::vector<gen::BlockStep> swingAllGather(const SwingPeers& peers) {
  const int n = peers.ranks();
  const auto reach = reachSets(peers);
  std::vector<gen::BlockStep> out;
  for (int s = static_cast<int>(reach.size()) - 2; s >= 0; --s) {
    gen::BlockStep step;
    for (int r = 0; r < n; ++r) {
      const uint64_t mine = reach[static_cast<size_t>(s) + 1][static_cast<size_t>(r)];
      for (int b = 0; b < n; ++b) {
        if ((mine >> b) & 1) step.push_back({r, peers.peer(r, s), b});
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

std::vector<int> swingOrder(const SwingPeers& peers) {
  const int n = peers.ranks();
  const auto reach = reachSets(peers);
  std::vector<int> order;
  appendDepthFirst(reach, reach[0][0], 0, order);
  std::vector<int> piece(static_cast<size_t>(n));
  for (int pos = 0; pos < n; ++pos)
    piece[static_cast<size_t>(order[static_cast<size_t>(pos)])] = pos;
  return piece;
}

}  // namespace

SwingStep swingStep(const std::vector<int>& dims, int nranks, int s) {
  const std::vector<SwingStep> steps = swingSteps(dims.empty() ? std::vector<int>{nranks} : dims);
  return s >= 0 && static_cast<size_t>(s) < steps.size() ? steps[static_cast<size_t>(s)]
                                                         : SwingStep{};
}

Schedule swingAllReduce(const GenParams& p) {
  gen::makeSkeleton("swing", p);
  const SwingPeers peers("swing", p);
  return gen::blockCollective(
      "swing", p, [&](int) { return swingAllGather(peers); },
      [&](int) { return swingOrder(peers); });
}

// Within a step each slice is sent and then received and reduced, on both partners alike (as
// recursive-doubling does), so one message per channel suffices.
Schedule swingLatencyAllReduce(const GenParams& p) {
  Schedule s = gen::makeSkeleton("swing-latency", p);
  const SwingPeers peers("swing-latency", p);
  const int steps = peers.steps();
  if (p.nranks == 1) {
    gen::singleRankCopy(s);
    gen::finishSteps(s);
    return s;
  }
  const uint64_t slices = gen::sliceCount(p.count, p.sliceElems);
  for (int r = 0; r < p.nranks; ++r) {
    auto& prog = s.ranks[static_cast<size_t>(r)];
    for (int k = 0; k < steps; ++k) {
      const int peer = peers.peer(r, k);
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
