#include "exec/progress.h"

#include <pthread.h>
#include <time.h>

#include <cstdio>

namespace arl {

const char* toString(RunPhase p) {
  switch (p) {
    case RunPhase::Idle: return "idle";
    case RunPhase::SettingUp: return "setting up";
    case RunPhase::AwaitingStart: return "waiting for Start";
    case RunPhase::Iterating: return "iterating";
    case RunPhase::Checking: return "checking its result";
    case RunPhase::Closing: return "closing its data plane";
    case RunPhase::Reported: return "done";
  }
  return "?";
}

ProgressSnapshot RankProgress::snapshot() const noexcept {
  ProgressSnapshot s;
  s.ticks = ticks_.load(kRelaxed);
  const uint8_t phase = phase_.load(kRelaxed);
  s.phase = phase <= kMaxRunPhase ? static_cast<RunPhase>(phase) : RunPhase::Idle;
  const uint8_t wait = wait_.load(kRelaxed);
  s.wait = wait <= kMaxWaitKind ? static_cast<WaitKind>(wait) : WaitKind::None;
  s.peer = peer_.load(kRelaxed);
  s.step = step_.load(kRelaxed);
  s.iteration = iteration_.load(kRelaxed);
  s.checkIteration = checkIteration_.load(kRelaxed);
  s.checkIterations = checkIterations_.load(kRelaxed);
  return s;
}

std::string iterationText(uint32_t iteration, uint32_t checkIteration, uint32_t checkIterations) {
  if (checkIteration == 0) return "iteration " + std::to_string(iteration);
  std::string t = "checking iteration " + std::to_string(checkIteration);
  if (checkIterations > 0) t += " of " + std::to_string(checkIterations);
  return t;
}

std::string describe(const ProgressSnapshot& s) {
  if (s.phase != RunPhase::Iterating) return std::string("is ") + toString(s.phase);
  const std::string it = iterationText(s.iteration, s.checkIteration, s.checkIterations);
  const std::string where = " for step " + std::to_string(s.step) + " (" + it + ")";
  switch (s.wait) {
    case WaitKind::Data: return "waits for data from rank " + std::to_string(s.peer) + where;
    case WaitKind::Room:
      return "waits for rank " + std::to_string(s.peer) + " to take its data" + where;
    case WaitKind::None: break;
  }
  return "is working (" + it + ")";
}

uint64_t threadCpuMillis(std::thread& t) {
  if (!t.joinable()) return 0;
  clockid_t id{};
  timespec ts{};
  if (::pthread_getcpuclockid(t.native_handle(), &id) != 0 || ::clock_gettime(id, &ts) != 0) {
    return 0;
  }
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1'000'000;
}

uint64_t progressCount(const ProgressSnapshot& s, std::thread& t) {
  const bool busyAlone = s.phase == RunPhase::SettingUp || s.phase == RunPhase::Checking;
  return s.ticks + (busyAlone ? threadCpuMillis(t) : 0);
}

std::string stallHeadline(SteadyClock::duration quiet, std::chrono::milliseconds timeout) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "no rank made progress for %.1f s (stall timeout %.1f s)",
                std::chrono::duration<double>(quiet).count(),
                std::chrono::duration<double>(timeout).count());
  return buf;
}

}  // namespace arl
