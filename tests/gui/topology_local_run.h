// Real telemetry for the topology tests: a whole run in process (exec/local_run.h: one thread
// per rank over the loopback transport, real buffers), its chunk events sorted by time as the
// coordinator hands them over.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "exec/local_run.h"
#include "exec/run_request.h"
#include "topology/topology_run.h"

namespace arl::ui::testing {

struct LocalRecording {
  TopologyRun run;
  std::vector<TelemetryEvent> events;
};

inline LocalRecording recordLocal(const std::string& algorithm, int nranks, uint64_t count,
                                  int ranksPerHost = 0, int iterations = 1) {
  LocalRecording rec;
  rec.run.runId = 41;
  rec.run.nranks = nranks;
  rec.run.request.algorithm = algorithm;
  rec.run.request.count = count;
  rec.run.request.sliceBytes = 4 * std::max<uint64_t>(1, count / static_cast<uint64_t>(nranks) / 2);
  rec.run.request.ranksPerHost = ranksPerHost;
  rec.run.request.warmup = 0;
  rec.run.request.iterations = iterations;
  const std::vector<std::string> hosts(static_cast<size_t>(nranks), "localhost");
  Schedule s;
  resolveRunRequest(rec.run.request, hosts, &s);
  BoundedSink sink(uint64_t{1} << 22);
  LocalRunOptions lo;
  lo.iterations = iterations;
  lo.telemetry = TelemetryLevel::Chunks;
  lo.sink = &sink;
  lo.runId = rec.run.runId;
  runLocal(s, lo);
  rec.events = sink.take();
  std::stable_sort(rec.events.begin(), rec.events.end(),
                   [](const TelemetryEvent& a, const TelemetryEvent& b) { return a.tNs < b.tNs; });
  return rec;
}

}  // namespace arl::ui::testing
