#include "topology/run_explanation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/metrics.h"
#include "runtime/sweep.h"

namespace arl::ui {

namespace {

// The rate busbw is held against, and what it is: the one that sets beta when the network is
// shaped (the model costs by ports then), else the machine's own as the parameters give it.
void chooseWire(RunExplanation& x, const CostQuery& q, const ModelParams& p) {
  if (x.used.beta > p.beta) {
    // Only the ring's closed form says a slow rank or link: its slowest link sets beta.
    x.wire = !x.shaping.uniform() && closedFormCovers(q) ? WireKind::ShapedRingLink
                                                         : WireKind::ShapedPort;
    x.wireGBps = 1e-9 / x.used.beta;
  } else if (x.shaping.empty() && q.sharedMemory && p.shmSend) {
    x.wire = WireKind::ShmSend;
    x.wireGBps = 1e-9 / *p.shmSend;
  } else if (x.shaping.empty() && q.sharedMemory && p.shmCopy) {
    x.wire = WireKind::ShmCopy;
    x.wireGBps = 1e-9 / *p.shmCopy;
  } else {
    x.wire = WireKind::Port;
    x.wireGBps = 1e-9 / x.used.beta;
  }
}

// The slowest directed link of a non-uniform shaping: what a flat fabric's busbw is to be held
// against when one rank or link is slow, and an algorithm may route most bytes around it.
void findSlowestLink(RunExplanation& x) {
  if (x.shaping.uniform()) return;
  for (int a = 0; a < x.nranks; ++a) {
    for (int b = 0; b < x.nranks; ++b) {
      const double r = a == b ? 0 : x.shaping.pathRate(a, b);
      if (r > 0 && (x.slowestGBps == 0 || r * 1e-9 < x.slowestGBps)) {
        x.slowestGBps = r * 1e-9;
        x.slowestFrom = a;
        x.slowestTo = b;
      }
    }
  }
}

void explainModel(RunExplanation& x, const CostQuery& q, const ModelParams& p) {
  x.formText = closedFormText(q.algorithm, q.collective);
  x.used = shapedParams(q, p);
  try {
    x.terms = closedForm(q);
    x.closedFormUs = x.terms.seconds(x.used) * 1e6;
  } catch (const std::exception&) {
    x.formText.clear();  // none for this algorithm and collective (NCCL's own, say)
  }
  x.closedFormPerIteration = closedFormIsPerIteration(q);
}

}  // namespace

RunExplanation explainRun(const SweepRow& row, const ModelContext& model) {
  const RunResult& res = row.result;
  const RunRequest& req = res.request;
  RunExplanation x;
  x.algorithm = req.algorithm;
  x.collective = req.collective;
  x.nranks = res.effective.nranks > 0 ? res.effective.nranks : res.nranks;
  x.bytes = row.sizeBytes;
  x.sliceBytes = req.sliceBytes;
  x.ranksPerHost = res.effective.ranksPerHost > 0 ? res.effective.ranksPerHost : x.nranks;
  x.shaping = req.shaping;
  x.defaults = model.params == ModelParams{};
  x.source = model.source;
  CostQuery q = costQueryOf(row, req.shaping);
  q.nranks = x.nranks;
  q.sharedMemory = model.sharedMemory;
  explainModel(x, q, model.params);
  x.predictedUs = row.predictedUs;
  x.method = row.predictedBy;
  x.measuredUs = row.metrics.timeUs;
  x.p50Us = row.metrics.spread.p50Us;
  x.iterations = res.iterationUs.size();
  x.algbwGBps = row.metrics.algbwGBps;
  x.busbwGBps = row.metrics.busbwGBps;
  x.busbwFactor = busBwFactor(x.collective, x.nranks);
  chooseWire(x, q, model.params);
  findSlowestLink(x);
  x.sent = res.sent;
  x.scheduled = res.effective.bytesSent;
  x.formula = sentFormula(x.algorithm, x.collective, x.nranks, x.bytes);
  x.level = req.telemetry;
  x.eventsDropped = res.eventsDropped;
  return x;
}

SentSummary summarize(const std::vector<RankSent>& sent) {
  SentSummary s;
  s.lowest = std::numeric_limits<uint64_t>::max();
  for (size_t r = 0; r < sent.size(); ++r) {
    if (sent[r].iterations == 0) continue;
    ++s.measuredRanks;
    s.varies |= sent[r].varies;
    s.lowest = std::min(s.lowest, sent[r].bytes);
    if (s.busiest < 0 || sent[r].bytes > s.highest) {
      s.highest = sent[r].bytes;
      s.busiest = static_cast<int>(r);
    }
  }
  if (s.measuredRanks == 0) s.lowest = 0;
  return s;
}

}  // namespace arl::ui
