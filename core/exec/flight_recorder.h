// The flight recorder: each worker keeps its last kFlightRecords collectives (one record per
// iteration a RankRun runs: warm-up, timed or checked), and hands them to the coordinator when
// a run fails, so that a hang or a failure can be told from every surviving rank's side. It
// follows PyTorch's flight recorder (each rank's last N collectives) and its fr_trace, which
// names the ranks that never reached the collective that failed; here the unit is a step of
// the schedule inside one collective, so the analysis names the ranks that never reached the
// step where the others stopped.
//
// Cost: a record is written per collective (begin, end) and per step (stepDone), never per
// chunk, by the rank's run thread alone, with plain stores into a ring allocated once. begin()
// copies the run's summary into a slot whose algorithm name has kMaxFlightNameBytes reserved
// when the recorder is made, so no collective allocates; setRun() may allocate, once per run,
// before the first collective. The peers a rank waited on are gathered only when a collective
// fails (waitedOn), from the executor's window.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/types.h"
#include "exec/rank_run.h"

namespace arl {

inline constexpr size_t kFlightRecords = 64;
// The longest algorithm name a record keeps (the protocol's name limit).
inline constexpr size_t kMaxFlightNameBytes = 255;

// How a recorded collective ended on this rank. Aborted: the run was cancelled (the
// coordinator's Abort after a failure elsewhere); Failed: it threw on its own (a peer gone,
// a mismatched header, ...).
enum class CollectiveState : uint8_t { InFlight = 0, Completed = 1, Failed = 2, Aborted = 3 };
inline constexpr uint8_t kMaxCollectiveState = 3;
// "in flight", "completed", "failed", "aborted"
const char* toString(CollectiveState s);
// "warm-up", "timed", "checked"
const char* toString(IterationPlace::Kind k);

// What the run is: its configuration summary, the same in each of its records.
struct FlightRun {
  uint64_t runId = 0;
  std::string algorithm;
  Collective collective = Collective::AllReduce;
  DataType dtype = DataType::Float;
  uint64_t count = 0;       // NCCL count
  int32_t nranks = 1;       // 1..kMaxRanks
  uint64_t sliceBytes = 0;  // the pipeline slice
  uint32_t nsteps = 0;      // steps in the schedule; 0 for a library's collective (no steps)
  bool operator==(const FlightRun&) const = default;
};

struct CollectiveRecord {
  FlightRun run;
  uint64_t seq = 0;  // the worker's collectives before this one: 0, 1, 2, ...
  IterationPlace place;
  int64_t startNs = 0;  // coordinator clock
  int64_t endNs = 0;    // 0 while in flight
  // The last step whose ops all completed on this rank; -1: none yet.
  int32_t lastStep = -1;
  // Ranks (bit r) this rank waited on when the collective ended unfinished: a receive not
  // arrived, a send not taken. 0 when it completed.
  uint64_t waitedOn = 0;
  CollectiveState state = CollectiveState::InFlight;
  bool operator==(const CollectiveRecord&) const = default;
};

// Ranks of a waitedOn mask, ascending.
std::vector<int> ranksOf(uint64_t mask);

class FlightRecorder {
 public:
  FlightRecorder();

  // Before a run's first collective: the summary its records carry.
  void setRun(const FlightRun& run);
  // A collective starts: it takes the oldest slot. No allocation.
  void begin(IterationPlace place, int64_t nowNs) noexcept;
  // Every op of `step` completed on this rank.
  void stepDone(uint32_t step) noexcept;
  // The collective is ending unfinished: the ranks it still waited on.
  void waitedOn(uint64_t ranks) noexcept;
  void end(CollectiveState state, int64_t nowNs) noexcept;

  // The records held, oldest first (at most kFlightRecords).
  std::vector<CollectiveRecord> records() const;
  // Collectives recorded since the recorder was made (older ones were overwritten).
  uint64_t recorded() const noexcept { return recorded_; }

 private:
  FlightRun run_;
  std::array<CollectiveRecord, kFlightRecords> slots_;
  uint64_t recorded_ = 0;
  CollectiveRecord* current_ = nullptr;  // the collective in flight
};

// ---- After a failure: every rank's records, and what they say --------------------------------

// What the coordinator holds of one rank's recorder after a failed run.
struct RankFlight {
  int rank = -1;
  bool received = false;
  uint64_t recorded = 0;
  std::vector<CollectiveRecord> records;  // oldest first
  // Why there is none (received false): "the process is gone", ...
  std::string missing;
  bool operator==(const RankFlight&) const = default;
};

// A rank's place in the collective that failed.
struct FlightRankLine {
  int rank = -1;
  // Its record of the failing collective; none: no records, or it never started that one.
  std::optional<CollectiveRecord> record;
  bool reachedStep = false;  // it got to the failing step (completed every step before it)
  std::string note;          // "no record, the process is gone", "still in iteration 3", ...
};

// fr_trace's question for one failed run: the collective where it failed (the earliest of the
// run that some rank did not complete), the failing step (the lowest step at which a rank that
// recorded that collective stopped: the step after its last completed one), and the ranks that
// never reached it.
struct FlightAnalysis {
  bool found = false;  // some rank recorded a collective of the run that did not complete
  uint64_t runId = 0;
  IterationPlace place;
  uint32_t nsteps = 0;
  int32_t failingStep = -1;
  // One per rank, in rank order; also when nothing was found (each with its note).
  std::vector<FlightRankLine> ranks;
  std::vector<int> neverReached;  // ranks that never reached failingStep
};

FlightAnalysis analyzeFlight(const std::vector<RankFlight>& flight, uint64_t runId);

// The summary bench prints, several lines: the failing collective and step, a line per rank
// (its last step, whom it waited on, or why it has no record) and "ranks that never reached
// step S: ...". Empty when `flight` is empty.
std::string flightSummaryText(const std::vector<RankFlight>& flight, uint64_t runId);

// "iteration 3 (timed)", "warm-up iteration 0", "checked iteration 2".
std::string placeText(const IterationPlace& p);

}  // namespace arl
