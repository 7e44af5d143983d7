// Closed-form costs and alpha/beta fits (see model.h; sources in docs/algorithms.md).
//
// Notation: n ranks, S bytes (nccl-tests' size of the collective), s the pipeline slice in
// bytes, k = ceil(x / s) the number of slices a piece of x bytes travels in, and
// L = ceil(log2 n). Every form is linear in (alpha, beta, gamma) (and the host's alpha and
// beta, for hierarchical).
//
// Ports are full duplex: a rank sends at 1/beta and receives at 1/beta at once. The beta term
// counts the bytes through the busiest port on the critical path, egress or ingress, so a rank
// that many send to (a parameter server, a tree's parent, a binomial root) pays for what comes
// in as well as what goes out.
//
// In the link model of simulate(), latency does not hold the link: a pipelined chain pays
// alpha once per hop and then streams one slice per slice-time. The pipelined forms below
// count the same way (pipeline fill of `hops` slices, then the remaining slices), so the
// closed form and the simulation of the same schedule agree on large messages; on small
// messages the closed form is the textbook one.
//
// A closed form is the time of one iteration among back-to-back ones, as bench times them
// (RankRun: each rank starts its next iteration when it is done with one, with no barrier).
// Where every rank is busy to the end (ring, halving-doubling, recursive doubling) that is
// the time of one collective alone. Where some ranks are done early (a parameter server's
// workers, a tree's leaves) they start the next iteration while the others finish, and the
// forms below say how much of that overlaps (parameter server, tree all-reduce).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "base/errors.h"
#include "model/metrics.h"
#include "model/model.h"
#include "schedule/generators.h"
#include "transport/shm_ring.h"

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
  a.hostAlphaCount += b.hostAlphaCount;
  a.hostBetaBytes += b.hostBetaBytes;
  return a;
}

// Ring over n ranks (Patarasuk & Yuan 2009; Thakur, Rabenseifner & Gropp 2005, section 4):
// each of the `steps` steps moves one n-th of S over every link at once. The generator cuts
// each n-th into k slices and sends every slice around the whole ring before the next one
// (slice-major), so every slice pays the latency of every step: alpha is counted steps * k
// times. A window of W slices (GenParams::window) takes W slices through each step together,
// their messages on the wire at once: steps * ceil(k / W) latencies.
CostTerms ringSteps(int n, double S, double s, double steps, double reducingSteps,
                    uint32_t window = 1) {
  CostTerms c;
  if (n <= 1 || S <= 0) return c;
  c.alphaCount = steps * std::ceil(slices(S / n, s) / std::max<uint32_t>(window, 1));
  c.betaBytes = steps * S / n;
  c.gammaBytes = reducingSteps * S / n;
  return c;
}

CostTerms ringCost(Collective coll, int n, double S, double s, uint32_t window = 1) {
  switch (coll) {
    case Collective::AllReduce: return ringSteps(n, S, s, 2.0 * (n - 1), n - 1, window);
    case Collective::ReduceScatter: return ringSteps(n, S, s, n - 1, n - 1, window);
    case Collective::AllGather: return ringSteps(n, S, s, n - 1, 0, window);
    // Ring Reduce and Broadcast are pipelined chains along the ring (n - 1 hops), as NCCL's.
    case Collective::Reduce: return chain(n - 1, S, s, true);
    case Collective::Broadcast: return chain(n - 1, S, s, false);
  }
  return {};
}

// NCCL's trees (see gen_tree.cpp), costed as the generator runs them: an in-order binary
// tree of depth D = ceil(log2 n), every hop pipelined by slice, and the passes of one
// collective one after the other (each a whole pipeline, as the generator emits them). A pass
// is held to its busiest port: in a reduction pass a rank with c children takes c pieces in
// through its ingress (and reduces them), in a broadcast pass it sends c pieces out of its
// egress; c = 2 from 4 ranks up, 1 below (the tree is a chain). A pass over a piece of x bytes
// in slices of sigma therefore costs D alpha + c (x + (D - 1) sigma) beta, plus as much gamma
// when it reduces.
//  allreduce:     two complementary trees, each reducing one half up and broadcasting it down,
//                 in four passes (tree 0 up, tree 1 up, tree 0 down, tree 1 down), costed by
//                 treeAllReduceCost() below. NCCL runs the two trees at once (its tuning model
//                 charges 2 D latencies and about 2 S per port); the generator does not,
//                 because interleaving them in one rank's program ties each tree's pipeline
//                 to the other's (gen_tree.cpp).
//  reduce:        one tree, one reduction pass.
//  broadcast:     one tree, one broadcast pass.
//  reducescatter: n trees, one rooted at each rank, each reducing one n-th, in n passes.
//  allgather:     n trees broadcasting one n-th each, in n passes.
CostTerms treePass(int D, int c, double x, double s, bool reduce) {
  CostTerms t;
  const double sigma = x / slices(x, s);
  t.alphaCount = D;
  t.betaBytes = c * (x + (D - 1) * sigma);
  if (reduce) t.gammaBytes = t.betaBytes;
  return t;
}

