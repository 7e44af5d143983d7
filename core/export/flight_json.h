// A failed run's flight record as JSON (exec/flight_recorder.h): bench --json carries it in
// each failed result ("flight_record"), bench --flight-record FILE writes every failed run's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/flight_recorder.h"
#include "export/export.h"
#include "export/json.h"

namespace arl {

// {"run_id", "analysis": {"found", "place", "iteration", "failing_step", "steps",
// "never_reached": [ranks]}, "ranks": [{"rank", "received", "missing", "recorded",
// "records": [{"run_id", "algorithm", "collective", "dtype", "count", "ranks", "slice_bytes",
// "steps", "seq", "place", "iteration", "start_ns", "end_ns", "last_step", "waited_on",
// "state"}]}]}; null when `flight` is empty (the run completed).
Json flightRecordJson(const std::vector<RankFlight>& flight, uint64_t runId);

// bench --flight-record: {"runs": [flightRecordJson of each failed or aborted row]}, the
// array empty when every run completed.
std::string flightRecordFileJson(const BenchReport& r);

}  // namespace arl
