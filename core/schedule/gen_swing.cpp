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
// Other rank counts, as the authors' library extends them
// (libswing, github.com/HLC-Lab/bine_trees_fugaku, lib/libswing.cc):
// - swing, an even n: the same rule mod n still pairs the ranks (rho(s) is odd, so an even rank's
//   peer is odd and the other way round), over ceil(log2 n) steps. The reach sets of the steps
//   now overlap, so a block is sent only at the step that reaches its receiver first in the
//   all-gather (the last in the reduce-scatter): at all-gather step s rank r hands its peer the
//   blocks it holds that the peer does not. Each rank still receives each block once: 2(n-1)/n
//   of the vector per rank, as on a power of two; a step's blocks are no longer one run of
//   pieces, so a step can take a few messages (the layout follows rank 0's arrival order, which
//   keeps one message a step on a power of two and on 3 x 2^k ranks).
// - swing, an odd n: no rule pairs every rank, so rank n-1 folds into its neighbour n-2 (it
//   hands it its partial sums of the other blocks first and gets them back finished last, its
//   own block taken back and forth through n-2), and the n-1 others run the even form:
//   2 ceil(log2(n-1)) + 4 steps.
// - swing-latency, n not a power of two (libswing's MPI_Allreduce_lat_optimal_swing): with p
//   the largest power of two below n, the last 2(n-p) ranks pair up with their neighbour
//   (2p-n + 2i, 2p-n + 2i + 1); the second of each pair sends its vector to the first and sits
//   out, the p ranks left run the power-of-two form, then the first sends the result back:
//   log2 p + 2 steps, as recursive doubling's fold, between neighbours.
// On a torus every dimension must still be a power of two. Step kinds: Send and RecvReduceCopy
// (reduce-scatter, latency-optimal, the fold), Send and Recv (all-gather, the unfold).
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

int ceilLog2(int n) {
  return n <= 1 ? 0 : static_cast<int>(std::bit_width(static_cast<unsigned>(n - 1)));
}

uint64_t bit(int r) { return 1ULL << r; }

// The ranks that exchange: all of them on a power of two; else swing leaves out rank n-1 of an
// odd n, swing-latency all but the largest power of two below n (the file comment).
int exchangingRanks(bool latency, int n) {
  if (n <= 1 || std::has_single_bit(static_cast<unsigned>(n))) return n;
  if (latency) return static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  return n % 2 == 0 ? n : n - 1;
}

// The exchanges on a torus of `dims`: the dimensions in turn, each for ceil(log2) of its size.
std::vector<SwingStep> exchangeSteps(const std::vector<int>& dims) {
  int ranks = 1;
  for (int d : dims) ranks *= d;
  std::vector<SwingStep> steps;
  std::vector<int> taken(dims.size(), 0);
  for (bool more = true; more;) {
    more = false;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (taken[d] == ceilLog2(dims[d])) continue;
      steps.push_back({SwingStep::Role::Exchange, static_cast<int>(d), taken[d]++, ranks});
      more = true;
    }
  }
  return steps;
}

// Every exchange's peers among the m exchanging ranks: one dimension without
// GenParams::torusDims, else the torus's (whose dimensions hold all the run's ranks).
class SwingPeers {
 public:
  SwingPeers(std::string_view algo, const GenParams& p, int m) : m_(m) {
    if (std::string why = rankCountRefusal(algo, p.nranks); !why.empty()) throw GenError(why);
    dims_ = p.torusDims.empty() ? std::vector<int>{m} : p.torusDims;
    if (!p.torusDims.empty()) checkTorus(algo, p.nranks);
    // Dimension d's stride in the row-major rank number, and the steps taken in turn.
    strides_.assign(dims_.size(), 1);
    for (size_t d = dims_.size() - 1; d > 0; --d) strides_[d - 1] = strides_[d] * dims_[d];
    steps_ = exchangeSteps(dims_);
  }
  int steps() const { return static_cast<int>(steps_.size()); }
  int ranks() const { return m_; }
  int peer(int r, int s) const {
    const SwingStep& st = steps_[static_cast<size_t>(s)];
    const int stride = strides_[static_cast<size_t>(st.dimension)];
    const int size = dims_[static_cast<size_t>(st.dimension)];
    const int c = (r / stride) % size;
    const int to = wrap(c % 2 == 0 ? c + rho(st.k) : c - rho(st.k), size);
    return r + (to - c) * stride;
  }

