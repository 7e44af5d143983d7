// Cost model of collective schedules. Three tools, all predictions, never measurements:
//  1. closed forms in the alpha-beta-gamma (Hockney) model, per algorithm and collective
//     (Thakur, Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009; NCCL's tuning model);
//  2. a discrete-event simulation of any Schedule over a link model, yielding a predicted
//     timeline in the shape of measured telemetry (ModelTimeline, flagged `predicted`);
//  3. least-squares fits of alpha and beta from measured (bytes, time) points.
// docs/algorithms.md lists every formula with its source.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "schedule/schedule.h"
#include "exec/telemetry.h"
#include "base/types.h"

namespace arl {

// Hockney / alpha-beta-gamma parameters.
//   alpha: seconds per message (latency a message pays once, whatever its size)
//   beta:  seconds per byte on a link (1 / link bandwidth)
//   gamma: seconds per byte reduced (1 / reduction rate)
// The defaults describe the machines this lab is built on (a few cores, worker processes
// over ZeroMQ ipc:// at one to two GB/s, a core reducing floats at a few GB/s). They are
// defaults for teaching, not measurements; fit alpha and beta from a run to get real values.
struct ModelParams {
  double alpha = 20e-6;
  double beta = 1.0 / 1.5e9;
  double gamma = 1.0 / 4e9;
};

// A closed-form cost as coefficients of the three parameters:
//   seconds = alphaCount * alpha + betaBytes * beta + gammaBytes * gamma.
// Keeping the form linear in (alpha, beta, gamma) is what lets fitAlphaBeta() fit it.
struct CostTerms {
  double alphaCount = 0;  // messages on the critical path
  double betaBytes = 0;   // bytes serialized over the critical path's links
  double gammaBytes = 0;  // bytes reduced on the critical path
  double seconds(const ModelParams& p) const {
    return alphaCount * p.alpha + betaBytes * p.beta + gammaBytes * p.gamma;
  }
};

// What a closed form is asked about. `bytes` is the collective's size S as nccl-tests
// reports it (collectiveBytes() in metrics.h: count*elem, or nranks*count*elem for
// reduce-scatter and all-gather). `sliceBytes` is the pipeline slice (0 = unsliced).
struct CostQuery {
  std::string_view algorithm;
  Collective collective = Collective::AllReduce;
  int nranks = 1;
  uint64_t bytes = 0;
  uint64_t sliceBytes = 0;
  int ranksPerHost = 0;  // hierarchical: ranks per host; 0 = all ranks on one host
};

// Closed-form cost of the algorithm (formulas in model.cpp and docs/algorithms.md). Throws
// GenError for an unknown algorithm or a collective it does not implement.
CostTerms closedForm(const CostQuery& q);

// closedForm(q).seconds(p).
double predictSeconds(const CostQuery& q, const ModelParams& p = {});

// ---- discrete-event simulation ----

struct LinkParams {
  double bytesPerSecond = 1.5e9;
  double latencySeconds = 20e-6;
};

// Links between ranks and the speed of each rank's arithmetic. Links are directed
// (from -> to); all have `defaults` unless overridden.
struct LinkModel {
  LinkParams defaults;
  std::map<std::pair<int, int>, LinkParams> overrides;  // (from, to) -> params
  double reduceBytesPerSecond = 4e9;                    // every rank unless overridden
  std::map<int, double> rankReduceBytesPerSecond;       // rank -> reduce rate
  double copyBytesPerSecond = 10e9;                     // local copies (memcpy)

  // The link model that corresponds to alpha-beta-gamma parameters (uniform links).
  static LinkModel fromParams(const ModelParams& p);
  LinkParams link(int from, int to) const;
  double reduceRate(int rank) const;
  // Sets both directions between a and b.
  void setLinkBothWays(int a, int b, LinkParams lp);
};

struct SimOptions {
  DataType dtype = DataType::Float;
  // Sends a rank may have outstanding before it waits for the oldest one (as the
  // executor's ExecOptions::inflight); at least 1.
  int inflight = 4;
  TelemetryLevel telemetry = TelemetryLevel::Chunks;  // which events to predict
  uint64_t runId = 0;
  uint32_t iteration = 0;
};

// A predicted run. Its events have the fields and kinds of measured telemetry, timestamps in
// ns from the start of the iteration; `predicted` is always true so nothing downstream can
// mistake it for a measurement.
struct ModelTimeline {
  bool predicted = true;
  double totalSeconds = 0;          // slowest rank's finish time
  std::vector<double> rankSeconds;  // each rank's finish time
  std::vector<TelemetryEvent> events;
};

// Simulates one iteration of `s`. Each rank performs its ops in program order. A send starts
// when its payload is ready and the sender's outbound port is free, occupies that port for
// bytes / bandwidth(from, to), and arrives latency later; messages on a channel arrive in
// order. A receive waits for its message; a reduction occupies the rank for
// bytes / reduceRate, a local copy bytes / copyRate. A rank finishes when its last op is done
// and its sends have left. Throws ConfigError naming the rank, op and step when the schedule
// cannot complete (a receive no send ever matches).
ModelTimeline simulate(const Schedule& s, const LinkModel& links, const SimOptions& opt = {});

// ---- fitting ----

// Least-squares line y = intercept + slope * x.
struct LinearFit {
  double intercept = 0;
  double slope = 0;
  double rmsResidual = 0;  // root mean square of y - fit(x)
  size_t points = 0;
};

// Throws ConfigError with fewer than two distinct x values.
LinearFit fitLine(const std::vector<double>& x, const std::vector<double>& y);

struct MeasuredPoint {
  uint64_t bytes = 0;  // S, as CostQuery::bytes
  double seconds = 0;
};

struct AlphaBetaFit {
  double alpha = 0;
  double beta = 0;
  double rmsResidual = 0;  // seconds
  size_t points = 0;
};

// Fits alpha and beta such that seconds ~= alphaCount*alpha + betaBytes*beta +
// gammaBytes*gamma for each point's terms, with gamma held fixed (pass 0 to ignore
// reductions). Throws ConfigError when the points cannot separate alpha from beta.
AlphaBetaFit fitAlphaBeta(const std::vector<CostTerms>& terms, const std::vector<double>& seconds,
                          double gamma);

// The same for one algorithm: each point's terms come from closedForm() with q.bytes set to
// the point's bytes.
AlphaBetaFit fitAlphaBeta(const CostQuery& q, const std::vector<MeasuredPoint>& points,
                          double gamma);

}  // namespace arl
