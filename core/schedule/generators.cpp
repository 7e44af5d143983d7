// Dispatch from algorithm names to the generators. The names are what users type (CLI, GUI,
// recordings), so they are part of the interface and never change.
#include <algorithm>
#include <string>

#include "schedule/generators.h"

namespace arl {

namespace {

bool allCollectives(std::string_view algo) { return algo == "ring" || algo == "tree"; }

}  // namespace

const std::vector<std::string>& algorithmNames() {
  static const std::vector<std::string> names{"ring",
                                              "tree",
                                              "halving-doubling",
                                              "recursive-doubling",
                                              "reduce-broadcast",
                                              "parameter-server",
                                              "hierarchical"};
  return names;
}

bool algorithmSupports(std::string_view algo, Collective c) {
  const auto& names = algorithmNames();
  if (std::find(names.begin(), names.end(), algo) == names.end()) {
    return false;
  }
  return c == Collective::AllReduce || allCollectives(algo);
}

Schedule generate(std::string_view algo, const GenParams& p) {
  if (algo == "ring") {
    return ringSchedule(p);
  }
  if (algo == "tree") {
    return treeSchedule(p);
  }
  if (algo == "halving-doubling") {
    return halvingDoublingAllReduce(p);
  }
  if (algo == "recursive-doubling") {
    return recursiveDoublingAllReduce(p);
  }
  if (algo == "reduce-broadcast") {
    return reduceBroadcastAllReduce(p);
  }
  if (algo == "parameter-server") {
    return parameterServerAllReduce(p);
  }
  if (algo == "hierarchical") {
    return hierarchicalAllReduce(p);
  }
  std::string known;
  for (const std::string& n : algorithmNames()) {
    known += (known.empty() ? "" : ", ") + n;
  }
  throw GenError("unknown algorithm '" + std::string(algo) + "' (known: " + known + ")");
}

}  // namespace arl