 private:
  void checkTorus(std::string_view algo, int n) const {
    int product = 1;
    for (int d : dims_) {
      if (d < 1 || !std::has_single_bit(static_cast<unsigned>(d))) {
        throw GenError(std::string(algo) +
                       " on a torus needs every dimension a power of two (got " +
                       std::to_string(d) + ")");
      }
      product *= d;
    }
    if (product != n) {
      throw GenError(std::string(algo) + ": the torus's dimensions hold " +
                     std::to_string(product) + " ranks, the run has " + std::to_string(n));
    }
  }

  int m_;
  std::vector<int> dims_, strides_;
  std::vector<SwingStep> steps_;
};

// The bandwidth-optimal form's all-gather on n ranks, and the AllReduce layout (BlockPlan's
// `piece`) that keeps each step's blocks side by side.
struct SwingBlocks {
  std::vector<gen::BlockStep> allGather;
  std::vector<int> piece;
};

// At all-gather step s = L-1 .. 0 rank r hands peer(r, s) every block it holds that the peer
// does not (on a power of two: all it holds, reach(r, s+1)). held[r] lists r's blocks in the
// order they reached it, a peer's in the peer's order; rank 0's final order is the layout. An
// odd n's rank n-1 hands its block to n-2 first and gets the others from it last.
SwingBlocks swingBlocks(const SwingPeers& peers, int n) {
  const int m = peers.ranks();
  std::vector<std::vector<int>> held(static_cast<size_t>(n));
  std::vector<uint64_t> mask(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    held[static_cast<size_t>(r)] = {r};
    mask[static_cast<size_t>(r)] = bit(r);
  }
  SwingBlocks out;
  auto give = [&](gen::BlockStep& step, int from, int to, int b) {
    step.push_back({from, to, b});
    held[static_cast<size_t>(to)].push_back(b);
    mask[static_cast<size_t>(to)] |= bit(b);
  };
  if (m < n) {
    gen::BlockStep fold;
    give(fold, n - 1, m - 1, n - 1);
    out.allGather.push_back(std::move(fold));
  }
  for (int s = peers.steps() - 1; s >= 0; --s) {
    const auto before = held;
    const auto beforeMask = mask;
    gen::BlockStep step;
    for (int r = 0; r < m; ++r) {
      const int q = peers.peer(r, s);
      ARL_ENFORCE(peers.peer(q, s) == r, "swing step " << s << " does not pair rank " << r);
      for (int b : before[static_cast<size_t>(r)]) {
        if ((beforeMask[static_cast<size_t>(q)] & bit(b)) == 0) give(step, r, q, b);
      }
    }
    out.allGather.push_back(std::move(step));
  }
  for (int r = 0; r < m; ++r) {
    ARL_ENFORCE(static_cast<int>(held[static_cast<size_t>(r)].size()) == n,
                "swing on " << n << " ranks: rank " << r << " holds "
                            << held[static_cast<size_t>(r)].size() << " blocks after "
                            << peers.steps() << " steps");
  }
  if (m < n) {
    gen::BlockStep unfold;
    for (int b : std::vector<int>(held[static_cast<size_t>(m) - 1])) {
      if (b != n - 1) give(unfold, m - 1, n - 1, b);
    }
    out.allGather.push_back(std::move(unfold));
  }
  out.piece.assign(static_cast<size_t>(n), 0);
  for (int pos = 0; pos < n; ++pos)
    out.piece[static_cast<size_t>(held[0][static_cast<size_t>(pos)])] = pos;
  return out;
}

// Rank v of the p exchanging ranks of swing-latency on n: ranks below 2p - n keep their number,
// the first of each pair beyond stands for it (the file comment).
int latencyRankOf(int v, int n, int p) {
  const int firstPaired = 2 * p - n;
  return v < firstPaired ? v : firstPaired + 2 * (v - firstPaired);
}

}  // namespace

