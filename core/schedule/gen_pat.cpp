// PAT (Parallel Aggregated Trees), NCCL's logarithmic all-gather and reduce-scatter:
// S. Jeaugey, "PAT: a new algorithm for all-gather and reduce-scatter operations at scale",
// arXiv:2506.20252, 2025 (NCCL 2.23).
//
// PAT is Bruck's all-gather with the dimensions reversed: the long hops come first, when each
// rank forwards a single block, and the largest transfers happen last, between neighbours
// (distance 1), which keeps heavy traffic off the long paths of a large fabric.
// - AllGather: distances 2^(K-1), ..., 2, 1 with K = ceil(log2 n), one step each. Rank r holds
//   the blocks r + x for every x that is a sum of the distances already used (x < n); at
//   distance d it sends each of them with x + d < n to rank r-d and receives the matching ones
//   from rank r+d. Every x in 0..n-1 has one binary expansion, so each block arrives once, for
//   any n. K steps, (n-1) x count elements sent per rank; the step at distance d sends up to
//   n/(2d) blocks.
// - ReduceScatter: the transpose (distances 1, 2, ..., 2^(K-1)), receivers adding; partial sums
//   of other ranks' blocks in Scratch. K steps, (n-1) x count elements per rank.
// - AllReduce: PAT reduce-scatter then PAT all-gather over the n pieces (gen::part):
//   2K steps, 2(n-1)/n of the vector sent per rank when n divides count.
// The paper bounds how many blocks one step aggregates by the size of NCCL's intermediate
// buffer (more steps when it is small). Here blocks are received straight into their place, so
// no staging buffer exists and the schedule is the unbounded case: dimension-reversed Bruck.
// A step's blocks are strided (r + multiples of 2d): in the all-reduce the pieces are laid out
// in bit-reversed order, which makes them neighbours, so on a power of two a step is one
// message; all-gather and reduce-scatter keep NCCL's buffer layout, so there each block of a
// step is a message of its own (what the paper's packing into its buffer avoids). Step kinds
// as bruck's.
#include "gen_blocks.h"

#include <algorithm>

namespace arl {

namespace {

// The all-reduce's layout: block b at the position of b's bit reversal among 0..n-1. At
// distance d a rank holds the blocks r + (multiples of 2d), which share their low bits: in
// bit-reversed order their high bits, a run of neighbouring pieces, so on a power of two each
// step is one message.
std::vector<int> bitReversedOrder(int n) {
  int bits = 0;
  while ((1 << bits) < n) ++bits;
  auto reversed = [bits](int b) {
    int r = 0;
    for (int i = 0; i < bits; ++i) r |= ((b >> i) & 1) << (bits - 1 - i);
    return r;
  };
  std::vector<int> blocks = gen::identityOrder(n);
  std::sort(blocks.begin(), blocks.end(), [&](int a, int b) { return reversed(a) < reversed(b); });
  std::vector<int> piece(static_cast<size_t>(n));
  for (int pos = 0; pos < n; ++pos)
    piece[static_cast<size_t>(blocks[static_cast<size_t>(pos)])] = pos;
  return piece;
}

}  // namespace

Schedule patSchedule(const GenParams& p) {
  return gen::blockCollective(
      "pat", p,
      [](int n) {
        std::vector<int> distances = gen::powersOfTwoBelow(n);
        std::reverse(distances.begin(), distances.end());
        return gen::shiftAllGather(n, distances);
      },
      bitReversedOrder);
}

}  // namespace arl
