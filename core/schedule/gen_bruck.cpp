// Bruck all-gather, and the reduce-scatter and all-reduce built on it.
//
// Bruck, Ho, Kipnis, Upfal & Weathersby, "Efficient algorithms for all-to-all communications in
// multiport message-passing systems", IEEE TPDS 8(11), 1997; the concatenation (all-gather)
// algorithm, as MPICH's MPIR_Allgather_intra_brucks uses it for any number of ranks.
//
// - AllGather: ceil(log2 n) steps. At step k (distance d = 2^k) rank r holds blocks r .. r+d-1
//   (mod n); it sends the first min(d, n-d) of them to rank r-d and receives as many from rank
//   r+d, so after the step it holds 2d blocks (or all n). Each block goes straight to its place
//   in Output, so the final rotation of the paper's contiguous-buffer version is not needed;
//   the blocks of a step are neighbours (r .. r+m-1 wraps at most once), so a step is one
//   message, or two where it wraps past block n-1 (gen_blocks.h).
//   Each rank sends n-1 blocks: (n-1) x count elements.
// - ReduceScatter: the transpose of the all-gather (gen::transpose): the same moves backwards,
//   distances n/2 .. 1 (largest first), each receiver adding what it gets to its partial sum of
//   that block. The partial sums of other ranks' blocks live in Scratch (n x count elements).
//   ceil(log2 n) steps, (n-1) x count elements sent per rank.
// - AllReduce: that reduce-scatter, then the Bruck all-gather, over the n pieces of the vector
//   (gen::part): 2 ceil(log2 n) steps, each rank sends 2(n-1)/n of the vector when n divides
//   count, as ring does in 2(n-1) steps.
// Step kinds: Send and RecvReduceCopy in the reduce-scatter, Send and Recv in the all-gather.
// The last step moves the largest blocks over the longest distance (n/2): what PAT (gen_pat.cpp)
// turns around.
#include "gen_blocks.h"

namespace arl {

Schedule bruckSchedule(const GenParams& p) {
  return gen::blockCollective(
      "bruck", p, [](int n) { return gen::shiftAllGather(n, gen::powersOfTwoBelow(n)); },
      gen::identityOrder);
}

}  // namespace arl
