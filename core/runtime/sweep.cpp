#include "runtime/sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include "base/clock.h"
#include "runtime/coordinator.h"

namespace arl {

CostQuery costQueryOf(const SweepRow& row, const LinkShaping& shaping) {
  const RunRequest& q = row.result.request;
  CostQuery cq;
  cq.algorithm = q.algorithm;
  cq.collective = q.collective;
  cq.nranks = row.result.effective.nranks;
  cq.bytes = row.sizeBytes;
  cq.sliceBytes = q.sliceBytes;
  cq.ranksPerHost = row.result.effective.ranksPerHost;
  cq.radix = row.result.effective.radix;
  cq.dtype = q.dtype;
  cq.root = q.root;
  cq.ringOrder = row.result.effective.ringOrder;
  cq.torusDims = q.torusDims;
  cq.inflight = q.inflight;
  cq.window = q.window;
  cq.shaping = shaping;
  return cq;
}

bool runsOverSharedMemory(DataPlaneKind plane, const std::vector<WorkerInfo>& world) {
  if (plane != DataPlaneKind::Auto) return plane == DataPlaneKind::Shm;
  // Auto picks shared memory when every rank is on one host and in one pid namespace.
  return std::all_of(world.begin(), world.end(), [&](const WorkerInfo& w) {
    return w.host == world.front().host && w.pidNamespace == world.front().pidNamespace;
  });
}

DataPlaneUse dataPlaneUse(DataPlaneKind plane, const std::vector<WorkerInfo>& world) {
  DataPlaneUse u;
  std::vector<std::string> hosts;
  for (const WorkerInfo& w : world) hosts.push_back(w.host);
  std::sort(hosts.begin(), hosts.end());
  u.hosts = static_cast<int>(std::unique(hosts.begin(), hosts.end()) - hosts.begin());
  // The network between hosts: tcp for auto (run_job.cpp, makeNetworkPlane) and tcp, which
  // splits the pairs as auto does; zmq when chosen.
  const std::string net = plane == DataPlaneKind::Zmq ? "zmq" : "tcp";
  if (u.hosts > 1) u.acrossHosts = net;
  if (plane != DataPlaneKind::Auto && (plane != DataPlaneKind::Tcp || u.hosts <= 1)) {
    u.insideHosts = std::string(toString(plane));
    u.text = u.insideHosts;
    return u;
  }
  const std::string why = plane == DataPlaneKind::Auto ? "auto: " : "";
  // Shared memory inside a host needs its ranks in one pid namespace.
  const bool hostsShareNamespaces =
      std::all_of(world.begin(), world.end(), [&](const WorkerInfo& a) {
        return std::all_of(world.begin(), world.end(), [&](const WorkerInfo& b) {
          return a.host != b.host || a.pidNamespace == b.pidNamespace;
        });
      });
  u.insideHosts = hostsShareNamespaces ? "shm" : net;
  // No two ranks share a host: every pair crosses, and insideHosts stays empty.
  if (u.hosts > 1 && u.hosts == static_cast<int>(world.size())) {
    u.insideHosts.clear();
    u.text = net + " across (" + std::to_string(u.hosts) + " hosts, one rank each)";
    return u;
  }
  if (u.hosts <= 1) {
    u.text = hostsShareNamespaces ? "shm (auto)" : net + " (auto: several pid namespaces)";
  } else if (hostsShareNamespaces) {
    u.text = "shm inside hosts, " + net + " across (" + std::to_string(u.hosts) + " hosts)";
  } else {
    u.text = net + " (" + why + std::to_string(u.hosts) + " hosts, several pid namespaces)";
  }
  return u;
}

std::vector<SweepPoint> sweepPoints(const SweepSpec& s) {
  const std::vector<uint64_t> slices =
      s.sliceSizes.empty() ? std::vector<uint64_t>{s.base.sliceBytes} : s.sliceSizes;
  const std::vector<int> inflights =
      s.inflights.empty() ? std::vector<int>{s.base.inflight} : s.inflights;
  std::vector<SweepPoint> out;
  for (uint64_t size : s.sizes)
    for (const std::string& algo : s.algorithms)
      for (uint64_t slice : slices)
        for (int k : inflights) out.push_back({size, algo, slice, k});
  return out;
}

RunRequest sweepRequest(const SweepSpec& spec, const SweepPoint& p, int nranks) {
  RunRequest q = spec.base;
  q.algorithm = p.algorithm;
  q.count = apiCountForSize(q.collective, nranks, p.sizeBytes, q.dtype);
  q.sliceBytes = p.sliceBytes;
  q.inflight = p.inflight;
  q.shaping = spec.shaping;
  return q;
}

Sweep::Sweep(Coordinator& coord, SweepSpec spec, std::vector<WorkerInfo> world, RowHandler onRow)
    : coord_(coord),
      spec_(std::move(spec)),
      world_(std::move(world)),
      nranks_(static_cast<int>(world_.size())),
      onRow_(std::move(onRow)),
      points_(sweepPoints(spec_)),
      sharedMemory_(runsOverSharedMemory(spec_.base.dataPlane, world_)) {}

Sweep::~Sweep() {
  if (holding_) coord_.releaseWorld();
}

void Sweep::start() {
  if (started_ || finished_) return;
  started_ = true;
  if (world_.empty()) {
    error_ = "the sweep has no workers";
    finished_ = true;
    return;
  }
  coord_.holdWorld(world_);
  holding_ = true;
  submitNext();
}

void Sweep::finish() {
  finished_ = true;
  if (holding_) coord_.releaseWorld();
  holding_ = false;
}

int Sweep::collectiveRanks(const std::string& algorithm) const {
  return spec_.base.scheduleXml.empty() ? nranks_ - helperWorkers(algorithm) : nranks_;
}

void Sweep::submitNext() {
  if (stopping_ || next_ >= points_.size()) {
    finish();
    return;
  }
  const SweepPoint& p = points_[next_++];
  RunRequest q = sweepRequest(spec_, p, collectiveRanks(p.algorithm));
  current_ = SweepRow{};
  current_.count = q.count;
  current_.sizeBytes =
      collectiveBytes(q.collective, collectiveRanks(p.algorithm), q.count, q.dtype);
  current_.startNs = steadyNowNs();
  current_.result.request = q;  // until the run's result replaces it (currentRequest())
  runId_ = coord_.submit(std::move(q));
}

bool Sweep::onEvent(CoordinatorEvent& ev) {
  if (runId_ == 0) return false;
  if (auto* t = std::get_if<TelemetryBatchEvent>(&ev); t && t->runId == runId_) {
    if (spec_.keepTelemetry) telemetry_.add(*t);
    return true;
  }
  if (auto* f = std::get_if<RunFinished>(&ev); f && f->result.runId == runId_) {
    complete(std::move(f->result));
    return true;
  }
  if (const auto* s = std::get_if<StateEvent>(&ev); s && s->runId == runId_) return true;
  if (const auto* i = std::get_if<IterationEvent>(&ev); i && i->runId == runId_) return true;
  return false;
}

void Sweep::complete(RunResult res) {
  runId_ = 0;
  SweepRow row = std::move(current_);
  row.endNs = steadyNowNs();
  row.result = std::move(res);
  row.result.events = telemetry_.take();
  row.eventsKept = row.result.telemetry.delivered;
  const RunRequest& q = row.result.request;
  row.metrics = computeMetrics(q.collective, collectiveRanks(q.algorithm), row.count, q.dtype,
                               row.result.iterationUs, row.result.wrong);
  row.metrics.ncclTimeUs = meanOfRankMeansUs(perIterationPerRankUs(row.result));
  row.predictedUs = std::numeric_limits<double>::quiet_NaN();
  if (row.result.effective.nranks > 0) {
    try {
      CostQuery cq = costQueryOf(row, spec_.shaping);
      cq.sharedMemory = sharedMemory_;
      const Prediction pr = predict(cq, spec_.model);
      row.predictedUs = pr.seconds * 1e6;
      row.predictedBy = pr.method;
    } catch (const std::exception&) {
      // No model for this algorithm and collective: the row shows no prediction.
    }
  }
  const RunState st = row.result.state;
  if (st != RunState::Done && error_.empty()) {
    error_ = row.result.error.empty() ? std::string(toString(st)) : row.result.error;
    stopping_ = true;
  } else if (st == RunState::Done && row.result.nranks != nranks_) {
    // A guard: the held world gives every run the sweep's ranks.
    error_ = "the world changed from " + std::to_string(nranks_) + " to " +
             std::to_string(row.result.nranks) + " ranks; a sweep holds one world";
    stopping_ = true;
  }
  rows_.push_back(std::move(row));
  if (onRow_) onRow_(rows_.back());
  submitNext();
}

void Sweep::stop(const std::string& reason) {
  if (finished_ || stopping_) return;
  stopping_ = true;
  if (error_.empty()) error_ = reason;
  if (runId_ != 0) {
    coord_.abort(reason);
  } else {
    finish();
  }
}

}  // namespace arl
