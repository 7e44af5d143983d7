// Test-only fault injection for the worker: what an integration test sets in a worker's
// environment to make it fail on purpose (docs/runtime.md, "Test-only fault injection").
// The worker session reads it once (worker_session.cpp) and hands the run's part to each run
// job (RunJob::faults), so a test in process injects the same faults without an environment.
// Never set outside tests; each fault says so on the worker's stderr when it acts.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "runtime/protocol.h"
#include "transport/forwarding_transport.h"
#include "transport/transport.h"

namespace arl {

// ARL_TEST_CORRUPT_HEADER="RANK:FIELD" makes rank RANK corrupt FIELD (one of
// kCorruptibleFields) of the first data-plane header it sends in every run.
inline constexpr const char* kCorruptHeaderEnv = "ARL_TEST_CORRUPT_HEADER";
// ARL_TEST_LOSE_CONTROL="Start,RunDone" makes the worker drop the first control message of
// each named type that it receives (RunConfig, Start, Abort) or sends (Ready,
// IterationResult, RunDone, RunFailed), as a connection reset loses them.
inline constexpr const char* kLoseControlEnv = "ARL_TEST_LOSE_CONTROL";
// ARL_TEST_STALL="RANK:STEP" makes rank RANK stop, heartbeats flowing, before its first op of
// step STEP in the first run it takes part in, until that run is aborted.
inline constexpr const char* kStallEnv = "ARL_TEST_STALL";

// The ChunkHeader fields ARL_TEST_CORRUPT_HEADER accepts. Not magic nor src: the data planes
// fill those themselves (transport/transport.h), so a corrupted one would never leave. They
// fill length too: "length" is accepted, but what the receiver gets is the true length.
inline constexpr std::array<std::string_view, 8> kCorruptibleFields = {
    "signature", "epoch", "seq", "step", "chunk", "slice", "offset", "length"};

// Rank `rank` corrupts `field` (one of kCorruptibleFields) of its first header of a run.
struct HeaderCorruption {
  int rank = -1;
  std::string field;
};

// Rank `rank` stops before its first op of step `step` until the run is aborted.
struct StallAt {
  int rank = -1;
  uint32_t step = 0;
};

// The faults one run job is given (RunJob::faults); none by default.
struct RunFaults {
  std::optional<HeaderCorruption> corruption;
  std::optional<StallAt> stall;
};

// The control messages to lose: the first of each type in `types`.
struct ControlLosses {
  std::set<MsgType> types;
  // True, once per type and logged, for a message of a type still to be lost.
  bool lose(MsgType t);
};

// Read from the environment; a malformed value is logged and ignored (nullopt or no types).
std::optional<HeaderCorruption> corruptionFromEnv();
ControlLosses lossesFromEnv();
std::optional<StallAt> stallFromEnv();

// A Transport that alters one field of the first header it sends, then forwards everything
// unchanged: the receiver must report the mismatch instead of summing the payload.
class CorruptingTransport final : public ForwardingTransport {
 public:
  CorruptingTransport(Transport& inner, std::string field)
      : ForwardingTransport(inner), field_(std::move(field)) {}
  std::shared_ptr<SendCompletion> send(int peer, const ChunkHeader& h, const void* data,
                                       size_t bytes) override;

 private:
  std::string field_;
  bool done_ = false;
};

}  // namespace arl
