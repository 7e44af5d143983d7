#include "export/map_json.h"

#include "export/session_json.h"

namespace arl {

namespace {

Json cellJson(const MapCell& c) {
  Json algorithms = Json::array();
  for (const MapEntry& e : c.ranked) {
    algorithms.push_back(
        Json{{"algorithm", e.algorithm}, {"seconds", e.seconds}, {"method", toString(e.method)}});
  }
  const bool priced = !c.ranked.empty();
  return Json{{"ranks", c.nranks},
              {"bytes", c.bytes},
              {"winner", priced ? Json(c.ranked.front().algorithm) : Json()},
              {"margin", c.ranked.size() > 1 ? Json(c.margin()) : Json()},
              {"method", priced ? Json(toString(c.ranked.front().method)) : Json()},
              {"algorithms", std::move(algorithms)}};
}

}  // namespace

Json crossoverMapJson(const CrossoverMap& m, const MapQuery& q, const std::string& source) {
  Json cells = Json::array();
  for (const MapCell& c : m.cells) cells.push_back(cellJson(c));
  const ModelParams& p = q.params;
  return Json{{"label", "model, not measured"},
              {"measured", false},
              {"model", Json{{"source", source},
                             {"alpha_s", p.alpha},
                             {"beta_s_per_byte", p.beta},
                             {"gamma_s_per_byte", p.gamma}}},
              {"network", shapingJson(q.network)},
              {"topology", q.topology ? Json(topologyName(*q.topology)) : Json()},
              {"hop_latency_s", q.hopLatencySeconds},
              {"collective", "allreduce"},
              {"ranks", m.ranks},
              {"sizes", m.sizes},
              {"cells", std::move(cells)},
              {"notes", m.notes}};
}

}  // namespace arl
