// Helpers shared by the schedule generators (private to core/src).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/errors.h"
#include "schedule/generators.h"
#include "schedule/schedule.h"

namespace arl::gen {

// Half-open element range [begin, begin + len).
struct Range {
  uint64_t begin = 0;
  uint64_t len = 0;
};

// Balanced split of `count` elements into `parts` contiguous ranges: the first count % parts
// ranges get one element more. Every rank computes the same split, so empty ranges are
// skipped identically on both ends of a message.
inline Range part(uint64_t count, uint64_t parts, uint64_t i) {
  const uint64_t base = count / parts;
  const uint64_t extra = count % parts;
  const uint64_t begin = i * base + (i < extra ? i : extra);
  return {begin, base + (i < extra ? 1 : 0)};
}

// Number of slices of at most `sliceElems` elements covering `len` elements.
inline uint64_t sliceCount(uint64_t len, uint64_t sliceElems) {
  return len == 0 ? 0 : (len + sliceElems - 1) / sliceElems;
}

// Range of slice `j` inside range `r`.
inline Range slice(Range r, uint64_t sliceElems, uint64_t j) {
  const uint64_t b = r.begin + j * sliceElems;
  const uint64_t end = r.begin + r.len;
  return {b, (b + sliceElems < end) ? sliceElems : end - b};
}

// Validates the parameters every generator shares and returns a schedule with its header
// (sizes, ranks vector) filled in. Throws GenError naming the bad parameter.
Schedule makeSkeleton(std::string_view algo, const GenParams& p);

// Ring order: p.ring if given (validated as a permutation), else the identity.
std::vector<int> ringOrder(const GenParams& p);

// One local copy of Input to Output for a single rank (nothing to exchange): `count` elements,
// the whole result of every collective when n = 1.
void singleRankCopy(Schedule& s);

// Sets s.nsteps to max(op.step) + 1 over all ops (0 when there are none).
void finishSteps(Schedule& s);

inline Op makeOp(OpKind kind, Phase phase, int sendPeer, int recvPeer, BufRef src, BufRef dst,
                 uint64_t count, uint32_t step, uint32_t chunk, uint32_t slice) {
  Op op;
  op.kind = kind;
  op.phase = phase;
  op.sendPeer = sendPeer;
  op.recvPeer = recvPeer;
  op.src = src;
  op.dst = dst;
  op.count = count;
  op.step = step;
  op.chunk = chunk;
  op.slice = slice;
  return op;
}

inline BufRef in(uint64_t off) { return {Buffer::Input, off}; }
inline BufRef out(uint64_t off) { return {Buffer::Output, off}; }
inline BufRef scratch(uint64_t off) { return {Buffer::Scratch, off}; }

}  // namespace arl::gen