CostTerms times(double k, const CostTerms& t) { return t.scaled(k); }

// The tree all-reduce's four passes over halves of x = S / 2 in slices of sigma, as the data
// planes pace them and back-to-back iterations repeat them. Each pass is held to c x on its
// busiest port (c pieces of x in or out of a rank with c children), and passes of one tree
// wait for the other's: tree 1's leaves are tree 0's interior ranks, which send their half up
// tree 1 only once they are done with tree 0's reduction (B after A), and tree 1's root, a
// leaf of tree 0, sends the broadcast down tree 1 only once it has all of tree 0's (D after
// C). C overlaps B: it starts as soon as tree 0's root, a leaf of tree 1, has sent its half up
// tree 1 (x), so it ends x after B. Per iteration: A + B + x + D = (3 c + 1) x, plus each
// pass's pipeline fill where it is on the path: a slice climbs or descends D - 1 levels
// besides the one that streams, 2 sigma at each rank with two children and sigma at the root's
// single child, 2 D - 3 slices for A, B and D each (C's is hidden under B's); a chain (c = 1,
// n < 4) fills D - 1 slices in each of the four passes, none hidden. Latencies: D per pass on
// the path, one of them overlapped, 3 D - 1. Reductions run while the ingress takes the next
// slice, but for the last slice's at each of the D levels of A and B. For a power of two this
// is the simulation of the schedule with free reductions exactly; where one rank is interior
// in both trees (5, 9 ranks) it carries more than c x and the simulation is up to 10% above it
// on large messages (8 x against 7 x) and 20% below it on one slice.
CostTerms treeAllReduceCost(int n, double S, double s) {
  const int D = ceilLog2(n);
  const int c = n >= 4 ? 2 : 1;
  const double x = S / 2;
  const double sigma = x / slices(x, s);
  const double fill = c == 2 ? 3.0 * (2 * D - 3) : 4.0 * (D - 1);
  CostTerms t;
  t.alphaCount = 3 * D - 1;
  t.betaBytes = (3 * c + 1) * x + fill * sigma;
  t.gammaBytes = 2 * D * sigma;
  return t;
}

