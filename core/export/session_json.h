// The parts of a bench session that the results file and the recording both write, and their
// readers (private to export/). Key names are the file formats' (docs/bench.md,
// docs/trace-and-recording.md); readers accept the older names noted there.
#pragma once

#include <string>

#include "export/export.h"
#include "export/json.h"
#include "export/json_in.h"

namespace arl {

// The network's shaping: {port_bytes_per_s, added_latency_s, slow_ranks: [{rank, bytes_per_s}],
// slow_links: [{from, to, bytes_per_s}]}; 0 and empty lists where a part is not shaped.
Json shapingJson(const LinkShaping& s);
Json configJson(const BenchConfig& c);
Json workerJson(const WorkerInfo& w);
Json workersJson(const std::vector<WorkerInfo>& ws);
Json modelJson(const BenchReport& r);
Json requestJson(const RunRequest& q);
// What the run resolved to (RunResult::effective): ranks per host, ring order, the schedule's
// steps and the bytes each rank sends in one collective.
Json effectiveJson(const ResolvedRun& e);

// A training run's configuration, as a training record's run and a recording's training run
// hold it (model, steps_asked, batch, bucket_bytes, overlap, sync, ...), and its checked
// reader, which fails through `o`'s JsonFail naming the field (train_export.cpp).
Json trainConfigJson(const TrainConfig& c);
TrainConfig readTrainConfig(const In& o);

// Telemetry events dropped over all runs of the session.
uint64_t totalDropped(const BenchReport& r);

// `s` as JSON text would hold it: std::string_view is not a JSON string type everywhere.
inline Json str(std::string_view s) { return Json(std::string(s)); }

}  // namespace arl
