// The faults `allreduce-lab soak` interleaves among its runs, and the coordinator's events as
// the soak takes them. Each fault acts on a run that goes on until it is ended, and checks
// that the run ends as the session promises: with the error that names the rank and the
// cause, or, for frames from a stranger, not at all (they are logged and ignored).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/coordinator.h"

namespace arl::app {

// The soak's side of a coordinator's event queue: the results of runs, the iteration reports
// per run and the latest log lines. What it keeps is bounded (results are taken once).
class SessionEvents {
 public:
  explicit SessionEvents(Coordinator& c) : c_(c) {}
  // Takes the events there are, waiting up to `wait` for the first.
  void drain(std::chrono::milliseconds wait);
  // The result of run `id`, once it arrives within `timeout`.
  std::optional<RunResult> waitFinished(uint64_t id, std::chrono::milliseconds timeout);
  // Drains until `pred` holds; false when it did not within `timeout`.
  bool waitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout);
  // Iteration reports of run `id` so far, all ranks together.
  uint64_t iterationReports(uint64_t id) const;
  bool finished(uint64_t id) const { return finished_.count(id) != 0; }
  // Log lines: a mark, and the lines logged after it (of the last 1000).
  uint64_t logMark() const { return logCount_; }
  std::vector<std::string> logsSince(uint64_t mark) const;

 private:
  Coordinator& c_;
  std::map<uint64_t, RunResult> finished_;
  std::map<uint64_t, uint64_t> iterations_;
  std::deque<std::string> logs_;
  uint64_t logCount_ = 0;
};

enum class FaultKind { Kill, Stop, Reset, BadFrame };
std::string_view toString(FaultKind k);
// Every kind, in the order the soak cycles through them.
std::vector<FaultKind> faultKinds();

// The run a fault acts on: `req` (endless) on `world` in that order; `victim` is the rank it
// hits (a fault from outside the world ignores it).
struct FaultRun {
  Coordinator& coord;
  SessionEvents& events;
  RunRequest req;
  std::vector<WorkerInfo> world;
  int victim = 0;
};

struct FaultOutcome {
  bool ok = false;
  std::string error;  // the run's error (or the log line that answered the fault)
  std::string why;    // when not ok: what was expected and what happened
};

// Starts the run, waits until every rank has reported two iterations, injects the fault and
// checks how the run ended. Does not wait for a lost worker's replacement.
FaultOutcome injectFault(FaultKind kind, const FaultRun& run);

}  // namespace arl::app