CostTerms treeCost(Collective coll, int n, double S, double s) {
  if (n <= 1 || S <= 0) return {};
  const int D = ceilLog2(n);
  const int c = n >= 4 ? 2 : 1;
  switch (coll) {
    case Collective::AllReduce: return treeAllReduceCost(n, S, s);
    case Collective::Reduce: return treePass(D, c, S, s, true);
    case Collective::Broadcast: return treePass(D, c, S, s, false);
    case Collective::ReduceScatter: return times(n, treePass(D, c, S / n, s, true));
    case Collective::AllGather: return times(n, treePass(D, c, S / n, s, false));
  }
  return {};
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

// k-nomial tree reduce to rank 0 then broadcast from it (gen_knomial.cpp; k = 2 is MPICH's
// binomial reduce and bcast, Thakur et al. 2005, which reduce-broadcast runs), each half
// pipelined by slice, one after the other on every rank. Rank 0 has C children (C = L =
// ceil(log2 n) for k = 2, up to (k-1) ceil(log_k n)) and is the bottleneck: in the reduce their C
// vectors come in through its ingress, in the broadcast it sends S to each out of its egress:
// 2 C S beta. Nothing else is on its path. It takes its children in increasing round, and a
// child of round i has the sum of its subtree's slice after its own children's, just when rank
// 0 is done with the children before it: the deeper subtrees fill their pipelines while rank 0
// takes the nearer ones. In the broadcast it serves the farthest child first, and every rank is
// done when rank 0 is. Back-to-back iterations do not overlap: rank 0's next reduce starts with
// rank 1, which has its last slice with rank 0's last send. A message climbs as many hops as
// its rank has nonzero base-k digits, so the tree is H hops deep (the most nonzero digits
// below n): 2 H alpha. Rank 0's reductions run while its ingress takes the next slices; the
// last slice's reductions on its way up, H of them, do not. The binomial case is exact against
// the simulation; for k > 2 a parent takes k-1 children per round back to back, which this
// form prices by the same argument (rank 0's ports carry C S).
struct KnomialShape {
  int children = 0;  // C: rank 0's children
  int depth = 0;     // H: hops from the deepest rank to rank 0
};

KnomialShape knomialShape(int n, int k) {
  KnomialShape t;
  for (long d = 1; d < n; d *= k) {
    for (int j = 1; j < k && j * d < n; ++j) ++t.children;
  }
  for (int r = 1; r < n; ++r) {
    int digits = 0;
    for (int v = r; v > 0; v /= k) digits += v % k != 0 ? 1 : 0;
    t.depth = std::max(t.depth, digits);
  }
  return t;
}

// One tree pass (reduce or broadcast alone): H alpha, rank 0's port C S, and on a reduce the
// last slice's H reductions.
CostTerms knomialPass(int n, int k, double S, double s, bool reduce) {
  CostTerms c;
  if (n <= 1 || S <= 0) return c;
  const KnomialShape t = knomialShape(n, k);
  c.alphaCount = t.depth;
  c.betaBytes = t.children * S;
  if (reduce) c.gammaBytes = t.depth * (S / slices(S, s));
  return c;
}

CostTerms knomialCost(Collective coll, int n, int k, double S, double s) {
  switch (coll) {
    case Collective::Reduce: return knomialPass(n, k, S, s, true);
    case Collective::Broadcast: return knomialPass(n, k, S, s, false);
    default: return knomialPass(n, k, S, s, true) + knomialPass(n, k, S, s, false);
  }
}

CostTerms reduceBroadcastCost(int n, double S, double s) {
  return knomialCost(Collective::AllReduce, n, 2, S, s);
}

// Bruck (ascending distances) and PAT (descending), gen_bruck.cpp and gen_pat.cpp: a half is
// L = ceil(log2 n) steps, the step at distance d moving m(d) blocks of S/n, m(d) = min(d, n-d)
// for Bruck and ceil((n-d)/2d) for PAT, n-1 blocks in all: (n-1)/n S per half through every
// port, as ring, and (n-1)/n S reduced in a reduce-scatter (Bruck et al. 1997; Thakur et al.
// 2005 for Bruck's all-gather). A step's blocks go as one message of k(m S/n)
// slices where they are neighbours: Bruck's wrap past block n-1 splits a step in two (one alpha
// more; off a power of two its reduce-scatter splits one message more, where a rank's blocks
// are partly summed already, which this form leaves out), PAT's strided blocks are neighbours only
// in the all-reduce's bit-reversed layout on a power of two, and elsewhere this form counts each of
// PAT's blocks as a message of its own (k(S/n) alphas each; an upper bound where the bit-reversed
// layout joins some of them).
double shiftAlphas(bool pat, int n, bool oneMessagePerStep, double S, double s) {
  double alphas = 0;
  for (int d = 1; d < n; d *= 2) {
    const int m = pat ? (n - d + 2 * d - 1) / (2 * d) : std::min(d, n - d);
    if (pat && !oneMessagePerStep) {
      alphas += m * slices(S / n, s);
    } else {
      alphas += slices(m * S / n, s) + (!pat && m > 1 ? 1 : 0);
    }
  }
  return alphas;
}

CostTerms shiftCost(bool pat, Collective coll, int n, double S, double s) {
  CostTerms c;
  if (n <= 1 || S <= 0) return c;
  const bool pow2 = (n & (n - 1)) == 0;
  const double half = static_cast<double>(n - 1) / n * S;
  const double alphas = shiftAlphas(pat, n, coll == Collective::AllReduce && pow2, S, s);
  const double halves = coll == Collective::AllReduce ? 2 : 1;
  c.alphaCount = halves * alphas;
  c.betaBytes = halves * half;
  if (coll != Collective::AllGather) c.gammaBytes = half;
  return c;
}

// Parameter server (Li et al., OSDI 2014), pipelined by slice as the generator runs it: the
// server takes slice j from every worker in through its ingress, reduces it and sends the sum
// to every worker out of its egress while slice j + 1 comes in. Its ports each carry
// (n - 1) S, at once (full duplex), and its egress is the bottleneck, busy from its first send
// of an iteration to its last. Iterations run back to back: worker w has the last slice of one
// (w - 1) sigma into the server's last round of sends, and pushes the first slice of the next
// at once, so the server has every worker's first slice one slice time after its last send,
// and its egress idles for that slice time (and the slice's reduction, and a latency each way)
// once per iteration: (n - 1) S + sigma per iteration, where one collective alone would pay
// (n - 1) (S + sigma), its last sends after the last slice came in. The server's other
// reductions run while its egress sends.
CostTerms parameterServerCost(int n, double S, double s) {
  CostTerms c;
  if (n <= 1 || S <= 0) return c;
  const double slice = S / slices(S, s);
  c.alphaCount = 2;
  c.betaBytes = (n - 1) * S + slice;
  c.gammaBytes = (n - 1) * slice;
  return c;
}

// In-network reduction through a switch (gen_switch.cpp): each rank sends S to the switch and
// receives S back, two messages per slice pipeline. SHARP (Graham et al., COMHPC 2016; NVIDIA's
// SHARP documentation) and NVLS (NCCL's NVLink SHARP: the NVSwitch reduces and multicasts) add
// in the switch's ASIC at line rate and multicast in the fabric, so there a rank's port is the
// bound, S each way. The lab's switch is a worker: its one port takes the n ranks' slices in
// and sends n copies of each sum out, so its egress carries n S, and it is costed as the
// parameter server's busy port above, with n senders, none of them the switch itself:
// 2 alpha, n S + sigma through its egress per back-to-back iteration, and its n - 1
// reductions of the last slice.
CostTerms switchCost(int n, double S, double s) {
  CostTerms c;
  if (S <= 0) return c;
  const double slice = S / slices(S, s);
  c.alphaCount = 2;
  c.betaBytes = n * S + slice;
  c.gammaBytes = (n - 1) * slice;
  return c;
}

// Inside a host: the same terms counted against the host's parameters.
CostTerms insideHost(CostTerms t) {
  t.hostAlphaCount += t.alphaCount;
  t.hostBetaBytes += t.betaBytes;
  t.alphaCount = 0;
  t.betaBytes = 0;
  return t;
}

// Two levels (Horovod's hierarchical all-reduce; see gen_hierarchical.cpp): ring
// reduce-scatter inside each host of K ranks, ring all-reduce of each 1/K shard across the
// H hosts, ring all-gather inside each host; with several hosts, the first and last phases at
// the host's parameters. A smaller last host of m ranks gives each of its ranks u = ceil(K/m)
// shards: u ring passes of m - 1 steps inside it, and u of the shard rings across hosts through its
// port, so the busiest rank sends max(K - 1, u (m - 1)) shards inside its host and u shards'
// rings across hosts.
CostTerms hierarchicalCost(int n, int perHost, double S, double s) {
  if (n <= 1) return {};
  const int K = (perHost <= 0 || perHost > n) ? n : perHost;
  const int H = (n + K - 1) / K;
  const int m = n - (H - 1) * K;
  const int u = (K + m - 1) / m;
  const double inside = std::max(K - 1, u * (m - 1));
  const CostTerms first = ringSteps(K, S, s, inside, inside), last = ringSteps(K, S, s, inside, 0);
  if (H == 1) return first + last;  // one host: its links are alpha and beta
  return insideHost(first) + times(u, ringCost(Collective::AllReduce, H, S / K, s)) +
         insideHost(last);
}

}  // namespace

