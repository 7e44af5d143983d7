// What the topology pane draws a run from: its request, ranks, hosts and network, as a value
// the runtime's thread, the pane, the layout and a replay share (its events arrive apart).
// topologyRunOf() makes one, for a live run and for a recorded row alike; firstRunOf(), the
// run a sweep will start with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/shaping.h"
#include "exec/run_request.h"

namespace arl {
struct BenchReport;
struct SweepRow;
struct SweepSpec;
struct WorkerInfo;
}  // namespace arl

namespace arl::ui {

struct TopologyRun {
  uint64_t runId = 0;
  RunRequest request;  // algorithm, collective, count, dtype, ring order, ...
  int nranks = 0;
  std::vector<std::string> hosts;  // host name per rank (for hierarchical), may be empty
  LinkShaping shaping;
};

// Run `runId` of `request` on `nranks` ranks: the hosts of `workers` (in rank order) when there
// is one per rank, and the network the data planes paced it to, the request's own, else
// `network` (a recording from before requests carried their shaping).
TopologyRun topologyRunOf(uint64_t runId, const RunRequest& request, int nranks,
                          const std::vector<WorkerInfo>& workers, const LinkShaping& network = {});

// The first run `spec` makes on `nranks` ranks (its first size, algorithm, slice size and
// slices in flight, as sweepPoints() orders them), on the hosts of `workers` when there is
// one per rank: what the pane draws as the plan before Run. Throws nothing: a request core
// would refuse gives a run whose model says why (RunModel::scheduleError).
TopologyRun firstRunOf(const SweepSpec& spec, int nranks, const std::vector<WorkerInfo>& workers);

// A recorded row's run (for replay): its own workers, else the session's, and the session's
// network where the request names none.
TopologyRun topologyRunOf(const BenchReport& report, const SweepRow& row);

}  // namespace arl::ui
