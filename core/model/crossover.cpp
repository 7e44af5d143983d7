#include "model/crossover.h"

#include <algorithm>
#include <map>

#include "base/errors.h"
#include "schedule/generators.h"

namespace arl {

namespace {

// Why an algorithm is missing from some cells, kept once per algorithm with how many.
struct Misses {
  std::map<std::string, std::pair<std::string, int>> byAlgorithm;  // -> (first reason, cells)
  void add(const std::string& algorithm, const std::string& why) {
    ++byAlgorithm.try_emplace(algorithm, why, 0).first->second.second;
  }
};

// One algorithm's time on one cell: predict()'s (the closed form where it covers the query,
// else the simulation), or the simulation alone for an algorithm without a closed form up to
// kMapSimulatedRanks ranks. None when the generator refuses the cell.
std::optional<MapEntry> price(const CostQuery& q, const ModelParams& p, Misses& misses) {
  const std::string name(q.algorithm);
  try {
    const Prediction pr = predict(q, p);
    const MapMethod m =
        pr.method == PredictionMethod::ClosedForm ? MapMethod::ClosedForm : MapMethod::Simulation;
    return MapEntry{name, pr.seconds, m};
  } catch (const GenError& closed) {
    if (q.nranks > kMapSimulatedRanks) {
      misses.add(name, std::string(closed.what()) + "; simulated up to " +
                           std::to_string(kMapSimulatedRanks) + " ranks only");
      return std::nullopt;
    }
    try {
      return MapEntry{name, simulatedSeconds(q, p), MapMethod::Simulation};
    } catch (const GenError& refused) {
      misses.add(name, refused.what());
      return std::nullopt;
    }
  }
}

// The network of one row: q's, expanded over its topology when it has one; none when the
// topology does not fit the row's ranks or the row is too large to simulate.
std::optional<LinkShaping> rowNetwork(const MapQuery& q, int nranks, std::string& why) {
  if (!q.topology) return q.network;
  if (nranks > kMapSimulatedRanks) {
    why = "over " + std::to_string(kMapSimulatedRanks) + " ranks (a topology is simulated)";
    return std::nullopt;
  }
  try {
    return expandTopology(*q.topology, nranks, q.network, q.hopLatencySeconds);
  } catch (const TopologyError& e) {
    why = e.what();
    return std::nullopt;
  }
}

MapCell priceCell(const MapQuery& q, const std::vector<std::string>& algorithms,
                  const LinkShaping& network, int nranks, uint64_t bytes, Misses& misses) {
  MapCell cell{nranks, bytes, {}};
  CostQuery cq;
  cq.collective = Collective::AllReduce;
  cq.nranks = nranks;
  cq.bytes = bytes;
  cq.shaping = network;
  // On a torus that fits the row swing takes its dimensions in turn, as the runs do.
  if (q.topology && q.topology->kind == Topology::Kind::Torus &&
      q.topology->rows * q.topology->cols == nranks) {
    cq.torusDims = {q.topology->rows, q.topology->cols};
  }
  for (const std::string& a : algorithms) {
    cq.algorithm = a;
    if (auto e = price(cq, q.params, misses)) cell.ranked.push_back(std::move(*e));
  }
  std::stable_sort(cell.ranked.begin(), cell.ranked.end(),
                   [](const MapEntry& x, const MapEntry& y) { return x.seconds < y.seconds; });
  return cell;
}

}  // namespace

const char* toString(MapMethod m) {
  return m == MapMethod::ClosedForm ? "closed form" : "simulation";
}

double MapCell::margin() const {
  if (ranked.empty() || ranked[0].seconds <= 0) return 0;
  const double best = ranked[0].seconds;
  for (size_t i = 1; i < ranked.size(); ++i) {
    if (ranked[i].seconds > best * (1 + 1e-9)) return ranked[i].seconds / best - 1;
  }
  return 0;
}

CrossoverMap crossoverMap(const MapQuery& q) {
  if (q.ranks.empty() || q.sizes.empty()) throw ConfigError("the map needs ranks and sizes");
  for (int n : q.ranks) {
    if (n < 2) throw ConfigError("a map row needs 2 ranks or more, not " + std::to_string(n));
  }
  const std::vector<std::string>& algorithms =
      q.algorithms.empty() ? algorithmNames() : q.algorithms;
  CrossoverMap map{q.ranks, q.sizes, {}, {}};
  map.cells.reserve(q.ranks.size() * q.sizes.size());
  Misses misses;
  for (int n : q.ranks) {
    std::string why;
    const std::optional<LinkShaping> network = rowNetwork(q, n, why);
    if (!network) map.notes.push_back(std::to_string(n) + " ranks: not priced: " + why);
    for (uint64_t bytes : q.sizes) {
      map.cells.push_back(network ? priceCell(q, algorithms, *network, n, bytes, misses)
                                  : MapCell{n, bytes, {}});
    }
  }
  for (const auto& [algorithm, miss] : misses.byAlgorithm) {
    map.notes.push_back(algorithm + ": left out of " + std::to_string(miss.second) +
                        " cells: " + miss.first);
  }
  return map;
}

std::string shortAlgorithmName(const std::string& algorithm) {
  static const std::map<std::string, std::string> names{
      {"halving-doubling", "hd"}, {"recursive-doubling", "rd"}, {"reduce-broadcast", "rb"},
      {"parameter-server", "ps"}, {"hierarchical", "hier"},     {"swing-latency", "swl"},
      {"switch", "swtch"},
  };
  const auto it = names.find(algorithm);
  if (it != names.end()) return it->second;
  return algorithm.substr(0, 5);
}

}  // namespace arl
