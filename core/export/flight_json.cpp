#include "export/flight_json.h"

#include "export/session_json.h"

namespace arl {

namespace {

Json collectiveRecordJson(const CollectiveRecord& c) {
  return Json{{"run_id", c.run.runId},
              {"algorithm", c.run.algorithm},
              {"collective", str(toString(c.run.collective))},
              {"dtype", str(toString(c.run.dtype))},
              {"count", c.run.count},
              {"ranks", c.run.nranks},
              {"slice_bytes", c.run.sliceBytes},
              {"steps", c.run.nsteps},
              {"seq", c.seq},
              {"place", toString(c.place.kind)},
              {"iteration", c.place.index},
              {"start_ns", c.startNs},
              {"end_ns", c.endNs == 0 ? Json(nullptr) : Json(c.endNs)},
              {"last_step", c.lastStep},
              {"waited_on", ranksOf(c.waitedOn)},
              {"state", toString(c.state)}};
}

Json analysisJson(const FlightAnalysis& a) {
  if (!a.found) return Json{{"found", false}};
  return Json{{"found", true},
              {"place", toString(a.place.kind)},
              {"iteration", a.place.index},
              {"failing_step", a.failingStep},
              {"steps", a.nsteps},
              {"never_reached", a.neverReached}};
}

}  // namespace

Json flightRecordJson(const std::vector<RankFlight>& flight, uint64_t runId) {
  if (flight.empty()) return Json(nullptr);
  Json ranks = Json::array();
  for (const RankFlight& f : flight) {
    Json records = Json::array();
    for (const CollectiveRecord& c : f.records) records.push_back(collectiveRecordJson(c));
    ranks.push_back(Json{{"rank", f.rank},
                         {"received", f.received},
                         {"missing", f.received ? Json(nullptr) : Json(f.missing)},
                         {"recorded", f.recorded},
                         {"records", std::move(records)}});
  }
  return Json{{"run_id", runId},
              {"analysis", analysisJson(analyzeFlight(flight, runId))},
              {"ranks", std::move(ranks)}};
}

std::string flightRecordFileJson(const BenchReport& r) {
  Json runs = Json::array();
  for (const BenchRow& row : r.rows) {
    if (!row.result.flight.empty()) {
      runs.push_back(flightRecordJson(row.result.flight, row.result.runId));
    }
  }
  std::string text = jsonText(Json{{"runs", std::move(runs)}});
  text += '\n';
  return text;
}

}  // namespace arl
