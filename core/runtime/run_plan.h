// Planning a run: a request checked against the world it would run on and turned into the
// RunConfig every rank receives. Pure functions, run on a planning thread (a large schedule
// is generated there, never on the thread that heartbeats), so that planning can be tested
// without a coordinator.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exec/collective_library.h"
#include "exec/run_request.h"
#include "runtime/protocol.h"

namespace arl {

// One rank of the world a run is planned on, in rank order.
struct PlannedRank {
  std::string id;             // its routing identity
  std::string host;           // its host name (ranks of one host are contiguous)
  uint64_t pidNamespace = 0;  // 0: unknown
  std::string dataKey;        // its data-plane public key (WorkerInfo::dataKey); "": none
  RankPlace place;            // host, backend and device, for the algorithm's placement rules
};

struct RunPlan {
  RunConfig cfg;                 // everything but epoch and run id
  ResolvedRun run;               // what the request resolved to on this world
  std::vector<std::string> ids;  // routing identity of each rank
  std::string error;             // why the request was refused; empty = planned
};

// Checks `req` against the ranks and builds the RunConfig; a bad request comes back with
// `error` naming the parameter. Touches no worker.
RunPlan planRun(const RunRequest& req, const std::vector<PlannedRank>& ranks);

// The request of a training run: `base`'s algorithm, slice, shaping and data plane, `t` as
// its training, the collective an all-reduce of the model's gradients (its count), one timed
// iteration per step, no warm-up and no result check (the weights' digests are the check).
// `sync` ps runs the buckets through the parameter-server schedule.
RunRequest trainingRequest(RunRequest base, const TrainConfig& t);

// The RunConfig of `req` resolved as `run` on ranks of these hosts (in rank order), with
// runId and epoch 1: the caller sets its own.
RunConfig runConfigOf(const RunRequest& req, const ResolvedRun& run,
                      const std::vector<std::string>& hosts);

// A plan being made on a detached thread. Its owner polls take(); one that nobody waits for
// any more (an aborted run, a closing coordinator) ends on its own.
class PlanJob {
 public:
  // Plans on a new thread and calls `done` (from that thread) once the plan can be taken.
  static std::shared_ptr<PlanJob> start(RunRequest req, std::vector<PlannedRank> ranks,
                                        std::function<void()> done);
  std::optional<RunPlan> take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(plan_, std::nullopt);
  }

 private:
  std::mutex mu_;
  std::optional<RunPlan> plan_;
};

}  // namespace arl
