#include "export/session_json.h"

#include "export/bench_sweep.h"

namespace arl {

Json shapingJson(const LinkShaping& s) {
  Json ranks = Json::array();
  for (const auto& [rank, rate] : s.rankPortBytesPerSecond) {
    ranks.push_back(Json{{"rank", rank}, {"bytes_per_s", rate}});
  }
  Json links = Json::array();
  for (const auto& [link, rate] : s.linkBytesPerSecond) {
    links.push_back(Json{{"from", link.first}, {"to", link.second}, {"bytes_per_s", rate}});
  }
  Json latencies = Json::array();
  for (const auto& [link, seconds] : s.linkLatencySeconds) {
    latencies.push_back(Json{{"from", link.first}, {"to", link.second}, {"latency_s", seconds}});
  }
  return Json{{"port_bytes_per_s", s.portBytesPerSecond},
              {"added_latency_s", s.addedLatencySeconds},
              {"slow_ranks", std::move(ranks)},
              {"slow_links", std::move(links)},
              {"link_latencies", std::move(latencies)}};
}

Json configJson(const BenchConfig& c) {
  const uint32_t checked = runRequestOf(c).checkedIterations();
  return Json{{"minbytes", c.minBytes},
              {"maxbytes", c.maxBytes},
              {"stepfactor", c.stepFactor},
              {"stepbytes", c.stepBytes},
              {"iters", c.iters},
              {"warmup_iters", c.warmup},
              {"check", checked > 0},
              {"check_iterations", checked},
              {"op", str(toString(c.op))},
              {"dtype", str(toString(c.dtype))},
              {"collective", str(toString(c.collective))},
              {"algorithms", c.algorithms},
              {"workers", c.workers},
              {"ranks_per_host", c.ranksPerHost},
              {"radix", c.radix},
              {"window", c.window},
              {"slice_sizes", c.sliceSizes},
              {"inflights", c.inflights},
              {"ring_order", c.ringOrder},
              {"backend", c.backend},
              {"backends", c.backends},
              {"mpi_mca", c.mpiMca},
              {"listen", c.listen},
              {"expect", c.expect},
              {"telemetry", str(toString(c.telemetry))},
              {"data_plane", str(toString(c.dataPlane))},
              {"cuda_ipc", c.cudaIpc},
              {"max_events", c.maxEvents},
              {"stall_timeout_ms", static_cast<int64_t>(c.stallTimeout.count())},
              {"shaping", shapingJson(c.shaping)},
              {"topology", c.topology.empty() ? Json() : Json(c.topology)},
              {"root", c.root},
              {"in_place", c.inPlace},
              {"json", c.jsonPath},
              {"csv", c.csvPath},
              {"trace", c.tracePath},
              {"record", c.recordPath}};
}

Json workerJson(const WorkerInfo& w) {
  return Json{{"rank", w.rank},
              {"name", w.name},
              {"host", w.host},
              {"pid", w.pid},
              {"local", w.local},
              {"backend", w.backend},
              {"device", w.device},
              {"clock_offset_ns", w.clockOffsetNs},
              {"data_endpoint", w.dataEndpoint}};
}

Json workersJson(const std::vector<WorkerInfo>& ws) {
  Json a = Json::array();
  for (const WorkerInfo& w : ws) a.push_back(workerJson(w));
  return a;
}

Json modelJson(const BenchReport& r) {
  Json j{{"source", r.modelSource},
         {"alpha_s", r.model.alpha},
         {"beta_s_per_byte", r.model.beta},
         {"gamma_s_per_byte", r.model.gamma}};
  if (r.model.shmCopy) {
    j["shm_copy_s_per_byte"] = *r.model.shmCopy;
    j["cores"] = r.model.cores;
    j["shm_work_scale"] = r.model.shmWorkScale;
    if (r.model.shmAlpha) j["shm_alpha_s"] = *r.model.shmAlpha;
    if (r.model.shmSend && r.model.shmSendFresh) {
      j["shm_send_s_per_byte"] = *r.model.shmSend;
      j["shm_send_fresh_s_per_byte"] = *r.model.shmSendFresh;
    }
  }
  if (r.model.shmCopyCached && r.model.gammaCached && r.model.llcBytes > 0) {
    j["shm_copy_cached_s_per_byte"] = *r.model.shmCopyCached;
    j["gamma_cached_s_per_byte"] = *r.model.gammaCached;
    j["llc_bytes"] = r.model.llcBytes;
  }
  if (r.fit && r.fit->error.empty()) {
    const SessionFit& f = *r.fit;
    j["fitted"] = Json{{"source", "fitted from this run"},
                       {"alpha_s", f.params.alpha},
                       {"beta_s_per_byte", f.params.beta},
                       {"gamma_s_per_byte", f.params.gamma},
                       {"gamma_held", true},
                       {"points", static_cast<uint64_t>(f.points)},
                       {"rms_relative_residual", f.rmsRelativeResidual}};
  } else if (r.fit) {
    j["fitted"] = Json{{"error", r.fit->error}};
  }
  return j;
}

Json requestJson(const RunRequest& q) {
  Json j{{"algorithm", q.algorithm},
         {"collective", str(toString(q.collective))},
         {"dtype", str(toString(q.dtype))},
         {"op", str(toString(q.op))},
         {"count", q.count},
         {"slice_bytes", q.sliceBytes},
         {"root", q.root},
         {"ranks_per_host", q.ranksPerHost},
         {"radix", q.radix},
         {"window", q.window},
         {"ring_order", q.ringOrder},
         {"inflight", q.inflight},
         {"in_place", q.inPlace},
         {"warmup", q.warmup},
         {"iterations", q.iterations},
         {"check", q.checkedIterations() > 0},
         {"check_iterations", q.checkedIterations()},
         {"telemetry", str(toString(q.telemetry))},
         {"data_plane", str(toString(q.dataPlane))},
         {"cuda_ipc", q.cudaIpc},
         {"max_events", q.maxEvents},
         {"stall_timeout_ms", static_cast<int64_t>(q.stallTimeout.count())},
         {"shaping", shapingJson(q.shaping)}};
  // Only a training run has it: what marks a recording's run as training.
  if (q.train) j["train"] = trainConfigJson(*q.train);
  return j;
}

uint64_t totalDropped(const BenchReport& r) {
  uint64_t n = 0;
  for (const BenchRow& row : r.rows) n += row.result.eventsDropped;
  return n;
}

Json effectiveJson(const ResolvedRun& e) {
  return Json{{"ranks", e.nranks}, {"ranks_per_host", e.ranksPerHost},
              {"radix", e.radix},  {"ring_order", e.ringOrder},
              {"steps", e.steps},  {"bytes_sent", e.bytesSent}};
}

}  // namespace arl
