// Dispatch from algorithm names to the generators. The names are what users type (CLI, GUI,
// recordings), so they are part of the interface and never change.
#include <algorithm>
#include <string>

#include "base/limits.h"
#include "schedule/generators.h"

namespace arl {

namespace {

bool allCollectives(std::string_view algo) { return algo == "ring" || algo == "tree"; }

bool supportsBeyondAllReduce(std::string_view algo, Collective c) {
  if (allCollectives(algo)) return true;
  if (algo == "bruck" || algo == "pat") {
    return c == Collective::AllGather || c == Collective::ReduceScatter;
  }
  if (algo == "knomial") return c == Collective::Reduce || c == Collective::Broadcast;
  return false;
}

using Generator = Schedule (*)(const GenParams&);

struct Entry {
  std::string_view name;
  Generator gen;
};

// Display order.
constexpr Entry kGenerators[] = {
    {"ring", ringSchedule},
    {"tree", treeSchedule},
    {"halving-doubling", halvingDoublingAllReduce},
    {"recursive-doubling", recursiveDoublingAllReduce},
    {"reduce-broadcast", reduceBroadcastAllReduce},
    {"parameter-server", parameterServerAllReduce},
    {"hierarchical", hierarchicalAllReduce},
    {"bruck", bruckSchedule},
    {"pat", patSchedule},
    {"swing", swingAllReduce},
    {"swing-latency", swingLatencyAllReduce},
    {"knomial", knomialSchedule},
    {"switch", switchAllReduce},
};

}  // namespace

uint32_t slicesWindowOf(std::string_view algo, int window) {
  return algo == "ring" && window > 1 ? static_cast<uint32_t>(window) : 1;
}

const std::vector<std::string>& algorithmNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Entry& e : kGenerators) v.emplace_back(e.name);
    return v;
  }();
  return names;
}

bool algorithmSupports(std::string_view algo, Collective c) {
  const auto& names = algorithmNames();
  if (std::find(names.begin(), names.end(), algo) == names.end()) {
    return false;
  }
  return c == Collective::AllReduce || supportsBeyondAllReduce(algo, c);
}

int helperWorkers(std::string_view algo) { return algo == "switch" ? 1 : 0; }

std::string workerCountRefusal(std::string_view algo, int workers) {
  const int helpers = helperWorkers(algo);
  if (workers <= helpers) {
    return std::string(algo) + " takes a worker beside its ranks to play the switch: at least " +
           std::to_string(helpers + 1) + " workers";
  }
  return rankCountRefusal(algo, workers - helpers);
}

std::string rankCountRefusal(std::string_view algo, int nranks) {
  if (nranks + helperWorkers(algo) > kMaxRanks) {
    return std::string(algo) + " takes a worker beside its ranks for the switch: at most " +
           std::to_string(kMaxRanks - helperWorkers(algo)) + " ranks (got " +
           std::to_string(nranks) + ")";
  }
  return {};
}

Schedule generate(std::string_view algo, const GenParams& p) {
  for (const Entry& e : kGenerators) {
    if (e.name == algo) return e.gen(p);
  }
  std::string known;
  for (const std::string& n : algorithmNames()) {
    known += (known.empty() ? "" : ", ") + n;
  }
  throw GenError("unknown algorithm '" + std::string(algo) + "' (known: " + known + ")");
}

}  // namespace arl