bool hasClosedForm(const CostQuery& q) {
  return !(q.algorithm == "swing" && q.nranks > 0 && !std::has_single_bit(unsigned(q.nranks)));
}

CostTerms closedForm(const CostQuery& q) {
  if (q.nranks < 1) {
    throw GenError("ranks must be at least 1 (got " + std::to_string(q.nranks) + ")");
  }
  if (!hasClosedForm(q)) {
    throw GenError("swing has no closed form on " + std::to_string(q.nranks) +
                   " ranks, only on a power of two: the model simulates it");
  }
  if (!algorithmSupports(q.algorithm, q.collective)) {
    throw GenError("algorithm '" + std::string(q.algorithm) + "' does not implement " +
                   std::string(toString(q.collective)));
  }
  const int n = q.nranks;
  const double S = static_cast<double>(q.bytes);
  const double s = static_cast<double>(q.sliceBytes);
  const std::string_view a = q.algorithm;
  if (a == "ring") return ringCost(q.collective, n, S, s, slicesWindowOf(a, q.window));
  if (a == "tree") return treeCost(q.collective, n, S, s);
  if (a == "halving-doubling") return halvingDoublingCost(n, S, s);
  if (a == "recursive-doubling") return recursiveDoublingCost(n, S, s);
  if (a == "reduce-broadcast") return reduceBroadcastCost(n, S, s);
  if (a == "parameter-server") return parameterServerCost(n, S, s);
  if (a == "hierarchical") return hierarchicalCost(n, q.ranksPerHost, S, s);
  // Swing's steps move what halving-doubling's and recursive doubling's do on a power of two
  // (De Sensi et al., NSDI 2024): only the peers differ, which a uniform network
  // does not see. Off a power of two swing-latency folds as recursive doubling does.
  if (a == "swing") return halvingDoublingCost(n, S, s);
  if (a == "swing-latency") return recursiveDoublingCost(n, S, s);
  if (a == "bruck") return shiftCost(false, q.collective, n, S, s);
  if (a == "pat") return shiftCost(true, q.collective, n, S, s);
  if (a == "knomial") return knomialCost(q.collective, n, q.radix, S, s);
  if (a == "switch") return switchCost(n, S, s);
  throw GenError("the cost model has no closed form for algorithm '" + std::string(a) + "'");
}