SwingStep swingStep(bool latency, const std::vector<int>& dims, int nranks, int s) {
  const int m = dims.empty() ? exchangingRanks(latency, nranks) : nranks;
  const std::vector<SwingStep> exchanges = exchangeSteps(dims.empty() ? std::vector<int>{m} : dims);
  const int L = static_cast<int>(exchanges.size());
  const bool folds = m != nranks;
  auto exchange = [&](int k) {
    return k >= 0 && k < L ? exchanges[static_cast<size_t>(k)] : SwingStep{};
  };
  auto role = [&](SwingStep::Role r) { return SwingStep{r, 0, 0, m}; };
  if (s < 0) return {};
  if (latency) {
    if (folds && s == 0) return role(SwingStep::Role::Fold);
    if (folds && s == L + 1) return role(SwingStep::Role::Unfold);
    return exchange(s - (folds ? 1 : 0));
  }
  // Reduce-scatter: [fold] exchanges 0 .. L-1 [unfold]; all-gather: [fold] L-1 .. 0 [unfold].
  const int half = L + (folds ? 2 : 0);
  if (s >= 2 * half) return {};
  const int t = s % half;
  if (folds && t == 0) return role(SwingStep::Role::Fold);
  if (folds && t == half - 1) return role(SwingStep::Role::Unfold);
  const int k = t - (folds ? 1 : 0);
  return exchange(s < half ? k : L - 1 - k);
}

Schedule swingAllReduce(const GenParams& p) {
  gen::makeSkeleton("swing", p);
  const SwingPeers peers("swing", p, exchangingRanks(false, p.nranks));
  const SwingBlocks blocks = swingBlocks(peers, p.nranks);
  return gen::blockCollective(
      "swing", p, [&](int) { return blocks.allGather; }, [&](int) { return blocks.piece; });
}

// Within a step each slice is sent and then received and reduced, on both partners alike (as
// recursive-doubling does), so one message per channel suffices. Folding pairs stream the
// whole vector one way, slice by slice, before and after.
Schedule swingLatencyAllReduce(const GenParams& p) {
  Schedule s = gen::makeSkeleton("swing-latency", p);
  const int n = p.nranks;
  const int m = exchangingRanks(true, n);
  const SwingPeers peers("swing-latency", p, m);
  const int steps = peers.steps();
  if (n == 1) {
    gen::singleRankCopy(s);
    gen::finishSteps(s);
    return s;
  }
  const uint64_t slices = gen::sliceCount(p.count, p.sliceElems);
  const auto fold = static_cast<uint32_t>(m < n ? 1 : 0);
  // One way, slice by slice: the fold reduces into the receiver's Output, the unfold copies.
  auto oneWay = [&](int from, int to, bool reduce, uint32_t step) {
    for (uint64_t j = 0; j < slices; ++j) {
      const Range sl = gen::slice({0, p.count}, p.sliceElems, j);
      const auto js = static_cast<uint32_t>(j);
      const BufRef src = reduce ? gen::in(sl.begin) : gen::out(sl.begin);
      s.ranks[static_cast<size_t>(from)].push_back(
          gen::makeOp(OpKind::Send, reduce ? Phase::Reduce : Phase::Broadcast, to, -1, src, {},
                      sl.len, step, 0, js));
      s.ranks[static_cast<size_t>(to)].push_back(gen::makeOp(
          reduce ? OpKind::RecvReduceCopy : OpKind::Recv, reduce ? Phase::Reduce : Phase::Broadcast,
          -1, from, reduce ? gen::in(sl.begin) : BufRef{}, gen::out(sl.begin), sl.len, step, 0,
          js));
    }
  };
  const int firstPaired = 2 * m - n;
  for (int r = firstPaired; r + 1 < n; r += 2) oneWay(r + 1, r, true, 0);
  for (int v = 0; v < m; ++v) {
    const int r = latencyRankOf(v, n, m);
    const bool folded = r >= firstPaired && m < n;  // its Output already holds its pair's sum
    auto& prog = s.ranks[static_cast<size_t>(r)];
    for (int k = 0; k < steps; ++k) {
      const int peer = latencyRankOf(peers.peer(v, k), n, m);
      for (uint64_t j = 0; j < slices; ++j) {
        const Range sl = gen::slice({0, p.count}, p.sliceElems, j);
        const BufRef partial = k == 0 && !folded ? gen::in(sl.begin) : gen::out(sl.begin);
        const auto step = fold + static_cast<uint32_t>(k);
        const auto js = static_cast<uint32_t>(j);
        prog.push_back(
            gen::makeOp(OpKind::Send, Phase::Reduce, peer, -1, partial, {}, sl.len, step, 0, js));
        prog.push_back(gen::makeOp(OpKind::RecvReduceCopy, Phase::Reduce, -1, peer, partial,
                                   gen::out(sl.begin), sl.len, step, 0, js));
      }
    }
  }
  for (int r = firstPaired; r + 1 < n; r += 2) {
    oneWay(r, r + 1, false, fold + static_cast<uint32_t>(steps));
  }
  gen::finishSteps(s);
  return s;
}

}  // namespace arl
