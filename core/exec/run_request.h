// One collective run as a user asks for it, and the one place that checks and resolves it.
// `allreduce-lab plan --run` (in process), `bench` and the window (through the coordinator)
// all go through resolveRunRequest, so they accept and refuse exactly the same requests.
//
// Terms: a *chunk* is a piece of the buffer that a schedule step moves (the `chunk` of
// schedules and telemetry); a *slice* is the pipeline unit, the most bytes one message
// carries (`sliceBytes`, `--slice`). A chunk larger than a slice travels as several slices.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"
#include "base/shaping.h"
#include "base/types.h"
#include "exec/local_run.h"
#include "exec/telemetry.h"
#include "schedule/generators.h"
#include "train/train_types.h"
#include "transport/transport.h"

namespace arl {

struct RunRequest {
  std::string algorithm = "ring";
  Collective collective = Collective::AllReduce;
  DataType dtype = DataType::Float;
  RedOp op = RedOp::Sum;
  uint64_t count = 0;                       // NCCL API count
  uint64_t sliceBytes = uint64_t{1} << 20;  // pipeline slice size, a whole number of elements
  int root = 0;
  int ranksPerHost = 0;        // 0 = group by the ranks' real host names
  std::vector<int> ringOrder;  // the ring as a permutation of 0..n-1; empty = 0, 1, ..., n-1
  // knomial's k, 2..n (2 = binomial); 0 = kDefaultRadix, or n when there are fewer ranks (a
  // radix of n or more draws the same one-round tree). Other algorithms ignore it.
  int radix = 0;
  std::vector<int> torusDims;  // the torus the ranks lie on (GenParams::torusDims); empty: none
  int inflight = 4;            // slices a rank may have in flight
  // ring's window: slices taken step by step together (GenParams::window), 1..kMaxInflight.
  // Other algorithms ignore it (slicesWindowOf).
  int window = 1;
  bool inPlace = false;
  int warmup = 1;
  int iterations = 5;
  // Iterations whose output is checked (nccl-tests' -c): 0 none, 1 the last timed one, N that
  // one and N - 1 more after it (RankRunOptions::check).
  uint32_t check = 1;
  TelemetryLevel telemetry = TelemetryLevel::Chunks;
  uint64_t maxEvents = 1'000'000;  // telemetry events kept per run (all ranks together)
  // The run fails when no rank makes progress for this long (exec/progress.h): the one
  // deadline of a run. A rank waiting while others work is progress elsewhere, not a failure.
  std::chrono::milliseconds stallTimeout{20000};
  DataPlaneKind dataPlane = DataPlaneKind::Auto;
  // CUDA IPC between workers of one host whose backends share device memory
  // (transport/peer_transport.h); false stages every pair through the data plane.
  bool cudaIpc = true;
  // The network the data planes pace the run to (base/shaping.h); empty = the machine's own.
  LinkShaping shaping;
  // A teaching aid (bench --mismatch-rank): rank `mismatchRank` is told to run the collective on
  // twice the count, as a rank that disagrees with the others about the message would. The
  // data plane's header check must catch it at the first message and fail the run naming the
  // ranks, instead of hanging or summing wrongly. -1: every rank runs the same.
  int mismatchRank = -1;
  // A teaching aid (bench --data random): seeded random floats as inputs, whose sums depend on
  // the order in which an algorithm adds them, instead of the checkable integers of
  // exec/check.h. Such a result cannot be checked (checkedIterations() is 0); every rank
  // reports a digest of its output instead (RunResult::outputDigests), which shows whether the
  // ranks of a run hold the same bits and whether two algorithms do.
  bool randomData = false;
  // A data-parallel training run (core/train/train_types.h; allreduce-lab train): the ranks
  // train the model for train->steps steps, their gradient buckets reduced by `algorithm` in
  // slices of `sliceBytes`; count, warm-up, iterations and check are set from it when the
  // run is planned.
  std::optional<TrainConfig> train;
  // An MSCCL algorithm file's text (schedule/msccl_import.h), whose schedule the ranks run
  // instead of a generator's; `algorithm` is then its name, "msccl:NAME". The text, not the
  // schedule, travels to the workers: it is small where the schedule grows with the count,
  // and every worker derives the same schedule from it. Empty: the generator of `algorithm`.
  std::string scheduleXml;