namespace {

// The forms above, as docs/algorithms.md writes them.
// A window of W slices pays a step's latency once a window: k(S/n) becomes ⌈k(S/n)/W⌉.
std::string ringFormText(Collective c, int window) {
  const std::string k = window > 1 ? "⌈k(S/n)/W⌉" : "k(S/n)";
  const std::string w = window > 1 ? "; W = " + std::to_string(window) : "";
  switch (c) {
    case Collective::AllReduce: return "2(n−1)·" + k + "·α + 2(n−1)/n·S·β + (n−1)/n·S·γ" + w;
    case Collective::ReduceScatter: return "(n−1)·" + k + "·α + (n−1)/n·S·β + (n−1)/n·S·γ" + w;
    case Collective::AllGather: return "(n−1)·" + k + "·α + (n−1)/n·S·β" + w;
    case Collective::Reduce: return "(n−1)·α + (n−2+k(S))·(S/k(S))·(β+γ)";
    case Collective::Broadcast: return "(n−1)·α + (n−2+k(S))·(S/k(S))·β";
  }
  return {};
}

std::string treeFormText(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "(3D−1)·α + ((3c+1)·x + f·σ)·β + 2D·σ·γ; x = S/2";
    case Collective::Reduce: return "D·α + c(S + (D−1)σ)·(β + γ)";
    case Collective::Broadcast: return "D·α + c(S + (D−1)σ)·β";
    case Collective::ReduceScatter: return "n·D·α + c(S + n(D−1)σ)·(β + γ)";
    case Collective::AllGather: return "n·D·α + c(S + n(D−1)σ)·β";
  }
  return {};
}

bool isPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

std::string shiftFormText(bool pat, Collective c) {
  const std::string m = pat ? "m(d) = ⌈(n−d)/2d⌉" : "m(d) = min(d, n−d)";
  const std::string steps = pat ? "Σ_d k(m(d)·S/n)·α" : "Σ_d (k(m(d)·S/n) + [m(d) > 1])·α";
  switch (c) {
    case Collective::AllReduce:
      return "2·" + steps + " + 2(n−1)/n·S·β + (n−1)/n·S·γ; d = 1, 2, 4, … < n, " + m +
             (pat ? "; one alpha per block, k(S/n) each, unless n is a power of two" : "");
    case Collective::ReduceScatter:
    case Collective::AllGather:
      return (pat ? std::string("(n−1)·k(S/n)·α") : steps) + " + (n−1)/n·S·β" +
             (c == Collective::ReduceScatter ? " + (n−1)/n·S·γ" : "") + "; d = 1, 2, 4, … < n, " +
             m;
    default: return {};
  }
}

std::string knomialFormText(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "2H·α + 2C·S·β + H·σ·γ; C root's children, H tree depth";
    case Collective::Reduce: return "H·α + C·S·β + H·σ·γ; C root's children, H tree depth";
    case Collective::Broadcast: return "H·α + C·S·β; C root's children, H tree depth";
    default: return {};
  }
}

}  // namespace

