// Schedule generators: pure functions from (algorithm, collective, ranks, count, slice)
// to a Schedule. See each generator's source for the algorithm's description and origin.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "schedule/schedule.h"

namespace arl {

struct GenParams {
  Collective collective = Collective::AllReduce;
  int nranks = 1;
  uint64_t count = 0;       // NCCL API count (see Schedule::count)
  uint64_t sliceElems = 0;  // pipeline slice size in elements; must be > 0
  int root = 0;             // Reduce / Broadcast root
  int ranksPerHost = 0;     // hierarchical grouping; 0 = all ranks on one host
  std::vector<int> ring;    // ring order (a permutation of 0..n-1); empty = identity
  int radix = 4;            // knomial: children per parent and round (k >= 2; 2 = binomial)
  // swing and swing-latency on a torus: its dimensions, ranks row-major over them (the last
  // varies fastest; torus:RxC is {R, C}), each a power of two, their product nranks. The steps
  // then take the dimensions in turn, as the paper runs Swing on a D-dimensional torus. Empty:
  // the ranks as one ring. Other algorithms ignore it.
  std::vector<int> torusDims;
  // ring's AllReduce, ReduceScatter and AllGather: slices taken together, step by step, as
  // NCCL's FIFO of several steps lets a rank send ahead (gen_ring.cpp). A rank then sends up
  // to `window` messages on a channel before it reads one, so a channel must hold that many
  // (Schedule::window). 1: slice by slice. Other algorithms take only 1.
  uint32_t window = 1;
};

// Thrown for parameters a generator refuses (unknown algorithm, unsupported collective,
// zero slice, root out of range, ...). what() names the offending parameter.
struct GenError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// All algorithm names, in display order.
const std::vector<std::string>& algorithmNames();

// Whether `algo` supports collective `c` (all algorithms support AllReduce; ring and tree
// support every collective, bruck and pat AllGather and ReduceScatter, knomial Reduce and
// Broadcast).
bool algorithmSupports(std::string_view algo, Collective c);

// Why `algo` cannot run on `nranks` ranks, or empty when it can: switch at most kMaxRanks - 1,
// its switch being one more worker; every other algorithm takes any count the generators take
// (1..kMaxRanks).
std::string rankCountRefusal(std::string_view algo, int nranks);

// What step s (the schedule's numbering: the all-gather's steps after the reduce-scatter's) of
// swing or swing-latency (`latency`) does on nranks ranks, on a torus of `dims`
// (GenParams::torusDims; empty: one ring). An exchange moves along `dimension`, at that
// dimension's own step k (its peers are rho(k) away there), among `ranks` ranks. Other than a
// power of two some ranks fold into a neighbour first and get the result from it last
// (gen_swing.cpp): Fold and Unfold. Role::None for a step beyond the schedule's.
struct SwingStep {
  enum class Role { None, Exchange, Fold, Unfold };
  Role role = Role::None;
  int dimension = 0;
  int k = 0;
  int ranks = 0;
};
SwingStep swingStep(bool latency, const std::vector<int>& dims, int nranks, int s);

// The window an algorithm's schedule takes for a run asked for `window`: the window for ring,
// 1 for every other algorithm (none of which emits its slices by windows).
uint32_t slicesWindowOf(std::string_view algo, int window);

// Generates the schedule. Throws GenError on bad parameters.
Schedule generate(std::string_view algo, const GenParams& p);

// Individual generators (all throw GenError on bad parameters).
Schedule ringSchedule(const GenParams& p);  // all collectives
Schedule treeSchedule(const GenParams& p);  // all collectives
Schedule halvingDoublingAllReduce(const GenParams& p);
Schedule recursiveDoublingAllReduce(const GenParams& p);
Schedule reduceBroadcastAllReduce(const GenParams& p);
Schedule parameterServerAllReduce(const GenParams& p);
Schedule hierarchicalAllReduce(const GenParams& p);
Schedule bruckSchedule(const GenParams& p);          // AllReduce, AllGather, ReduceScatter
Schedule patSchedule(const GenParams& p);            // AllReduce, AllGather, ReduceScatter
Schedule swingAllReduce(const GenParams& p);         // AllReduce
Schedule swingLatencyAllReduce(const GenParams& p);  // AllReduce
Schedule knomialSchedule(const GenParams& p);        // AllReduce, Reduce, Broadcast
// AllReduce through a switch: p.nranks ranks and one more node, the switch (nonResultRanks 1).
Schedule switchAllReduce(const GenParams& p);

// Workers an algorithm takes beside the collective's ranks: 1 for switch (the worker that
// plays the switch), 0 for every other. A run of `algo` on W workers reduces over
// W - helperWorkers(algo) ranks.
int helperWorkers(std::string_view algo);

// Why `algo` cannot run on a world of `workers` workers (too few to spare its helpers, or a
// rank count rankCountRefusal() refuses), or empty when it can: what "all the algorithms that
// run here" means to bench and the window, and the check every run request passes.
std::string workerCountRefusal(std::string_view algo, int workers);

}  // namespace arl
