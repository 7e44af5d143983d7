// One rank's part of a benchmark run, said once for the in-process run (runLocal, one thread
// per rank) and the worker process (one rank): its buffers, its input and expected output,
// the warm-up and timed iterations, and the check of its result. The caller brings the
// schedule, the backend and the transport, and decides what happens between iterations (the
// in-process run waits at a barrier, the worker reports each timed iteration).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "exec/executor.h"
#include "exec/telemetry.h"
#include "schedule/schedule.h"
#include "transport/transport.h"

namespace arl {

struct RankRunOptions {
  // For the timed iterations; warm-up iterations run with telemetry Off (telemetry describes
  // the timed iterations only).
  ExecOptions exec;
  bool inPlace = false;
  uint32_t warmup = 0;
  uint32_t iterations = 1;
  // The iterations whose output is checked (#wrong), as nccl-tests' -c N: 0 none; 1 the last
  // timed one; N that one and N - 1 more run after it, untimed and unrecorded, each into an
  // output poisoned first, so that an iteration whose result a race corrupted, or that left
  // part of it unwritten, is not hidden by one that wrote it right. Every rank runs them,
  // checked or not (the collective needs them all).
  uint32_t check = 1;
  // The largest difference from an expected element that the check accepts (countWrongWithin):
  // 0, identical bits, for the lab's own arithmetic; a library whose arithmetic legitimately
  // differs says its own (CollectiveLibrary::tolerance).
  double tolerance = 0;
  // When set: once it is true, the set-up (allocation, filling the input and the expected
  // output), run() and countWrong() stop within milliseconds with PeerError(rank, -1, -1,
  // "run aborted ..."). They look at it between pieces of a few milliseconds of work and
  // between iterations; an iteration in flight is ended by aborting the transport, which
  // whoever sets the flag does too. Must outlive the RankRun.
  const std::atomic<bool>* cancel = nullptr;
  // Records only every other timed iteration (the second, fourth, ...); the others run as the
  // warm-up does, with telemetry Off. For measuring what recording costs within one run,
  // where the machine's speed is the same for both kinds of iteration (docs/telemetry.md,
  // "Paired within a run"). Only when run() is given a sink.
  bool recordEveryOther = false;
  // Seeded random inputs (RunRequest::randomData) instead of checkable ones. They have no
  // expected output: `check` must be 0 with them (RunRequest::checkedIterations decides it;
  // the constructor refuses anything else).
  bool randomData = false;
};

// What the caller learns after each timed iteration.
struct TimedIteration {
  uint32_t index = 0;  // 0-based among the timed iterations
  int64_t ns = 0;      // this rank's time for the iteration, backend synchronised
  // #wrong of this rank's output (nccl-tests' "#wrong"), after the last timed iteration only
  // and only when checked: a check between iterations would delay this rank's next
  // iteration while its peers already wait for it, and land in their measured time. The
  // check's further iterations (RankRunOptions::check > 1) report theirs through
  // RankRunHooks::afterChecks.
  std::optional<uint64_t> wrong;
};

// Where an iteration of a RankRun lies. RankRunHooks::beforeIteration numbers them as they
// run: the warm-up ones, the timed ones, then the check's further ones (RankRunOptions::check).
struct IterationPlace {
  enum class Kind : uint8_t { Warmup, Timed, Checked };
  Kind kind = Kind::Warmup;
  // Warmup, Timed: 0-based among the iterations of its kind. Checked: k of
  // RankRunOptions::check, 2..check (the first iteration checked is the last timed one).
  uint32_t index = 0;
  bool operator==(const IterationPlace&) const = default;
};
IterationPlace iterationPlace(uint32_t it, uint32_t warmup, uint32_t iterations);

struct RankRunHooks {
  // Before iteration `it` (numbered as IterationPlace says), untimed. Returning false ends the
  // run early (the in-process run's barrier was aborted by a failing rank).
  std::function<bool(uint32_t it)> beforeIteration;
  std::function<void(const TimedIteration&)> afterTimed;
  // After the check's further iterations (RankRunOptions::check > 1), which run once
  // afterTimed has had the last timed iteration: their #wrong summed (0 where this rank's
  // output is not checked). Not called when one of them fails or the run ends early.
  std::function<void(uint64_t wrong)> afterChecks;
  // Before an output is checked (only when checks()).
  std::function<void()> beforeCheck;
};

class RankRun {
 public:
  // Allocates the rank's buffers on `backend` once for the run (page faults stay out of the
  // timing; in place, Input and Output share one allocation as NCCL's in-place calls do, see
  // inPlaceOffset()), fills the input, and the expected output when checking. `s` and
  // `backend` must outlive the RankRun. Throws ConfigError on bad options, PeerError when
  // cancelled (RankRunOptions::cancel).
  RankRun(const Schedule& s, int rank, Backend& backend, RankRunOptions opt);
  // Frees the buffers: close or abort the transport first, a send may still read them.
  ~RankRun();
  RankRun(const RankRun&) = delete;
  RankRun& operator=(const RankRun&) = delete;

