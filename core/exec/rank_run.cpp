#include "exec/rank_run.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/clock.h"
#include "base/errors.h"
#include "exec/check.h"
#include "exec/flight_recorder.h"

namespace arl {

namespace {

// Elements per piece of the set-up and the check: about a millisecond of work each (filling
// the input, copying and comparing the output), so that a cancelled run stops at once.
constexpr uint64_t kPieceElems = uint64_t{1} << 18;

// An expected element of a reduction combines one value per rank: smaller pieces.
uint64_t expectedPieceElems(const Schedule& s) {
  if (!collectiveReduces(s.collective)) return kPieceElems;
  return std::max<uint64_t>(kPieceElems / static_cast<uint64_t>(std::max(s.nranks, 1)), 1024);
}

}  // namespace

IterationPlace iterationPlace(uint32_t it, uint32_t warmup, uint32_t iterations) {
  using Kind = IterationPlace::Kind;
  if (it < warmup) return {Kind::Warmup, it};
  if (it - warmup < iterations) return {Kind::Timed, it - warmup};
  return {Kind::Checked, it - warmup - iterations + 2};
}

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
  if (opt_.randomData && opt_.check > 0) {
    throw ConfigError("random data has no expected result: check must be 0 (got " +
                      std::to_string(opt_.check) + ")");
  }
  if (RankProgress* p = opt_.exec.progress) p->setPhase(RunPhase::SettingUp);
  try {
    allocateBuffers();
    fillInput();
    if (opt_.check > 0) fillExpected();
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
  void* p = backend_.allocateUnlessCancelled(std::max<size_t>(bytes, 8), opt_.cancel);
  if (p == nullptr) {
    throwIfCancelled("while allocating its buffers");
    ARL_ENFORCE(false, "the backend gave no memory for " << bytes << " bytes");
  }
  owned_.push_back(p);
  return p;
}

void RankRun::allocateBuffers() {
  const size_t es = dtypeSize(opt_.exec.dtype);
  const size_t shift = inPlaceOffset(s_, rank_) * es;
  owned_.reserve(3);  // so that recording an allocation cannot fail
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

void RankRun::fillInput() {
  const size_t es = dtypeSize(opt_.exec.dtype);
  const uint64_t elems = s_.inputElems;
  // In place the input is kept whole, to restore it before each iteration; else it goes to
  // the backend through a staging piece.
  std::vector<unsigned char> staging;
  if (opt_.inPlace) {
    hostInput_ = std::make_unique_for_overwrite<unsigned char[]>(inBytes_);
  } else {
    staging.resize(std::min(elems, kPieceElems) * es);
  }
  auto* dst = static_cast<unsigned char*>(bufs_.input);
  for (uint64_t first = 0; first < elems; first += kPieceElems) {
    throwIfCancelled("while filling its input");
    const uint64_t n = std::min(kPieceElems, elems - first);
    unsigned char* host = hostInput_ ? hostInput_.get() + first * es : staging.data();
    if (rank_ >= resultRanks(s_)) {
      std::memset(host, 0, n * es);  // no contribution (Schedule::nonResultRanks): never read
    } else if (opt_.randomData) {
      fillRandomInputRange(host, opt_.exec.dtype, rank_, first, n);
    } else {
      fillInputRange(host, s_.collective, opt_.exec.dtype, opt_.exec.op, rank_, resultRanks(s_),
                     s_.count, first, n);
    }
    backend_.upload(dst + first * es, host, n * es);
  }
}

void RankRun::fillExpected() {
  const size_t es = dtypeSize(opt_.exec.dtype);
  const uint64_t elems = s_.outputElems;
  if (elems == 0 || rank_ >= resultRanks(s_)) return;  // no result to hold
  // Uninitialised: the pages are touched (and faulted in) piece by piece as they are filled.
  auto expected = std::make_unique_for_overwrite<unsigned char[]>(outBytes_);
  const uint64_t piece = expectedPieceElems(s_);
  for (uint64_t first = 0; first < elems; first += piece) {
    throwIfCancelled("while computing its expected output");
    const uint64_t n = std::min(piece, elems - first);
    if (!fillExpectedRange(expected.get() + first * es, s_.collective, opt_.exec.dtype,
                           opt_.exec.op, rank_, resultRanks(s_), s_.count, s_.root, first, n)) {
      return;  // the collective leaves this rank's output undefined
    }
  }
  expected_ = std::move(expected);
}

void RankRun::throwIfCancelled(const char* where) const {
  if (opt_.cancel != nullptr && opt_.cancel->load(std::memory_order_relaxed)) {
    throw PeerError(rank_, -1, -1, std::string("run aborted ") + where);
  }
}

bool RankRun::run(Transport& transport, TelemetrySink* sink, const RankRunHooks& hooks) {
  ExecOptions warmOpt = opt_.exec;
  warmOpt.telemetry = TelemetryLevel::Off;
  warm_ = std::make_unique<Executor>(s_, rank_, transport, backend_, nullptr, warmOpt);
  timed_ = std::make_unique<Executor>(s_, rank_, transport, backend_, sink, opt_.exec);
  const bool everyOther = opt_.recordEveryOther && sink != nullptr;
  return iterate(
      [&](uint32_t it, bool timed) {
        const uint32_t index = timed ? it - opt_.warmup : it;
        if (timed && !(everyOther && index % 2 == 0)) {
          timed_->run(bufs_, index, it);
        } else {
          warm_->run(bufs_, index, it);
        }
      },
      hooks);
}

bool RankRun::run(const std::function<void(const RankBuffers&)>& collective,
                  const RankRunHooks& hooks) {
  return iterate(
      [&](uint32_t, bool) {
        collective(bufs_);
        if (RankProgress* p = opt_.exec.progress) p->tick();
      },
      hooks);
}

int64_t RankRun::runCollective(const std::function<void(uint32_t, bool)>& one, uint32_t it,
                               bool timed) {
  FlightRecorder* flight = opt_.exec.flight;
  // The record's times are on the telemetry's clock (the coordinator's, in a worker).
  const auto now = [&] { return opt_.exec.clock ? opt_.exec.clock() : steadyNowNs(); };
  if (flight != nullptr) flight->begin(iterationPlace(it, opt_.warmup, opt_.iterations), now());
  const int64_t t0 = steadyNowNs();
  try {
    one(it, timed);
    backend_.synchronize();
  } catch (...) {
    if (flight != nullptr) {
      const bool cancelled = opt_.cancel != nullptr && opt_.cancel->load();
      flight->end(cancelled ? CollectiveState::Aborted : CollectiveState::Failed, now());
    }
    throw;
  }
  const int64_t t1 = steadyNowNs();
  if (flight != nullptr) flight->end(CollectiveState::Completed, now());
  return t1 - t0;
}

bool RankRun::iterate(const std::function<void(uint32_t, bool)>& one, const RankRunHooks& hooks) {
  const uint32_t total = opt_.warmup + opt_.iterations;
  for (uint32_t it = 0; it < total; ++it) {
    throwIfCancelled("between iterations");
    // In place, the previous iteration overwrote the input: restore it, untimed.
    if (opt_.inPlace && it > 0) backend_.upload(bufs_.input, hostInput_.get(), inBytes_);
    if (hooks.beforeIteration && !hooks.beforeIteration(it)) return false;
    if (RankProgress* p = opt_.exec.progress) {
      p->setIteration(iterationPlace(it, opt_.warmup, opt_.iterations).index);
      p->setPhase(RunPhase::Iterating);
    }
    const bool isTimed = it >= opt_.warmup;
    const int64_t ns = runCollective(one, it, isTimed);
    if (!isTimed) continue;
    TimedIteration r;
    r.index = it - opt_.warmup;
    r.ns = std::max<int64_t>(ns, 0);
    if (checks() && it + 1 == total) {
      if (RankProgress* p = opt_.exec.progress) p->setPhase(RunPhase::Checking);
      if (hooks.beforeCheck) hooks.beforeCheck();
      r.wrong = countWrong();
    }
    if (hooks.afterTimed) hooks.afterTimed(r);
  }
  // After the last timed result went out, so that it waits for none of these iterations and
  // a failure in one of them loses none of the timed results.
  if (opt_.check <= 1) return true;
  const std::optional<uint64_t> more = checkMore(one, hooks, total);
  if (!more) return false;
  if (hooks.afterChecks) hooks.afterChecks(*more);
  return true;
}

std::optional<uint64_t> RankRun::checkMore(const std::function<void(uint32_t, bool)>& one,
                                           const RankRunHooks& hooks, uint32_t first) {
  uint64_t wrong = 0;
  for (uint32_t it = first; it < first + opt_.check - 1; ++it) {
    throwIfCancelled("between checked iterations");
    poisonOutput();
    if (hooks.beforeIteration && !hooks.beforeIteration(it)) return std::nullopt;
    if (RankProgress* p = opt_.exec.progress) {
      p->setCheckIteration(iterationPlace(it, opt_.warmup, opt_.iterations).index, opt_.check);
      p->setPhase(RunPhase::Iterating);
    }
    (void)runCollective(one, it, false);
    if (!checks()) continue;
    if (RankProgress* p = opt_.exec.progress) p->setPhase(RunPhase::Checking);
    if (hooks.beforeCheck) hooks.beforeCheck();
    wrong += countWrong();
  }
  return wrong;
}

void RankRun::poisonOutput() {
  const std::vector<unsigned char> ones(std::min<uint64_t>(outBytes_, kPieceElems * 8), 0xff);
  auto* out = static_cast<unsigned char*>(bufs_.output);
  for (uint64_t off = 0; off < outBytes_; off += ones.size()) {
    throwIfCancelled("while poisoning its output");
    backend_.upload(out + off, ones.data(), std::min<uint64_t>(ones.size(), outBytes_ - off));
  }
  if (opt_.inPlace) backend_.upload(bufs_.input, hostInput_.get(), inBytes_);
}

uint64_t RankRun::countWrong() const {
  if (!checks()) return 0;
  const size_t es = dtypeSize(opt_.exec.dtype);
  const uint64_t elems = s_.outputElems;
  std::vector<unsigned char> got(std::min(elems, kPieceElems) * es);
  const auto* src = static_cast<const unsigned char*>(bufs_.output);
  uint64_t wrong = 0;
  for (uint64_t first = 0; first < elems; first += kPieceElems) {
    throwIfCancelled("while checking its output");
    const uint64_t n = std::min(kPieceElems, elems - first);
    backend_.download(got.data(), src + first * es, n * es);
    wrong += countWrongWithin(got.data(), expected_.get() + first * es, opt_.exec.dtype, n,
                              opt_.tolerance);
  }
  return wrong;
}

uint64_t RankRun::outputDigest(std::string* sample, size_t sampleBytes) const {
  const size_t es = dtypeSize(opt_.exec.dtype);
  const uint64_t elems = s_.outputElems;
  std::vector<unsigned char> got(std::min(elems, kPieceElems) * es);
  const auto* src = static_cast<const unsigned char*>(bufs_.output);
  const uint64_t k = std::min<uint64_t>(sampleBytes / es, elems);
  if (sample != nullptr) sample->clear();
  uint64_t h = kFnv64Offset;
  uint64_t next = 0;  // the next sampled element: elements j * elems / k, j = 0 .. k-1
  for (uint64_t first = 0; first < elems; first += kPieceElems) {
    throwIfCancelled("while reading its output");
    const uint64_t n = std::min(kPieceElems, elems - first);
    backend_.download(got.data(), src + first * es, n * es);
    h = fnv1a64(h, got.data(), n * es);
    for (; sample != nullptr && next < k && next * elems / k < first + n; ++next) {
      const uint64_t at = next * elems / k - first;
      sample->append(reinterpret_cast<const char*>(got.data() + at * es), es);
    }
  }
  return h;
}

std::vector<unsigned char> RankRun::output() const {
  std::vector<unsigned char> out(outBytes_);
  backend_.download(out.data(), bufs_.output, outBytes_);
  return out;
}

}  // namespace arl
