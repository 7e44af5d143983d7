// In-network all-reduce: a switch adds what its ranks send and multicasts the sum back, as
// NVIDIA's SHARP (Graham et al., "Scalable Hierarchical Aggregation Protocol (SHArP)", COMHPC
// 2016; the aggregation trees of Quantum InfiniBand switches) and NVLink SHARP (NVLS: NCCL's
// NVLS algorithm, the NVSwitch reducing loads from every GPU and multicasting stores) do.
//
// The switch is one more node of the schedule, rank n after the n ranks of the collective:
// a lab worker plays it. It holds no contribution and no result (Schedule::nonResultRanks = 1):
// its Input is never read and its Output is its accumulator. Two steps, each slice in turn:
// - step 0 (reduce): every rank sends slice j of its Input to the switch (Send); the switch
//   receives rank 0's (Recv) and adds every other rank's to it (RecvReduceCopy);
// - step 1 (multicast): the switch sends the finished slice j to every rank (n Sends, where
//   SHARP and NVLS send one multicast packet that the fabric copies), each rank receives it
//   into its Output (Recv).
// A rank sends slice j + 1 before it waits for slice j, so that the switch has the next slice
// coming while it multicasts this one. Each rank sends S and receives S once, whatever n: two
// alpha terms per slice pipeline, against the ring's 2(n - 1); the switch's port carries n S
// in and n S out, which bounds the collective (docs/algorithms.md).
#include <string>

#include "base/limits.h"
#include "gen_util.h"

namespace arl {

namespace {

using gen::Range;

void rankProgram(std::vector<Op>& prog, int sw, uint64_t count, uint64_t sliceElems) {
  const uint64_t slices = gen::sliceCount(count, sliceElems);
  auto recv = [&](uint64_t j) {
    const Range sl = gen::slice({0, count}, sliceElems, j);
    prog.push_back(gen::makeOp(OpKind::Recv, Phase::Broadcast, -1, sw, {}, gen::out(sl.begin),
                               sl.len, 1, 0, static_cast<uint32_t>(j)));
  };
  for (uint64_t j = 0; j < slices; ++j) {
    const Range sl = gen::slice({0, count}, sliceElems, j);
    prog.push_back(gen::makeOp(OpKind::Send, Phase::Reduce, sw, -1, gen::in(sl.begin), {}, sl.len,
                               0, 0, static_cast<uint32_t>(j)));
    if (j > 0) recv(j - 1);
  }
  if (slices > 0) recv(slices - 1);
}

void switchProgram(std::vector<Op>& prog, int n, uint64_t count, uint64_t sliceElems) {
  const uint64_t slices = gen::sliceCount(count, sliceElems);
  for (uint64_t j = 0; j < slices; ++j) {
    const Range sl = gen::slice({0, count}, sliceElems, j);
    const auto js = static_cast<uint32_t>(j);
    prog.push_back(
        gen::makeOp(OpKind::Recv, Phase::Reduce, -1, 0, {}, gen::out(sl.begin), sl.len, 0, 0, js));
    for (int r = 1; r < n; ++r) {
      prog.push_back(gen::makeOp(OpKind::RecvReduceCopy, Phase::Reduce, -1, r, gen::out(sl.begin),
                                 gen::out(sl.begin), sl.len, 0, 0, js));
    }
    for (int r = 0; r < n; ++r) {
      prog.push_back(gen::makeOp(OpKind::Send, Phase::Broadcast, r, -1, gen::out(sl.begin), {},
                                 sl.len, 1, 0, js));
    }
  }
}

}  // namespace

Schedule switchAllReduce(const GenParams& p) {
  if (p.nranks >= kMaxRanks) {
    throw GenError("switch needs one worker more than its ranks: at most " +
                   std::to_string(kMaxRanks - 1) + " ranks (got " + std::to_string(p.nranks) + ")");
  }
  Schedule s = gen::makeSkeleton("switch", p);
  const int n = p.nranks;
  s.nranks = n + 1;
  s.nonResultRanks = 1;
  s.ranks.assign(static_cast<size_t>(n + 1), {});
  for (int r = 0; r < n; ++r)
    rankProgram(s.ranks[static_cast<size_t>(r)], n, s.count, s.sliceElems);
  switchProgram(s.ranks[static_cast<size_t>(n)], n, s.count, s.sliceElems);
  gen::finishSteps(s);
  return s;
}

}  // namespace arl