  const RankBuffers& buffers() const { return bufs_; }
  // Whether a result check applies: check asked for, and the collective defines this rank's
  // output (not so for Reduce on a rank other than the root).
  bool checks() const { return expected_ != nullptr; }

  // Runs the warm-up, timed and the check's further iterations over `transport`, reporting
  // to `sink` (may be null). Returns false when beforeIteration ended the run early. Throws
  // PeerError as Executor::run does; the caller aborts the transport then. Call once;
  // `transport` must stay open until after the RankRun is destroyed (a send may still read
  // its buffers).
  bool run(Transport& transport, TelemetrySink* sink, const RankRunHooks& hooks);
  // The same iterations, each one a single call of `collective` on the buffers (a library's
  // whole collective, exec/collective_library.h) instead of the schedule's ops. Throws what
  // `collective` throws.
  bool run(const std::function<void(const RankBuffers&)>& collective, const RankRunHooks& hooks);

  // #wrong of the rank's Output now (0 when !checks()), read back piece by piece.
  uint64_t countWrong() const;
  // FNV-1a 64 of the rank's Output now, read back piece by piece; with `sample`, also the
  // bytes of k = sampleBytes / element size elements spread evenly over it (element
  // j * outputElems / k for j = 0 .. k-1; all of them when fewer).
  uint64_t outputDigest(std::string* sample = nullptr, size_t sampleBytes = 64) const;
  // A host copy of the rank's Output.
  std::vector<unsigned char> output() const;

 private:
  void* allocate(size_t bytes);
  void allocateBuffers();
  void fillInput();
  void fillExpected();
  // Throws PeerError naming `where` ("while filling the input") when the run is cancelled.
  void throwIfCancelled(const char* where) const;
  // The warm-up, timed and the check's further iterations, each done by
  // `one(iteration, timed)`.
  bool iterate(const std::function<void(uint32_t, bool)>& one, const RankRunHooks& hooks);
  // One collective, `one(it, timed)` and the backend synchronised, inside a flight record
  // (ExecOptions::flight) when there is a recorder: this rank's time for it, in ns.
  int64_t runCollective(const std::function<void(uint32_t, bool)>& one, uint32_t it, bool timed);
  // The check's iterations after the timed ones (RankRunOptions::check - 1 of them), numbered
  // from `first`: their #wrong summed (0 where this rank's output is not checked), nullopt
  // when beforeIteration ended the run.
  std::optional<uint64_t> checkMore(const std::function<void(uint32_t, bool)>& one,
                                    const RankRunHooks& hooks, uint32_t first);
  // Fills the output with a pattern no check accepts (all bits set: NaN for floating types),
  // then restores the input when it lies inside the output (in place).
  void poisonOutput();

  const Schedule& s_;
  int rank_;
  Backend& backend_;
  RankRunOptions opt_;
  size_t inBytes_;
  size_t outBytes_;
  std::vector<void*> owned_;
  RankBuffers bufs_;
  // The input as filled, kept for restoring it between iterations in place (else empty).
  std::unique_ptr<unsigned char[]> hostInput_;
  // The expected Output, outBytes_ of it; null when there is nothing to check.
  std::unique_ptr<unsigned char[]> expected_;
  // Declared last, destroyed first: they may hold backend temporaries.
  std::unique_ptr<Executor> warm_;
  std::unique_ptr<Executor> timed_;
};

}  // namespace arl