std::string closedFormText(std::string_view a, Collective c, int window) {
  if (!algorithmSupports(a, c)) return {};
  if (a == "ring") return ringFormText(c, static_cast<int>(slicesWindowOf(a, window)));
  if (a == "tree") return treeFormText(c);
  if (a == "halving-doubling") {
    return "2·Σ_{d=2,4,…,p} k(S/d)·α + 2(p−1)/p·S·β + (p−1)/p·S·γ; plus 2α + 2S·β + S·γ when "
           "n ≠ p";
  }
  if (a == "recursive-doubling") {
    return "log₂p·k(S)·α + log₂p·S·β + log₂p·S·γ; plus 2α + 2S·β + S·γ when n ≠ p";
  }
  if (a == "reduce-broadcast") return "2H·α + 2D·S·β + H·σ·γ";
  if (a == "swing") {
    return "2·Σ_{d=2,4,…,n} k(S/d)·α + 2(n−1)/n·S·β + (n−1)/n·S·γ; n a power of two (else "
           "simulated)";
  }
  if (a == "swing-latency") {
    return "log₂p·k(S)·α + log₂p·S·β + log₂p·S·γ; plus 2α + 2S·β + S·γ when n ≠ p";
  }
  if (a == "bruck" || a == "pat") return shiftFormText(a == "pat", c);
  if (a == "knomial") return knomialFormText(c);
  if (a == "parameter-server") return "2α + ((n−1)·S + σ)·β + (n−1)·σ·γ";
  if (a == "switch") return "2α + (n·S + σ)·β + (n−1)·σ·γ; the switch a worker, its port n·S";
  if (a == "hierarchical") {
    return "ring-reducescatter(K, S) at α_h, β_h + ring-allreduce(H, S/K) at α, β + "
           "ring-allgather(K, S) at α_h, β_h";
  }
  return {};
}

std::optional<SentFormula> sentFormula(std::string_view a, Collective c, int n, uint64_t bytes) {
  if (n < 1 || !algorithmSupports(a, c)) return std::nullopt;
  const double S = static_cast<double>(bytes);
  const double part = static_cast<double>(n - 1) / n * S;
  if (a == "ring") {
    if (c == Collective::AllReduce) return SentFormula{"2(n−1)/n·S", 2 * part};
    if (c == Collective::ReduceScatter || c == Collective::AllGather) {
      return SentFormula{"(n−1)/n·S", part};
    }
    return std::nullopt;
  }
  if (a == "bruck" || a == "pat") {
    if (c == Collective::AllReduce) return SentFormula{"2(n−1)/n·S", 2 * part};
    return SentFormula{"(n−1)/n·S", part};
  }
  // Swing on any even n: each rank still sends each block once a half (gen_swing.cpp).
  if (a == "swing" && n % 2 == 0) return SentFormula{"2(n−1)/n·S", 2 * part};
  if (!isPowerOfTwo(n)) return std::nullopt;
  if (a == "halving-doubling") return SentFormula{"2(n−1)/n·S", 2 * part};
  if (a == "swing-latency") return SentFormula{"log₂n·S", ceilLog2(n) * S};
  if (a == "recursive-doubling") return SentFormula{"log₂n·S", ceilLog2(n) * S};
  return std::nullopt;
}

namespace {

bool ringLike(const CostQuery& q) {
  return q.algorithm == "ring" &&
         (q.collective == Collective::AllReduce || q.collective == Collective::ReduceScatter ||
          q.collective == Collective::AllGather);
}

// Calls f(a, b) for every link a -> b of q's ring (ringOrder, or 0, 1, ..., n-1).
template <typename F>
void forEachRingLink(const CostQuery& q, F&& f) {
  std::vector<int> order = q.ringOrder;
  if (order.empty()) {
    for (int r = 0; r < q.nranks; ++r) order.push_back(r);
  }
  const size_t n = order.size();
  for (size_t i = 0; i < n && n > 1; ++i) f(order[i], order[(i + 1) % n]);
}

// The rate of the ring's slowest link under the shaping (0 = none shaped): every link
// order[i] -> order[i+1] at the lower of its ends' ports and its own rate.
double slowestRingLink(const CostQuery& q) {
  double slowest = 0;
  forEachRingLink(q, [&](int a, int b) { slowest = lowerRate(slowest, q.shaping.pathRate(a, b)); });
  return slowest;
}

// The mean latency of the ring's links under the shaping: the added latency plus each link's
// own (a named topology's hops). Latencies overlap, unlike a link's bytes: the ring's 2(n-1)
// steps form a chain whose k-th message crosses the k-th link after the first, so the chain
// pays each link's latency in turn, their mean per step, where the slowest link's rate bounds
// the bytes of every step.
double meanRingLatency(const CostQuery& q) {
  double sum = 0;
  int links = 0;
  forEachRingLink(q, [&](int a, int b) {
    sum += q.shaping.pathLatency(a, b);
    ++links;
  });
  return links > 0 ? sum / links : q.shaping.addedLatencySeconds;
}

// beta no less than a byte's time at `rate` (0 = unshaped).
double slowedBeta(double beta, double rate) { return rate > 0 ? std::max(beta, 1.0 / rate) : beta; }

}  // namespace

bool closedFormIsPerIteration(const CostQuery& q) {
  switch (q.collective) {
    case Collective::AllReduce: return true;
    case Collective::ReduceScatter:
    case Collective::AllGather:
      return q.algorithm == "ring" || q.algorithm == "bruck" || q.algorithm == "pat";
    case Collective::Reduce:
    case Collective::Broadcast: return false;
  }
  return false;
}

