#include "gen_util.h"

#include <algorithm>
#include <limits>

#include "base/limits.h"

namespace arl::gen {

Schedule makeSkeleton(std::string_view algo, const GenParams& p) {
  if (p.nranks < 1)
    throw GenError("ranks must be at least 1 (got " + std::to_string(p.nranks) + ")");
  if (p.nranks > kMaxRanks) {
    throw GenError("ranks must be at most " + std::to_string(kMaxRanks) + " (got " +
                   std::to_string(p.nranks) + ")");
  }
  if (p.sliceElems == 0) throw GenError("slice size must be at least one element");
  if (p.window < 1 || p.window > kMaxInflight) {
    throw GenError("window must be in 1.." + std::to_string(kMaxInflight) + " slices (got " +
                   std::to_string(p.window) + ")");
  }
  if (p.window > 1 && algo != "ring") {
    throw GenError("a window of slices (" + std::to_string(p.window) + ") is ring's alone; " +
                   std::string(algo) + " takes its slices one by one (window 1)");
  }
  if (p.root < 0 || p.root >= p.nranks) {
    throw GenError("root must be in 0.." + std::to_string(p.nranks - 1) + " (got " +
                   std::to_string(p.root) + ")");
  }
  if (p.ranksPerHost < 0) throw GenError("ranks-per-host must not be negative");
  const uint64_t limit = std::numeric_limits<uint64_t>::max() / kMaxRanks / 8;
  if (p.count > limit) throw GenError("count " + std::to_string(p.count) + " is too large");
  if (!algorithmSupports(algo, p.collective)) {
    throw GenError("algorithm '" + std::string(algo) + "' does not implement " +
                   std::string(toString(p.collective)));
  }
  Schedule s;
  s.algorithm = std::string(algo);
  s.collective = p.collective;
  s.nranks = p.nranks;
  s.root = p.root;
  s.count = p.count;
  s.sliceElems = p.sliceElems;
  s.window = p.window;
  s.inputElems = inputElemsFor(p.collective, p.nranks, p.count);
  s.outputElems = outputElemsFor(p.collective, p.nranks, p.count);
  s.ranks.assign(static_cast<size_t>(p.nranks), {});
  return s;
}

std::vector<int> ringOrder(const GenParams& p) {
  std::vector<int> order(static_cast<size_t>(p.nranks));
  if (p.ring.empty()) {
    for (int i = 0; i < p.nranks; ++i) order[static_cast<size_t>(i)] = i;
    return order;
  }
  if (p.ring.size() != order.size()) {
    throw GenError("ring order has " + std::to_string(p.ring.size()) + " entries for " +
                   std::to_string(p.nranks) + " ranks");
  }
  std::vector<bool> seen(order.size(), false);
  for (int r : p.ring) {
    if (r < 0 || r >= p.nranks || seen[static_cast<size_t>(r)]) {
      throw GenError("ring order is not a permutation of the ranks (bad entry " +
                     std::to_string(r) + ")");
    }
    seen[static_cast<size_t>(r)] = true;
  }
  return p.ring;
}

void singleRankCopy(Schedule& s) {
  if (s.count == 0) return;
  s.ranks[0].push_back(makeOp(OpKind::Copy, Phase::Local, -1, -1, in(0), out(0), s.count, 0, 0, 0));
}

void finishSteps(Schedule& s) {
  uint32_t n = 0;
  for (const auto& ops : s.ranks) {
    for (const Op& op : ops) n = std::max(n, op.step + 1);
  }
  s.nsteps = n;
}

}  // namespace arl::gen
