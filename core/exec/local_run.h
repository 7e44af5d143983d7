// Runs a whole schedule in one process: one thread per rank over the loopback transport,
// on real buffers of the CPU backend (or of makeBackend's). Used by `allreduce-lab plan
// --run` and by the tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "base/shaping.h"
#include "exec/telemetry.h"
#include "schedule/schedule.h"
#include "transport/loopback.h"

namespace arl {

struct LocalRunOptions {
  DataType dtype = DataType::Float;
  RedOp op = RedOp::Sum;
  bool inPlace = false;
  int warmup = 0;
  int iterations = 1;
  int inflight = 4;
  uint32_t check = 1;  // iterations whose output is compared (RankRunOptions::check)
  TelemetryLevel telemetry = TelemetryLevel::Off;
  TelemetrySink* sink = nullptr;  // receives telemetry when not null
  // The network the loopback transport paces (transport/pacing.h); empty = unshaped.
  LinkShaping shaping;
  // The run fails when no rank makes progress for this long (exec/progress.h).
  std::chrono::milliseconds stallTimeout{20000};
  // Failure injection for tests: rank `failRank` stops (throws) before op `failAtOp`.
  int failRank = -1;
  int failAtOp = -1;
  uint64_t runId = 0;  // copied into every telemetry event
  // Makes each rank's backend, on that rank's thread; empty: the CPU backend.
  std::function<std::unique_ptr<Backend>()> makeBackend;
  // Puts a transport of its own in front of each rank's loopback endpoint (a
  // PeerMemoryTransport, say), on that rank's thread; empty: the endpoint itself.
  std::function<std::unique_ptr<Transport>(Transport& endpoint, Backend& backend, int rank)>
      wrapTransport;
};

struct LocalRunResult {
  std::vector<double> iterationUs;  // per timed iteration: the slowest rank's time
  double timeUs = 0;                // mean of iterationUs (the lab's time, model/metrics.h)
  uint64_t wrong = 0;               // elements that differ from the expected result (all ranks)
  // Host copies of every rank's Output after the last iteration.
  std::vector<std::vector<unsigned char>> outputs;
};

// Throws PeerError (from the failing rank) when a rank fails; no thread is left running.
LocalRunResult runLocal(const Schedule& s, const LocalRunOptions& opt);

}  // namespace arl
