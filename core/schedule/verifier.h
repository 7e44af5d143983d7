// Symbolic execution of a schedule. Every element of every buffer carries the set of ranks
// whose contributions it holds (a 64-bit mask) and the input index those contributions came
// from. The verifier proves the collective's postcondition and the absence of deadlock and of
// reads of unwritten memory.
#pragma once

#include <string>

#include "schedule/schedule.h"

namespace arl {

struct VerifyOptions {
  // Messages a channel (one ordered sender->receiver pair) may hold before a send blocks.
  // Kahn-network monotonicity: a schedule free of deadlock at capacity c is free of deadlock
  // at any larger capacity. 0: the schedule's own, Schedule::window (1 for every schedule but
  // a windowed ring), the strongest check its data planes are held to.
  int channelCapacity = 0;
  bool checkInPlace = true;  // also verify with Input aliased into Output (NCCL in-place)
};

struct VerifyResult {
  bool ok = false;
  std::string message;  // empty when ok; otherwise names the rank, the op index and the step
};

VerifyResult verify(const Schedule& s, const VerifyOptions& opt = {});

// Runs the symbolic execution and stores in every op the provenance mask of the payload it
// sends or receives. Returns the same verdict as verify(). Supports up to 64 ranks.
VerifyResult annotate(Schedule& s, const VerifyOptions& opt = {});

}  // namespace arl
