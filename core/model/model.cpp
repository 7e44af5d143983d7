// Closed-form costs and alpha/beta fits (see model.h; sources in docs/algorithms.md).
//
// Notation: n ranks, S bytes (nccl-tests' size of the collective), s the pipeline slice in
// bytes, k = ceil(x / s) the number of slices a piece of x bytes travels in, and
// L = ceil(log2 n). Every form is linear in (alpha, beta, gamma).
//
// In the link model of simulate(), latency does not hold the link: a pipelined chain pays
// alpha once per hop and then streams one slice per slice-time. The pipelined forms below
// count the same way (pipeline fill of `hops` slices, then the remaining slices), so the
// closed form and the simulation of the same schedule agree on large messages; on small
// messages the closed form is the textbook one.
#include <algorithm>
#include <cmath>
#include <string>

#include "base/errors.h"
#include "schedule/generators.h"
#include "model/model.h"

namespace arl {

namespace {

int ceilLog2(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}

int floorPow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Slices a piece of x bytes is sent in (at least one).
double slices(double x, double s) { return s > 0 && x > s ? std::ceil(x / s) : 1.0; }

// A pipelined chain of `hops` links carrying x bytes in slices, each hop also reducing the
// slice when `reduce`: alpha once per hop, then fill + stream.
CostTerms chain(double hops, double x, double s, bool reduce) {
  CostTerms c;
  if (hops <= 0 || x <= 0) return c;
  const double k = slices(x, s);
  const double slice = x / k;
  c.alphaCount = hops;
  c.betaBytes = (hops - 1 + k) * slice;
  if (reduce) c.gammaBytes = (hops - 1 + k) * slice;
  return c;
}

CostTerms operator+(CostTerms a, const CostTerms& b) {
  a.alphaCount += b.alphaCount;
  a.betaBytes += b.betaBytes;
  a.gammaBytes += b.gammaBytes;
  return a;
}

// Ring over n ranks (Patarasuk & Yuan 2009; Thakur, Rabenseifner & Gropp 2005, section 4):
// each of the `steps` steps moves one n-th of S over every link at once. The generator cuts
// each n-th into k slices and sends every slice around the whole ring before the next one
// (slice-major, as NCCL's loop over the buffer does), so every slice pays the latency of
// every step: alpha is counted steps * k times.
CostTerms ringSteps(int n, double S, double s, double steps, double reducingSteps) {
  CostTerms c;
  if (n <= 1 || S <= 0) return c;
  c.alphaCount = steps * slices(S / n, s);
  c.betaBytes = steps * S / n;
  c.gammaBytes = reducingSteps * S / n;
  return c;
}

CostTerms ringCost(Collective coll, int n, double S, double s) {
  switch (coll) {
    case Collective::AllReduce: return ringSteps(n, S, s, 2.0 * (n - 1), n - 1);
    case Collective::ReduceScatter: return ringSteps(n, S, s, n - 1, n - 1);
    case Collective::AllGather: return ringSteps(n, S, s, n - 1, 0);
    // Ring Reduce and Broadcast are pipelined chains along the ring (n - 1 hops), as NCCL's.
    case Collective::Reduce: return chain(n - 1, S, s, true);
    case Collective::Broadcast: return chain(n - 1, S, s, false);
  }
  return {};
}

// NCCL's trees (see gen_tree.cpp): an in-order binary tree of depth D = ceil(log2 n), every
// hop pipelined by slice, so each pass pays D latencies and a pipeline fill of D - 1 slices
// on top of its streaming time.
//  allreduce:     two complementary trees each reduce then broadcast one half. NCCL's tuning
//                 model charges this 2 D latencies and half the ring's bus bandwidth (a
//                 rank's port carries about 2 S: S up, both halves, and S down, twice the half
//                 of the tree it is interior in); a rank reduces two children's halves, S.
//                 The generator runs the four passes one after the other, which the
//                 simulation shows costs somewhat more.
//  reduce:        one tree; every rank sends S once; an interior rank reduces 2 S.
//  broadcast:     one tree; an interior rank sends S to each of two children.
//  reducescatter: n trees, one rooted at each rank, each reducing one n-th, in n passes one
//                 after the other: n D latencies; each pass is held to its busiest rank, one
//                 that reduces two children's n-th and sends one, so S on the link and 2 S
//                 reduced in all.
//  allgather:     n trees broadcasting one n-th each, in n passes: n D latencies, and the
//                 busiest rank of each pass sends its n-th to two children: 2 S in all.
CostTerms treeCost(Collective coll, int n, double S, double s) {
  CostTerms c;
  if (n <= 1 || S <= 0) return c;
  const double D = ceilLog2(n);
  // The piece each tree pipelines: half the vector, one n-th, or all of it.
  double part = S;
  if (coll == Collective::AllReduce) part = S / 2;
  if (coll == Collective::ReduceScatter || coll == Collective::AllGather) part = S / n;
  const double slice = part / slices(part, s);
  const double fill = (D - 1) * slice;
  switch (coll) {
    case Collective::AllReduce:
      c.alphaCount = 2 * D;
      c.betaBytes = 2 * S + 2 * fill;
      c.gammaBytes = S + 2 * fill;
      return c;
    case Collective::Reduce:
      c.alphaCount = D;
      c.betaBytes = S + fill;
      c.gammaBytes = 2 * S + 2 * fill;
      return c;
    case Collective::Broadcast:
      c.alphaCount = D;
      c.betaBytes = 2 * S + 2 * fill;
      return c;
    case Collective::ReduceScatter:
      c.alphaCount = n * D;
      c.betaBytes = S + n * fill;
      c.gammaBytes = 2 * S + 2 * n * fill;
      return c;
    case Collective::AllGather:
      c.alphaCount = n * D;
      c.betaBytes = 2 * S + 2 * n * fill;
      return c;
  }
  return c;
}

// Recursive halving then recursive doubling (Rabenseifner; Thakur et al. 2005, section 4.4):
// 2 log2 p steps moving (p-1)/p S each way. With n not a power of two, the n - p extra ranks
// first hand their whole vector to a partner and get the result back at the end. The
// generator exchanges each step slice by slice, receiving slice j before sending slice j+1,
// so every slice of every step pays alpha.
CostTerms halvingDoublingCost(int n, double S, double s) {
  CostTerms c;
  if (n <= 1 || S <= 0) return c;
  const int p = floorPow2(n);
  // log2 p halving steps of S/2, S/4, ..., S/p, and as many doubling steps back.
  for (int d = 2; d <= p; d *= 2) c.alphaCount += 2 * slices(S / d, s);
  c.betaBytes = 2.0 * (p - 1) / p * S;
  c.gammaBytes = static_cast<double>(p - 1) / p * S;
  if (p != n) {
    c.alphaCount += 2;  // fold and unfold stream their slices: one latency each
    c.betaBytes += 2 * S;
    c.gammaBytes += S;
  }
  return c;
}

// Recursive doubling (Thakur et al. 2005, section 4.3): log2 p exchanges of the whole vector,
// slice by slice (each slice pays alpha, as above); a fold and an unfold of the whole vector
// when n is not a power of two.
CostTerms recursiveDoublingCost(int n, double S, double s) {
  CostTerms c;
  if (n <= 1 || S <= 0) return c;
  const int p = floorPow2(n);
  const double lg = ceilLog2(p);
  c.alphaCount = lg * slices(S, s);
  c.betaBytes = lg * S;
  c.gammaBytes = lg * S;
  if (p != n) {
    c.alphaCount += 2;  // fold and unfold stream their slices: one latency each
    c.betaBytes += 2 * S;
    c.gammaBytes += S;
  }
  return c;
}

// Binomial-tree reduce to rank 0 then binomial-tree broadcast (MPICH's reduce and bcast;
// Thakur et al. 2005), L = ceil(log2 n) levels, each half pipelined by slice. Every rank
// sends S up once; rank 0 reduces L vectors and sends S to each of its L children, so it is
// the bottleneck: 2 L alpha + (S + L S) beta + L S gamma, plus the pipeline fills.
CostTerms reduceBroadcastCost(int n, double S, double s) {
  CostTerms c;
  if (n <= 1 || S <= 0) return c;
  const double L = ceilLog2(n);
  const double slice = S / slices(S, s);
  c.alphaCount = 2 * L;
  c.betaBytes = S + L * S + 2 * (L - 1) * slice;
  c.gammaBytes = L * S + (L - 1) * slice;
  return c;
}

// Parameter server (Li et al., OSDI 2014): every worker sends its vector to the server (in
// parallel, on their own links), the server reduces n - 1 vectors and sends the sum to each
// worker in turn over its one port.
CostTerms parameterServerCost(int n, double S) {
  CostTerms c;
  if (n <= 1) return c;
  c.alphaCount = 2;
  c.betaBytes = S + (n - 1) * S;
  c.gammaBytes = (n - 1) * S;
  return c;
}

// Two levels (Horovod's hierarchical all-reduce; see gen_hierarchical.cpp): ring
// reduce-scatter inside each host of K ranks, ring all-reduce of each 1/K shard across the
// H hosts, ring all-gather inside each host. The sum of the three ring costs (a smaller last
// host is costed as a full one).
CostTerms hierarchicalCost(int n, int perHost, double S, double s) {
  if (n <= 1) return {};
  const int K = (perHost <= 0 || perHost > n) ? n : perHost;
  const int H = (n + K - 1) / K;
  return ringCost(Collective::ReduceScatter, K, S, s) +
         ringCost(Collective::AllReduce, H, S / K, s) + ringCost(Collective::AllGather, K, S, s);
}

}  // namespace

CostTerms closedForm(const CostQuery& q) {
  if (q.nranks < 1) {
    throw GenError("ranks must be at least 1 (got " + std::to_string(q.nranks) + ")");
  }
  if (!algorithmSupports(q.algorithm, q.collective)) {
    throw GenError("algorithm '" + std::string(q.algorithm) + "' does not implement " +
                   std::string(toString(q.collective)));
  }
  const int n = q.nranks;
  const double S = static_cast<double>(q.bytes);
  const double s = static_cast<double>(q.sliceBytes);
  const std::string_view a = q.algorithm;
  if (a == "ring") return ringCost(q.collective, n, S, s);
  if (a == "tree") return treeCost(q.collective, n, S, s);
  if (a == "halving-doubling") return halvingDoublingCost(n, S, s);
  if (a == "recursive-doubling") return recursiveDoublingCost(n, S, s);
  if (a == "reduce-broadcast") return reduceBroadcastCost(n, S, s);
  if (a == "parameter-server") return parameterServerCost(n, S);
  if (a == "hierarchical") return hierarchicalCost(n, q.ranksPerHost, S, s);
  throw GenError("the cost model has no closed form for algorithm '" + std::string(a) + "'");
}

double predictSeconds(const CostQuery& q, const ModelParams& p) { return closedForm(q).seconds(p); }

LinearFit fitLine(const std::vector<double>& x, const std::vector<double>& y) {
  ARL_ENFORCE(x.size() == y.size(), x.size() << " x values for " << y.size() << " y values");
  const size_t m = x.size();
  LinearFit f;
  f.points = m;
  double mx = 0, my = 0;
  for (size_t i = 0; i < m; ++i) {
    mx += x[i];
    my += y[i];
  }
  if (m > 0) {
    mx /= static_cast<double>(m);
    my /= static_cast<double>(m);
  }
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < m; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (m < 2 || !(sxx > 0)) {
    throw ConfigError("fit: need at least two points with different sizes (got " +
                      std::to_string(m) + " points)");
  }
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  double ss = 0;
  for (size_t i = 0; i < m; ++i) {
    const double r = y[i] - (f.intercept + f.slope * x[i]);
    ss += r * r;
  }
  f.rmsResidual = std::sqrt(ss / static_cast<double>(m));
  return f;
}

AlphaBetaFit fitAlphaBeta(const std::vector<CostTerms>& terms, const std::vector<double>& seconds,
                          double gamma) {
  ARL_ENFORCE(terms.size() == seconds.size(),
              terms.size() << " cost terms for " << seconds.size() << " times");
  // Normal equations of min sum (y - a*A - b*B)^2 with y = t - gamma*G.
  double aa = 0, ab = 0, bb = 0, ay = 0, by = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const double A = terms[i].alphaCount, B = terms[i].betaBytes;
    const double y = seconds[i] - gamma * terms[i].gammaBytes;
    aa += A * A;
    ab += A * B;
    bb += B * B;
    ay += A * y;
    by += B * y;
  }
  const double det = aa * bb - ab * ab;
  const double scale = aa * bb;
  // Relative test: the columns (A) and (B) must not be (nearly) proportional.
  if (terms.size() < 2 || !(det > 1e-12 * scale)) {
    throw ConfigError("fit: the points cannot separate alpha from beta (" +
                      std::to_string(terms.size()) +
                      " points; need at least two sizes whose message counts and bytes are not "
                      "proportional)");
  }
  AlphaBetaFit f;
  f.points = terms.size();
  f.alpha = (bb * ay - ab * by) / det;
  f.beta = (aa * by - ab * ay) / det;
  double ss = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const double r = seconds[i] - (terms[i].alphaCount * f.alpha + terms[i].betaBytes * f.beta +
                                   terms[i].gammaBytes * gamma);
    ss += r * r;
  }
  f.rmsResidual = std::sqrt(ss / static_cast<double>(terms.size()));
  return f;
}

AlphaBetaFit fitAlphaBeta(const CostQuery& q, const std::vector<MeasuredPoint>& points,
                          double gamma) {
  std::vector<CostTerms> terms;
  std::vector<double> secs;
  for (const MeasuredPoint& p : points) {
    CostQuery qi = q;
    qi.bytes = p.bytes;
    terms.push_back(closedForm(qi));
    secs.push_back(p.seconds);
  }
  return fitAlphaBeta(terms, secs, gamma);
}

}  // namespace arl
