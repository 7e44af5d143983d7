#include "runtime/run_types.h"

namespace arl {

int localDevice(const std::vector<int>& localDevices, int k) {
  const auto& d = localDevices;
  if (d.empty() || k < 0) return -1;
  if (d.size() == 1) return d.front();
  return static_cast<size_t>(k) < d.size() ? d[static_cast<size_t>(k)] : -1;
}

std::string_view toString(RunState s) {
  switch (s) {
    case RunState::Idle: return "idle";
    case RunState::Queued: return "queued";
    case RunState::Refused: return "refused";
    case RunState::Configuring: return "configuring";
    case RunState::Running: return "running";
    case RunState::Done: return "done";
    case RunState::Failed: return "failed";
    case RunState::Aborted: return "aborted";
  }
  return "?";
}

std::vector<std::vector<double>> perIterationPerRankUs(const RunResult& res) {
  std::vector<std::vector<double>> m;
  for (const RankIteration& ri : res.perRank) {
    if (ri.rank < 0 || ri.rank >= res.nranks) continue;
    if (m.size() <= ri.iteration) m.resize(ri.iteration + size_t{1});
    auto& row = m[ri.iteration];
    row.resize(static_cast<size_t>(res.nranks), -1.0);
    row[static_cast<size_t>(ri.rank)] = static_cast<double>(ri.timeNs) / 1e3;
  }
  return m;
}

}  // namespace arl
