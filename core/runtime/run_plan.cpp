// Planning a run (run_plan.h).
#include "runtime/run_plan.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <thread>

#include "base/errors.h"
#include "base/limits.h"

namespace arl {

RunPlan planRun(const RunRequest& req, const std::vector<PlannedRank>& ranks) {
  RunPlan out;
  try {
    if (ranks.empty()) throw ConfigError("no workers have joined; start some or wait for them");
    std::vector<std::string> hosts;
    std::vector<uint64_t> namespaces;
    std::vector<RankPlace> places;
    for (const PlannedRank& r : ranks) {
      hosts.push_back(r.host);
      namespaces.push_back(r.pidNamespace);
      places.push_back(r.place);
    }
    if (req.train) checkTrainConfig(*req.train, static_cast<int>(ranks.size()));
    out.run = resolveRunRequest(req, hosts);
    checkPlaces(req.algorithm, places);
    out.cfg = runConfigOf(req, out.run, hosts);
    out.cfg.pidNamespaces = std::move(namespaces);
    // CURVE between the data planes when every rank has a key: all of them joined over CURVE.
    if (std::all_of(ranks.begin(), ranks.end(),
                    [](const PlannedRank& r) { return !r.dataKey.empty(); })) {
      for (const PlannedRank& r : ranks) out.cfg.dataKeys.push_back(r.dataKey);
    }
    // Lending needs two ranks with device memory to share (the cuda backend's): without
    // them every rank keeps the data plane's one-way channels.
    const auto lenders = std::count_if(places.begin(), places.end(),
                                       [](const RankPlace& p) { return p.backend == "cuda"; });
    out.cfg.cudaIpc = req.cudaIpc && lenders >= 2;
    if (auto why = validate(Message(out.cfg))) throw ConfigError(*why);
    for (const PlannedRank& r : ranks) out.ids.push_back(r.id);
  } catch (const std::exception& e) {  // ConfigError, or no memory for the schedule
    out.error = e.what();
  }
  return out;
}

RunConfig runConfigOf(const RunRequest& req, const ResolvedRun& run,
                      const std::vector<std::string>& hosts) {
  RunConfig c;
  c.runId = 1;
  c.epoch = 1;
  c.worldSize = run.nranks + (req.scheduleXml.empty() ? helperWorkers(req.algorithm) : 0);
  c.algorithm = req.algorithm;
  c.collective = req.collective;
  c.dtype = req.dtype;
  c.op = req.op;
  c.count = req.count;
  c.sliceBytes = req.sliceBytes;
  c.root = req.root;
  c.ranksPerHost = static_cast<uint32_t>(run.ranksPerHost);
  c.radix = static_cast<uint32_t>(run.radix);
  // Out-of-range counts stay out of range (one past the limit), so that validate() names them.
  c.inflight = static_cast<uint32_t>(std::min<int64_t>(req.inflight, kMaxInflight + 1));
  // The window orders a ring's ops (GenParams::window); an imported schedule keeps its own order.
  c.window = req.scheduleXml.empty()
                 ? std::min<uint32_t>(slicesWindowOf(req.algorithm, req.window), kMaxInflight + 1)
                 : 1;
  c.inPlace = req.inPlace;
  c.warmup = static_cast<uint32_t>(std::min<int64_t>(req.warmup, kMaxIterations + 1));
  c.iterations = static_cast<uint32_t>(std::min<int64_t>(req.iterations, kMaxIterations + 1));
  c.check = req.checkedIterations();
  c.randomData = req.randomData;
  c.telemetry = req.telemetry;
  c.ringOrder.assign(run.ringOrder.begin(), run.ringOrder.end());
  // The world's ring names every worker: the switch's after the ranks' (it sits on no ring).
  for (int r = run.nranks; r < c.worldSize; ++r) c.ringOrder.push_back(r);
  // Swing alone takes the torus's dimensions; they hold the ranks, and a switch run's world has
  // one worker more.
  if (req.algorithm == "swing" || req.algorithm == "swing-latency") {
    c.torusDims.assign(req.torusDims.begin(), req.torusDims.end());
  }
  c.hosts = hosts;
  c.dataPlane = req.dataPlane;
  c.cudaIpc = req.cudaIpc;
  c.shaping = req.shaping;
  c.train = req.train;
  c.scheduleXml = req.scheduleXml;
  return c;
}

RunRequest trainingRequest(RunRequest base, const TrainConfig& t) {
  base.train = t;
  base.collective = Collective::AllReduce;
  base.dtype = DataType::Float;
  base.op = RedOp::Sum;
  base.count = parameterCount(t.layers);
  base.warmup = 0;
  base.iterations = static_cast<int>(t.steps);
  base.check = 0;
  base.randomData = false;
  base.inPlace = false;
  if (t.sync == SyncMode::Ps) base.algorithm = "parameter-server";
  return base;
}

std::shared_ptr<PlanJob> PlanJob::start(RunRequest req, std::vector<PlannedRank> ranks,
                                        std::function<void()> done) {
  auto job = std::make_shared<PlanJob>();
  std::thread([job, req = std::move(req), ranks = std::move(ranks), done = std::move(done)] {
    RunPlan p = planRun(req, ranks);
    {
      std::lock_guard<std::mutex> lock(job->mu_);
      job->plan_ = std::move(p);
    }
    done();
  }).detach();
  return job;
}

}  // namespace arl
