// The values behind the animation at small counts: each rank's input, exactly as the run's
// check filled it (exec/check.h: small integers), and the value of any partial result from
// the ranks whose contributions it holds. A student can check every sum.
#pragma once

#include <QString>
#include <cstdint>
#include <vector>

#include "topology/run_model.h"

namespace arl::ui {

class Arithmetic {
 public:
  // Values are shown up to this many elements per rank buffer, and this many ranks.
  static constexpr uint64_t kMaxCount = 16;
  static constexpr int kMaxRanks = 16;

  // Fills the inputs of `run` (empty when the run is too large to show values).
  explicit Arithmetic(const TopologyRun& run);
  bool enabled() const { return !inputs_.empty(); }

  // Element e of a partial result holding the contributions of the ranks in `mask`.
  double value(uint64_t mask, uint64_t e) const;
  // Elements [first, first + n) of such a result, as "(3 1 −1 2)" or "3" for one element.
  QString values(uint64_t mask, uint64_t first, uint64_t n) const;
  // One log line for a strip update (a reduction or a copy that landed), given what the rank
  // held in those elements before it: "rank 1 [4–7]: (1 0 2 1) + (2 2 −1 0) = ...", or for a copy
  // "rank 1 [4–7]: (3 2 1 0) from rank 0".
  QString logLine(const CellUpdate& u, uint64_t before) const;
  // The operator's symbol between two operands: "+", "×", "min", "max".
  QString opSymbol() const;

 private:
  TopologyRun run_;
  uint64_t elems_ = 0;
  std::vector<std::vector<double>> inputs_;  // [rank][element]
};

}  // namespace arl::ui