  // The iterations whose output is checked: `check`, and none with random data, which has no
  // expected result. The one place that decides it: the ranks' RunConfig, the in-process run,
  // the exports and bench's table all take it from here.
  uint32_t checkedIterations() const { return randomData ? 0 : check; }

  bool operator==(const RunRequest&) const = default;
};

// The field of a RunRequest (or the world it runs on) that a refusal is about, so that each
// client names its own control for it: a flag on the command line, a field in the window.
enum class RunField {
  Ranks,
  Algorithm,
  Collective,
  Count,
  SliceBytes,
  Root,
  RanksPerHost,
  RingOrder,
  Inflight,
  Warmup,
  Iterations,
  StallTimeout,
  // The network's shaping, one field per part of it (base/shaping.h's ShapingPart).
  PortRate,
  AddedLatency,
  SlowRank,
  SlowLink,
  MismatchRank,
  Radix,
  Window,
};

// How a refusal speaks of `f` when no client names it: "slices in flight", "ring order", ...
std::string_view describe(RunField f);

// The field of a part of the shaping.
RunField runFieldOf(ShapingPart p);

// A refused request. what() reads "<describe(field)> <value>: <rule>", e.g.
// "slices in flight 2000: must be in 1..1024"; a client may show `value` and `rule` after
// its own name for the field instead.
struct RunRequestError : ConfigError {
  RunRequestError(RunField f, std::string v, std::string r);
  RunField field;
  std::string value;  // the refused value, as text
  std::string rule;   // what is wrong with it, with the accepted range
};

// Upper bound on the pipeline slices of one collective, all ranks together: each becomes ops
// that every client holds in memory (the schedule, the plan's table, telemetry).
inline constexpr uint64_t kMaxSlicesPerRun = uint64_t{4} << 20;

// What a request becomes on a given world of ranks: the values the ranks run with.
struct ResolvedRun {
  int nranks = 0;              // the collective's ranks: the workers less helperWorkers()
  int ranksPerHost = 0;        // resolved: never 0
  std::vector<int> ringOrder;  // resolved: always nranks entries
  int radix = 0;               // resolved: 2..max(n, 2)
  uint64_t sliceElems = 0;
  uint32_t steps = 0;  // the schedule's algorithm steps (Schedule::nsteps)
  // Per rank of the schedule: bytes it sends in one collective (the switch's after the ranks').
  std::vector<uint64_t> bytesSent;
};

// Checks `req` for workers whose hosts are `hosts` (in rank order; one entry per worker: the
// collective's ranks, then the helpers an algorithm takes, helperWorkers()) and resolves it;
// generates the schedule once, since the generator is the authority on what it accepts, and hands
// it over through `schedule` when not null. Throws RunRequestError naming the offending field and
// the accepted range (ConfigError for what the generator alone refuses).
ResolvedRun resolveRunRequest(const RunRequest& req, const std::vector<std::string>& hosts,
                              Schedule* schedule = nullptr);

// knomial's radix when none is asked for.
inline constexpr int kDefaultRadix = 4;

// The radix a run uses: `requested` when positive, else kDefaultRadix capped at max(n, 2).
int resolveRadix(int requested, int nranks);

// Ranks per host: `requested` when positive, else derived from the ranks' host names (in
// rank order): the ranks of one host when every host has as many, all ranks otherwise.
int ranksPerHost(int requested, const std::vector<std::string>& hosts);

// The generator parameters of a resolved request.
GenParams genParams(const RunRequest& req, const ResolvedRun& run);

// The in-process form of a request (exec/local_run.h, `plan --run`): its element type,
// reduction, buffers, iterations, slices in flight, check, telemetry level, network and stall
// timeout. The fields that only workers read (maxEvents, dataPlane, cudaIpc) have no part in it.
LocalRunOptions localRunOptions(const RunRequest& req);

}  // namespace arl