bool closedFormCovers(const CostQuery& q) {
  if (!closedFormIsPerIteration(q) || !hasClosedForm(q)) return false;
  const bool hosts = q.ranksPerHost >= 1 && q.ranksPerHost < q.nranks;
  if (hosts && q.algorithm != "hierarchical") return false;
  return q.shaping.uniform() || ringLike(q);
}

ModelParams shapedParams(const CostQuery& q, const ModelParams& p) {
  const LinkShaping& sh = q.shaping;
  ModelParams r = p;
  const double rate = ringLike(q) ? slowestRingLink(q) : sh.portBytesPerSecond;
  r.alpha += ringLike(q) ? meanRingLatency(q) : sh.addedLatencySeconds;
  r.beta = slowedBeta(p.beta, rate);
  if (p.intraHostAlpha) r.intraHostAlpha = *p.intraHostAlpha + sh.addedLatencySeconds;
  if (p.intraHostBeta) r.intraHostBeta = slowedBeta(*p.intraHostBeta, rate);
  return r;
}

std::string_view toString(PredictionMethod m) {
  switch (m) {
    case PredictionMethod::ClosedForm: return "closed form";
    case PredictionMethod::Simulation: return "simulation";
    case PredictionMethod::SharedMemory: return "shared memory";
    case PredictionMethod::SharedMemoryCached: return "shared memory, cache rates";
  }
  return "?";
}

LinkModel linkModelFor(const CostQuery& q, const ModelParams& p) {
  const bool hosts = q.ranksPerHost >= 1 && q.ranksPerHost < q.nranks;
  return LinkModel::shaped(p, q.shaping, hosts ? q.ranksPerHost : 0);
}

namespace {

Schedule scheduleOf(const CostQuery& q) {
  const uint64_t elem = dtypeSize(q.dtype);
  GenParams g;
  g.collective = q.collective;
  g.nranks = q.nranks;
  g.count = apiCountForSize(q.collective, q.nranks, q.bytes, q.dtype);
  g.sliceElems = q.sliceBytes >= elem ? q.sliceBytes / elem : std::max<uint64_t>(g.count, 1);
  g.root = q.root;
  g.ranksPerHost = q.ranksPerHost;
  g.ring = q.ringOrder;
  g.radix = q.radix;
  g.torusDims = q.torusDims;
  g.window = slicesWindowOf(q.algorithm, q.window);
  return generate(q.algorithm, g);
}

SimOptions simOptionsOf(const CostQuery& q) {
  SimOptions so;
  so.dtype = q.dtype;
  so.inflight = std::max(q.inflight, 1);
  so.telemetry = TelemetryLevel::Off;
  return so;
}

}  // namespace

bool sharedMemoryCovers(const CostQuery& q, const ModelParams& p) {
  return q.sharedMemory && q.shaping.empty() && p.shmCopy && *p.shmCopy > 0;
}

uint64_t sharedMemoryWorkingSet(const Schedule& s, DataType dtype, int inflight) {
  const uint64_t elem = dtypeSize(dtype);
  const auto n = static_cast<size_t>(s.nranks);
  std::vector<uint64_t> largestIn(n, 0);    // the largest message each rank receives
  std::vector<uint64_t> senders(n * n, 0);  // senders[to * n + from]: 1 when from sends to it
  uint64_t bytes = 0;
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    uint64_t rrs = 0, rrsLargest = 0;
    for (const Op& op : s.ranks[r]) {
      if (op.kind == OpKind::RecvReduceSend) {
        ++rrs;
        rrsLargest = std::max(rrsLargest, op.count);
      }
      if (opSends(op.kind) && op.sendPeer >= 0 && static_cast<size_t>(op.sendPeer) < n) {
        const auto to = static_cast<size_t>(op.sendPeer);
        largestIn[to] = std::max(largestIn[to], op.count * elem);
        senders[to * n + r] = 1;
      }
    }
    const uint64_t temporaries = std::min<uint64_t>(rrs, static_cast<uint64_t>(inflight));
    bytes += (s.inputElems + s.outputElems + s.scratchElems + temporaries * rrsLargest) * elem;
  }
  for (size_t to = 0; to < n; ++to) {
    uint64_t rings = 0;
    for (size_t from = 0; from < n; ++from) rings += senders[to * n + from];
    if (rings > 0) bytes += rings * shmRingBytes(largestIn[to], inflight);
  }
  return bytes;
}

