// How far a rank got and what it waits for. A run has one deadline: a stall, when no rank
// anywhere makes progress for the run's stall timeout. A single wait has none of its own: a
// rank that waits while its peers work (halving-doubling's extra ranks wait out the whole
// middle phase) is not failing. A dead peer ends a wait otherwise: the coordinator notices
// the death (heartbeats, the child's exit) and aborts the run; a shared-memory wait also
// watches the peer's process.
//
// RankProgress is written by the rank's own thread (its executor and set-up) with plain
// relaxed stores, a few per op, and read by any thread: the worker's heartbeat carries it to
// the coordinator, the in-process run's watchdog reads it directly.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "base/clock.h"

namespace arl {

// Where a rank's run is. Reported by heartbeats; the order is the order of a run.
enum class RunPhase : uint8_t {
  Idle = 0,           // no run
  SettingUp = 1,      // schedule, buffers, inputs, expected output, data plane
  AwaitingStart = 2,  // Ready sent, waiting for every rank's endpoint (Start)
  Iterating = 3,      // warm-up and timed iterations
  Checking = 4,       // comparing the result with the expected one
  Closing = 5,        // saying goodbye on the data plane
  Reported = 6,       // RunDone or RunFailed sent
};
inline constexpr uint8_t kMaxRunPhase = 6;
const char* toString(RunPhase p);

// What a blocked rank waits for: a message from a peer, or room at a peer (its ring or
// socket queue is full, or a zero-copy send not yet taken).
enum class WaitKind : uint8_t { None = 0, Data = 1, Room = 2 };
inline constexpr uint8_t kMaxWaitKind = 2;

struct ProgressSnapshot {
  uint64_t ticks = 0;
  RunPhase phase = RunPhase::Idle;
  WaitKind wait = WaitKind::None;
  int32_t peer = -1;       // with wait != None
  uint32_t step = 0;       // with wait != None
  uint32_t iteration = 0;  // the iteration being run (warm-up ones count from 0 too)
  // One of the check's iterations after the timed ones, when not 0: k of checkIterations
  // (RankRunOptions::check, IterationPlace); `iteration` says nothing then.
  uint32_t checkIteration = 0;
  uint32_t checkIterations = 0;
};

// "iteration 2"; for one of the check's iterations after the timed ones (checkIteration k > 0),
// "checking iteration 2 of 3" ("checking iteration 2" when checkIterations is 0, unknown).
std::string iterationText(uint32_t iteration, uint32_t checkIteration, uint32_t checkIterations);

// "waits for data from rank 1 for step 5 (iteration 2)", "is setting up", ...
std::string describe(const ProgressSnapshot& s);

class RankProgress {
 public:
  // Something moved: an op issued or completed, a piece of the set-up or check done.
  void tick() noexcept { ticks_.store(ticks_.load(kRelaxed) + 1, kRelaxed); }  // one writer
  void setPhase(RunPhase p) noexcept {
    phase_.store(static_cast<uint8_t>(p), kRelaxed);
    tick();
  }
  void setIteration(uint32_t it) noexcept { iteration_.store(it, kRelaxed); }
  // From the first of the check's iterations after the timed ones on (ProgressSnapshot).
  void setCheckIteration(uint32_t k, uint32_t of) noexcept {
    checkIterations_.store(of, kRelaxed);
    checkIteration_.store(k, kRelaxed);
  }
  void beginWait(WaitKind k, int peer, uint32_t step) noexcept {
    peer_.store(peer, kRelaxed);
    step_.store(step, kRelaxed);
    wait_.store(static_cast<uint8_t>(k), kRelaxed);
  }
  void endWait() noexcept {
    wait_.store(static_cast<uint8_t>(WaitKind::None), kRelaxed);
    tick();
  }
  ProgressSnapshot snapshot() const noexcept;

 private:
  static constexpr std::memory_order kRelaxed = std::memory_order_relaxed;
  std::atomic<uint64_t> ticks_{0};
  std::atomic<uint8_t> phase_{0};
  std::atomic<uint8_t> wait_{0};
  std::atomic<int32_t> peer_{-1};
  std::atomic<uint32_t> step_{0};
  std::atomic<uint32_t> iteration_{0};
  std::atomic<uint32_t> checkIteration_{0};
  std::atomic<uint32_t> checkIterations_{0};
};

// The clock of a run's stall timeout: progress anywhere restarts it.
class StallWatch {
 public:
  explicit StallWatch(std::chrono::milliseconds timeout,
                      SteadyClock::time_point now = SteadyClock::now())
      : timeout_(timeout), last_(now) {}
  void progressed(SteadyClock::time_point now) { last_ = now; }
  // Restarts the clock when `total` (a sum of progress counters) changed since the last call.
  void observe(uint64_t total, SteadyClock::time_point now) {
    if (total != total_) {
      total_ = total;
      last_ = now;
    }
  }
  SteadyClock::duration quietFor(SteadyClock::time_point now) const { return now - last_; }
  bool expired(SteadyClock::time_point now) const { return now - last_ > timeout_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  std::chrono::milliseconds timeout_;
  SteadyClock::time_point last_;
  uint64_t total_ = 0;
};

// CPU time a thread has used, in whole milliseconds (0 when it cannot be read, e.g. the thread
// has ended). Set-up and the final check are long loops that wait for nobody, so a rank
// thread's CPU time there is progress; while iterating it is not (a wait may poll).
uint64_t threadCpuMillis(std::thread& t);

// The progress counter a stall watch sums for one rank: its ticks, plus its thread's CPU time
// while it sets up or checks.
uint64_t progressCount(const ProgressSnapshot& s, std::thread& t);

// "no rank made progress for 1.2 s (stall timeout 1 s)": the head of a stall's error.
std::string stallHeadline(SteadyClock::duration quiet, std::chrono::milliseconds timeout);

}  // namespace arl
