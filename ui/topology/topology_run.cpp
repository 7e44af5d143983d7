#include "topology/topology_run.h"

#include "base/topology.h"
#include "export/export.h"
#include "runtime/run_types.h"
#include "runtime/sweep.h"

namespace arl::ui {

TopologyRun topologyRunOf(uint64_t runId, const RunRequest& request, int nranks,
                          const std::vector<WorkerInfo>& workers, const LinkShaping& network) {
  TopologyRun run;
  run.runId = runId;
  run.request = request;
  run.nranks = nranks;
  // The network the run was paced to, so that its slow links are drawn as it ran.
  run.shaping = request.shaping.empty() ? network : request.shaping;
  if (workers.size() == static_cast<size_t>(nranks)) {
    for (const WorkerInfo& w : workers) run.hosts.push_back(w.host);
  }
  return run;
}

TopologyRun firstRunOf(const SweepSpec& spec, int nranks, const std::vector<WorkerInfo>& workers) {
  const std::vector<SweepPoint> points = sweepPoints(spec);
  RunRequest q = spec.base;
  q.shaping = spec.shaping;
  if (!points.empty() && nranks > 0) q = sweepRequest(spec, points.front(), nranks);
  return topologyRunOf(0, q, nranks, workers, spec.shaping);
}

TopologyRun topologyRunOf(const BenchReport& report, const SweepRow& row) {
  const RunResult& r = row.result;
  RunRequest request = r.request;
  // A recording keeps the session's topology by name; swing's steps follow its torus.
  if (request.torusDims.empty()) {
    try {
      request.torusDims = torusDimsOf(report.config.topology);
    } catch (const TopologyError&) {
      request.torusDims.clear();  // a name no longer understood: the flat form
    }
  }
  return topologyRunOf(r.runId, request, r.nranks, r.workers.empty() ? report.workers : r.workers,
                       report.config.shaping);
}

}  // namespace arl::ui
