// The crossover map: which algorithm the cost model predicts fastest for an all-reduce over a
// grid of rank counts x message sizes, and by how much it beats the runner-up. Every figure in
// it is the model's (predict()'s closed forms or its simulation), never a measurement.
//
// Which cells use which method: on the machine's own network or a uniform shaping, each
// algorithm with a closed form (closedForm()) is priced by it at any rank count, exact for
// the alpha-beta-gamma model; an algorithm without one is simulated up to
// kMapSimulatedRanks ranks and left out of larger cells. On a named topology (base/topology.h)
// every link differs, so every algorithm is simulated, at rank counts the topology fits up to
// kMapSimulatedRanks (expanding a topology prices every pair of ranks: n^2 links).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/shaping.h"
#include "base/topology.h"
#include "model/model.h"

namespace arl {

// The most ranks a map cell is simulated at.
inline constexpr int kMapSimulatedRanks = 64;

struct MapQuery {
  std::vector<int> ranks;               // rows, each >= 2
  std::vector<uint64_t> sizes;          // columns: the all-reduce's bytes, each > 0
  std::vector<std::string> algorithms;  // empty = algorithmNames()
  ModelParams params;
  LinkShaping network;               // ports and added latency (uniform)
  std::optional<Topology> topology;  // expanded per row over `network`
  double hopLatencySeconds = 0;      // the topology's per-hop latency
};

enum class MapMethod : uint8_t { ClosedForm, Simulation };
const char* toString(MapMethod m);  // "closed form", "simulation"

struct MapEntry {
  std::string algorithm;
  double seconds = 0;
  MapMethod method = MapMethod::ClosedForm;
};

struct MapCell {
  int nranks = 0;
  uint64_t bytes = 0;
  std::vector<MapEntry> ranked;  // fastest first; empty when no algorithm could be priced
  // How much longer the runner-up takes than the winner (0.12 = 12% longer); 0 with fewer
  // than two entries. An algorithm that ties the winner exactly is no runner-up: on a uniform
  // network swing's closed form is halving-doubling's, swing-latency's recursive doubling's,
  // so the margin is over the next algorithm that takes longer.
  double margin() const;
};

struct CrossoverMap {
  std::vector<int> ranks;
  std::vector<uint64_t> sizes;
  std::vector<MapCell> cells;  // row-major: cells[r * sizes.size() + s]
  // One line per algorithm or row the map leaves out somewhere, and why ("bruck: no closed
  // form; simulated up to 64 ranks").
  std::vector<std::string> notes;
  const MapCell& at(size_t row, size_t col) const { return cells[row * sizes.size() + col]; }
};

// Computes the map. Throws ConfigError for an empty grid or a row under 2 ranks.
CrossoverMap crossoverMap(const MapQuery& q);

// A short name for tables: "ring", "tree", "hd", "rd", "rb", "ps", "hier"; a name without one
// is cut to 5 characters.
std::string shortAlgorithmName(const std::string& algorithm);

}  // namespace arl
