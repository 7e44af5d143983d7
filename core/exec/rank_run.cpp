#include "exec/rank_run.h"

#include <algorithm>
#include <string>

#include "base/clock.h"
#include "base/errors.h"
#include "exec/check.h"

namespace arl {

RankRun::RankRun(const Schedule& s, int rank, Backend& backend, RankRunOptions opt)
    : s_(s),
      rank_(rank),
      backend_(backend),
      opt_(std::move(opt)),
      inBytes_(s.inputElems * dtypeSize(opt_.exec.dtype)),
      outBytes_(s.outputElems * dtypeSize(opt_.exec.dtype)) {
  if (rank < 0 || rank >= s.nranks) {
    throw ConfigError("rank " + std::to_string(rank) + " is not a rank of a schedule of " +
                      std::to_string(s.nranks));
  }
  if (opt_.iterations < 1) throw ConfigError("iterations must be at least 1 (got 0)");
  if (RankProgress* p = opt_.exec.progress) p->setPhase(RunPhase::SettingUp);
  try {
    allocateBuffers();
    const int n = s.nranks;
    hostInput_.resize(inBytes_);
    fillInput(hostInput_.data(), s.collective, opt_.exec.dtype, opt_.exec.op, rank, n, s.count);
    backend_.upload(bufs_.input, hostInput_.data(), inBytes_);
    if (opt_.check) {
      expected_.resize(outBytes_);
      if (!fillExpected(expected_.data(), s.collective, opt_.exec.dtype, opt_.exec.op, rank, n,
                        s.count, s.root)) {
        expected_.clear();
      }
    }
  } catch (...) {
    for (void* p : owned_) backend_.deallocate(p);
    throw;
  }
}

RankRun::~RankRun() {
  timed_.reset();
  warm_.reset();
  for (void* p : owned_) backend_.deallocate(p);
}

void* RankRun::allocate(size_t bytes) {
  // Never zero bytes: every buffer gets an address, even for an empty collective.
  void* p = backend_.allocate(std::max<size_t>(bytes, 8));
  owned_.push_back(p);
  return p;
}

void RankRun::allocateBuffers() {
  const size_t es = dtypeSize(opt_.exec.dtype);
  const size_t shift = inPlaceOffset(s_, rank_) * es;
  if (!opt_.inPlace) {
    bufs_.input = allocate(inBytes_);
    bufs_.output = allocate(outBytes_);
  } else if (s_.collective == Collective::ReduceScatter) {
    // Output is a window of Input.
    bufs_.input = allocate(inBytes_);
    bufs_.output = static_cast<unsigned char*>(bufs_.input) + shift;
  } else {
    // Input is a window of Output (all-gather) or the whole of it.
    bufs_.output = allocate(outBytes_);
    bufs_.input = static_cast<unsigned char*>(bufs_.output) + shift;
  }
  if (s_.scratchElems > 0) bufs_.scratch = allocate(s_.scratchElems * es);
}

bool RankRun::run(Transport& transport, TelemetrySink* sink, const RankRunHooks& hooks) {
  ExecOptions warmOpt = opt_.exec;
  warmOpt.telemetry = TelemetryLevel::Off;
  warm_ = std::make_unique<Executor>(s_, rank_, transport, backend_, nullptr, warmOpt);
  timed_ = std::make_unique<Executor>(s_, rank_, transport, backend_, sink, opt_.exec);
  const uint32_t total = opt_.warmup + opt_.iterations;
  for (uint32_t it = 0; it < total; ++it) {
    // In place, the previous iteration overwrote the input: restore it, untimed.
    if (opt_.inPlace && it > 0) backend_.upload(bufs_.input, hostInput_.data(), inBytes_);
    if (hooks.beforeIteration && !hooks.beforeIteration(it)) return false;
    if (RankProgress* p = opt_.exec.progress) {
      p->setIteration(it);
      p->setPhase(RunPhase::Iterating);
    }
    const bool isTimed = it >= opt_.warmup;
    const int64_t t0 = steadyNowNs();
    if (isTimed) {
      timed_->run(bufs_, it - opt_.warmup, it);
    } else {
      warm_->run(bufs_, it, it);
    }
    backend_.synchronize();
    const int64_t t1 = steadyNowNs();
    if (!isTimed) continue;
    TimedIteration r;
    r.index = it - opt_.warmup;
    r.ns = std::max<int64_t>(t1 - t0, 0);
    if (checks() && it + 1 == total) {
      if (RankProgress* p = opt_.exec.progress) p->setPhase(RunPhase::Checking);
      r.wrong = countWrong();
    }
    if (hooks.afterTimed) hooks.afterTimed(r);
  }
  return true;
}

uint64_t RankRun::countWrong() const {
  if (!checks()) return 0;
  const std::vector<unsigned char> got = output();
  return arl::countWrong(got.data(), expected_.data(), opt_.exec.dtype, s_.outputElems);
}

std::vector<unsigned char> RankRun::output() const {
  std::vector<unsigned char> out(outBytes_);
  backend_.download(out.data(), bufs_.output, outBytes_);
  return out;
}

}  // namespace arl