bool sendPayloadIsFresh(OpKind kind) {
  switch (kind) {
    case OpKind::RecvReduceSend:
    case OpKind::RecvReduceCopySend:
    case OpKind::RecvCopySend: return true;
    case OpKind::Send:
    case OpKind::Recv:
    case OpKind::RecvReduceCopy:
    case OpKind::Copy: return false;
  }
  return false;
}

LinkModel sharedMemoryLinks(const ModelParams& p, bool cacheRates) {
  ARL_ENFORCE(p.shmCopy && *p.shmCopy > 0, "the shared-memory model needs a copy rate");
  ARL_ENFORCE(!cacheRates || (p.shmCopyCached && p.gammaCached),
              "the cache-resident rates are not in the parameters");
  const double copy = (cacheRates ? *p.shmCopyCached : *p.shmCopy) * p.shmWorkScale;
  const double gamma = (cacheRates ? *p.gammaCached : p.gamma) * p.shmWorkScale;
  LinkModel m = LinkModel::fromParams(p);
  if (p.shmAlpha) m.defaults.latencySeconds = *p.shmAlpha;
  m.sendersCopy = true;
  // Sends as calibrate measured them (into a ring), when it did; with the cache-resident
  // rates, every copy at the cached one.
  const bool sends = !cacheRates && p.shmSend && p.shmSendFresh;
  m.port = {1.0 / (sends ? *p.shmSend * p.shmWorkScale : copy), 0};
  if (sends) m.freshSendBytesPerSecond = 1.0 / (*p.shmSendFresh * p.shmWorkScale);
  m.copyBytesPerSecond = 1.0 / copy;
  m.reduceBytesPerSecond = 1.0 / gamma;
  m.cores = std::max(p.cores, 0);
  m.wakeOnCore = true;
  return m;
}

SharedMemoryCost costSharedMemory(const CostQuery& q, const ModelParams& p) {
  ARL_ENFORCE(p.shmCopy && *p.shmCopy > 0, "the shared-memory model needs a copy rate");
  const Schedule s = scheduleOf(q);
  SharedMemoryCost cost;
  cost.workingSetBytes = sharedMemoryWorkingSet(s, q.dtype, std::max(q.inflight, 1));
  cost.cacheRates =
      p.shmCopyCached && p.gammaCached && p.llcBytes > 0 && cost.workingSetBytes <= p.llcBytes;
  const LinkModel m = sharedMemoryLinks(p, cost.cacheRates);
  // No separate bound of the work over the cores (cpuSeconds() / cores, the model until
  // 2026-12-02): the schedule on the cores does all of that work, wake-ups included, and on
  // the benchmark's grid never came out below it (docs/algorithms.md).
  cost.seconds = iterationSeconds(s, m, simOptionsOf(q));
  return cost;
}

double predictSharedMemory(const CostQuery& q, const ModelParams& p) {
  return costSharedMemory(q, p).seconds;
}

Prediction predict(const CostQuery& q, const ModelParams& p) {
  // Refuses what has no closed form, in every case but the one the simulation prices.
  if (hasClosedForm(q)) (void)closedForm(q);
  if (sharedMemoryCovers(q, p)) {
    const SharedMemoryCost c = costSharedMemory(q, p);
    return {c.seconds,
            c.cacheRates ? PredictionMethod::SharedMemoryCached : PredictionMethod::SharedMemory};
  }
  if (closedFormCovers(q)) {
    return {closedForm(q).seconds(shapedParams(q, p)), PredictionMethod::ClosedForm};
  }
  return {simulatedSeconds(q, p), PredictionMethod::Simulation};
}

double predictSeconds(const CostQuery& q, const ModelParams& p) { return predict(q, p).seconds; }

std::string alphaBetaGammaText(const ModelParams& p) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "alpha %.1f us per message, port %.2f GB/s each way, reduce %.2f GB/s",
                p.alpha * 1e6, 1e-9 / p.beta, 1e-9 / p.gamma);
  return buf;
}

double simulatedSeconds(const CostQuery& q, const ModelParams& p) {
  return iterationSeconds(scheduleOf(q), linkModelFor(q, p), simOptionsOf(q));
}

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
    const double A = terms[i].alphaCount + terms[i].hostAlphaCount;
    const double B = terms[i].betaBytes + terms[i].hostBetaBytes;
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
    const double A = terms[i].alphaCount + terms[i].hostAlphaCount;
    const double B = terms[i].betaBytes + terms[i].hostBetaBytes;
    const double r = seconds[i] - (A * f.alpha + B * f.beta + terms[i].gammaBytes * gamma);
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
