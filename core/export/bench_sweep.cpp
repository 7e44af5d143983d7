// The sweep of a bench configuration (bench_sweep.h).
#include "export/bench_sweep.h"

#include "base/topology.h"

namespace arl {

RunRequest runRequestOf(const BenchConfig& c) {
  RunRequest q;
  q.collective = c.collective;
  q.dtype = c.dtype;
  q.op = c.op;
  q.root = c.root;
  q.ranksPerHost = c.ranksPerHost;
  q.radix = c.radix;
  q.ringOrder = c.ringOrder;
  q.inPlace = c.inPlace;
  q.warmup = c.warmup;
  q.iterations = c.iters;
  q.check = c.check;
  q.telemetry = c.telemetry;
  q.maxEvents = c.maxEvents;
  q.dataPlane = c.dataPlane;
  q.cudaIpc = c.cudaIpc;
  q.stallTimeout = c.stallTimeout;
  q.mismatchRank = c.mismatchRank;
  q.randomData = c.randomData;
  q.scheduleXml = c.scheduleXml;
  q.torusDims = torusDimsOf(c.topology);
  q.window = c.window;
  return q;
}

SweepSpec sweepSpecOf(const BenchConfig& c, const std::vector<uint64_t>& sizes) {
  SweepSpec s;
  s.base = runRequestOf(c);
  s.algorithms = c.algorithms;
  s.sizes = sizes;
  s.sliceSizes = c.sliceSizes;
  s.inflights = c.inflights;
  s.shaping = c.shaping;
  return s;
}

}  // namespace arl
