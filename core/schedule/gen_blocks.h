// Block moves: the shared emitter of the logarithmic all-gather and reduce-scatter generators
// (bruck, pat, swing). Such an algorithm is a list of steps, each a list of moves "rank
// `from` hands block `block` to rank `to`"; the emitter turns them into ops with the right
// kinds and buffers for the collective, so each generator states only who sends which block
// when (private to core/schedule).
//
// The moves of one step from one rank to one peer whose blocks lie side by side in the
// buffers of both ends travel as one message, as the papers' contiguous buffers do: a step
// then costs one latency per slice, not one per block.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gen_util.h"

namespace arl::gen {

// One block handed from one rank to another within a step.
struct BlockMove {
  int from = 0;
  int to = 0;
  int block = 0;
};

// A step's moves. Within a step every rank sends to at most one peer and receives from at most
// one peer.
using BlockStep = std::vector<BlockMove>;

// Where the n blocks of a collective live. AllReduce: block b is the piece piece[b] of the
// vector's n pieces (gen::part) in Input and Output; the generator picks `piece` so that the
// blocks a step moves are neighbours. ReduceScatter: block b is Input[b*count, (b+1)*count); a
// rank's own block sums into Output, the others into Scratch at their Input offset. AllGather:
// block b is Output[b*count, (b+1)*count), and the rank's own block starts in Input.
class BlockPlan {
 public:
  BlockPlan(Schedule& s, uint64_t sliceElems, std::vector<int> piece);

  // Appends the ops of `steps`, numbered from `firstStep`. ReduceScatter phases receive with
  // RecvReduceCopy into the block's accumulator; AllGather phases receive with Recv into
  // Output. Throws (ARL_ENFORCE) when a rank sends a block it does not hold.
  void emit(const std::vector<BlockStep>& steps, Phase phase, uint32_t firstStep);

  // AllGather only: each rank copies its Input into its block of Output (before any step).
  void copyOwnBlocks();

 private:
  // One message: consecutive blocks from one rank to one peer, contiguous at both ends.
  struct Message {
    int from = 0;
    int to = 0;
    int chunk = 0;  // the first block's id
    BufRef src;     // sender's operand
    BufRef own;     // receiver's operand to reduce with (ReduceScatter)
    BufRef dst;     // receiver's destination
    uint64_t len = 0;
  };
  Range range(int block) const;
  BufRef accumulator(int rank, int block) const;
  Message messageOf(const BlockMove& m, Phase phase) const;
  std::vector<Message> messages(const BlockStep& step, Phase phase) const;
  void emitRank(int rank, const std::vector<Message>& msgs, Phase phase, uint32_t step);

  Schedule& s_;
  uint64_t sliceElems_;
  std::vector<int> piece_;
  // touched_[r][b]: rank r already holds block b (AllGather) or a partial sum of it in its
  // accumulator (ReduceScatter).
  std::vector<std::vector<bool>> touched_;
};

// Bruck-style all-gather over distances taken in the given order (each a power of two below
// n, every one used once): at distance d each rank sends to rank - d every block (rank + x) it
// holds with x + d < n. Rank r starts with block r and ends with all n, each received once.
std::vector<BlockStep> shiftAllGather(int n, const std::vector<int>& distances);

// The transpose of an all-gather: the same moves backwards in time and direction, so that the
// contributions to block b flow along the reversed broadcast tree of b and meet at rank b.
std::vector<BlockStep> transpose(const std::vector<BlockStep>& allGather);

// A whole collective from one all-gather and its transpose: AllGather runs the all-gather after
// each rank copies its own block, ReduceScatter runs its transpose, AllReduce runs the transpose
// and then the all-gather (2 x its steps). Validates p before it calls `allGather(n)` and
// `piece(n)` (n >= 2; piece: the AllReduce layout, see BlockPlan).
Schedule blockCollective(std::string_view algo, const GenParams& p,
                         const std::function<std::vector<BlockStep>(int)>& allGather,
                         const std::function<std::vector<int>(int)>& piece);

// Powers of two below n, ascending (1, 2, 4, ...): ceil(log2 n) of them.
std::vector<int> powersOfTwoBelow(int n);

// 0, 1, ..., n-1.
std::vector<int> identityOrder(int n);

}  // namespace arl::gen
