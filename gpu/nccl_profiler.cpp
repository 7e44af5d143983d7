#include "gpu/nccl_profiler.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>
#include <vector>

#include "base/clock.h"

namespace arl::gpu {

namespace {

namespace p = ncclprof;

// ---- The queue: many producers (NCCL's threads), one consumer (the run thread) --------------

// Each cell's sequence number says whose turn it is: a producer may fill cell i when it reads
// the position it claims, the consumer may take it when it reads position + 1 (Vyukov's
// bounded queue). A full queue drops instead of waiting.
class EventQueue {
 public:
  EventQueue() : cells_(std::make_unique<Cell[]>(kNcclProfilerQueueEvents)) { reset(); }

  // No producer or consumer may be running. Writes every cell, so that the callbacks never
  // take a page fault on this memory.
  void reset() {
    for (size_t i = 0; i < kNcclProfilerQueueEvents; ++i) {
      cells_[i].seq.store(i, std::memory_order_relaxed);
      cells_[i].event = NcclRawEvent{};
    }
    enqueue_.store(0, std::memory_order_relaxed);
    dequeue_ = 0;
    queued_.store(0, std::memory_order_relaxed);
    dropped_.store(0, std::memory_order_relaxed);
  }

  void push(const NcclRawEvent& e) noexcept {
    uint64_t pos = enqueue_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & kMask];
      const uint64_t seq = c.seq.load(std::memory_order_acquire);
      const auto diff = static_cast<int64_t>(seq - pos);
      if (diff == 0) {
        if (enqueue_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else if (diff < 0) {
        dropped_.fetch_add(1, std::memory_order_relaxed);  // full: the consumer is a lap behind
        return;
      } else {
        pos = enqueue_.load(std::memory_order_relaxed);  // another producer took it
      }
    }
    Cell& c = cells_[pos & kMask];
    c.event = e;
    c.seq.store(pos + 1, std::memory_order_release);
    queued_.fetch_add(1, std::memory_order_relaxed);
  }

  // Consumer only: stops at the first cell not yet published.
  size_t drain(const std::function<void(const NcclRawEvent&)>& f) {
    size_t n = 0;
    for (;;) {
      Cell& c = cells_[dequeue_ & kMask];
      if (c.seq.load(std::memory_order_acquire) != dequeue_ + 1) return n;
      const NcclRawEvent e = c.event;
      c.seq.store(dequeue_ + kNcclProfilerQueueEvents, std::memory_order_release);
      ++dequeue_;
      ++n;
      f(e);
    }
  }

  uint64_t queued() const { return queued_.load(std::memory_order_relaxed); }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  static constexpr uint64_t kMask = kNcclProfilerQueueEvents - 1;
  static_assert((kNcclProfilerQueueEvents & kMask) == 0, "a power of two");
  struct Cell {
    std::atomic<uint64_t> seq{0};
    NcclRawEvent event;
  };
  std::unique_ptr<Cell[]> cells_;
  alignas(64) std::atomic<uint64_t> enqueue_{0};
  alignas(64) uint64_t dequeue_ = 0;
  std::atomic<uint64_t> queued_{0};
  std::atomic<uint64_t> dropped_{0};
};

// ---- Process-wide state ----------------------------------------------------------------------

struct Globals {
  EventQueue queue;
  std::atomic<uint64_t> call{kNoNcclCall};
  std::atomic<uint64_t> runElementBytes{0};
  std::atomic<uint64_t> noHandle{0};
  std::atomic<uint64_t> ignored{0};
  std::atomic<uint64_t> inits{0};
  std::atomic<int> nNodes{0};
  std::atomic<int> mask{0};
};

// Made on first use (beginRun, or NCCL's first init), never destroyed: NCCL may call a
// finalize from its own exit path after the program's statics are gone.
Globals& globals() {
  static Globals* g = new Globals();  // NOLINT(cppcoreguidelines-owning-memory): see above
  return *g;
}

// ---- Event handles ---------------------------------------------------------------------------

// Every handle starts with the NCCL event type it was made for, so that stop and record can
// tell them apart.
struct CollHandle {
  uint64_t type = p::kColl;
  std::atomic<uint64_t> call{kNoNcclCall};
};

struct GroupHandle {
  uint64_t type = p::kGroup;
  uint64_t call = kNoNcclCall;
  int64_t startNs = 0;
};

class HandlePool;

// A proxy op, a proxy step or a kernel channel: started and stopped by NCCL's proxy thread.
struct Handle {
  uint64_t type = 0;
  HandlePool* pool = nullptr;  // where it goes back when stopped
  uint64_t call = kNoNcclCall;
  int32_t peer = -1;
  int32_t step = 0;
  uint8_t channel = 0;
  bool isSend = false;
  bool stopped = false;  // kernel channel: its end time arrived
  uint64_t bytes = 0;
  uint64_t endNs = 0;  // kernel channel: the end on the GPU's timer
};

// A fixed set of handles with a lock-free free list (a Treiber stack on indices, the top
// tagged with a counter against ABA).
class HandlePool {
 public:
  explicit HandlePool(size_t n) : handles_(n), next_(std::make_unique<std::atomic<uint32_t>[]>(n)) {
    for (size_t i = 0; i < n; ++i) {
      next_[i].store(i + 1 < n ? static_cast<uint32_t>(i + 2) : 0, std::memory_order_relaxed);
      handles_[i].pool = this;
    }
    top_.store(n > 0 ? 1 : 0, std::memory_order_relaxed);
  }

  // A handle reset to its defaults, or null when every one is in use.
  Handle* acquire() noexcept {
    uint64_t top = top_.load(std::memory_order_acquire);
    for (;;) {
      const auto index = static_cast<uint32_t>(top);
      if (index == 0) return nullptr;
      const uint32_t next = next_[index - 1].load(std::memory_order_relaxed);
      const uint64_t tag = (top >> 32) + 1;
      if (top_.compare_exchange_weak(top, tag << 32 | next, std::memory_order_acq_rel)) {
        Handle& h = handles_[index - 1];
        h = Handle{};
        h.pool = this;
        return &h;
      }
    }
  }

  void release(Handle* h) noexcept {
    const auto index = static_cast<uint32_t>(h - handles_.data()) + 1;
    uint64_t top = top_.load(std::memory_order_relaxed);
    for (;;) {
      next_[index - 1].store(static_cast<uint32_t>(top), std::memory_order_relaxed);
      const uint64_t tag = (top >> 32) + 1;
      if (top_.compare_exchange_weak(top, tag << 32 | index, std::memory_order_acq_rel)) return;
    }
  }

 private:
  std::vector<Handle> handles_;
  std::unique_ptr<std::atomic<uint32_t>[]> next_;  // free list: the next free index + 1
  std::atomic<uint64_t> top_{0};  // (tag << 32) | (index of the first free handle + 1)
};

// One communicator's handles, made by init and freed by finalize. A collective's or a
// group's handle is never freed while the communicator lives: NCCL stops a collective on the
// host right after launching it, and its proxy and kernel events start later and name it as
// their parent. The slots are reused round-robin instead; a child reads a reused slot only
// when kNcclProfilerCollSlots collectives were launched between its parent's start and its
// own, which the worker, waiting for each collective, never does.
struct Context {
  Context() : handles(kNcclProfilerHandles) {}
  pid_t pid = ::getpid();
  std::array<CollHandle, kNcclProfilerCollSlots> colls;
  std::array<GroupHandle, kNcclProfilerCollSlots> groups;
  std::atomic<uint64_t> nextColl{0};
  std::atomic<uint64_t> nextGroup{0};
  HandlePool handles;
};

// ---- Descriptors to events -------------------------------------------------------------------

// Bytes per element of NCCL's type names (ncclDatatypeToString, NCCL's src/collectives.cc);
// the run's own element size for a name NCCL does not give ("Unknown": ncclUint8 in 2.28).
// All-gather and broadcast come as ncclInt8, their count in bytes (NCCL's collTaskAppend).
uint64_t elementBytes(const char* name) {
  const uint64_t run = globals().runElementBytes.load(std::memory_order_relaxed);
  if (name == nullptr) return run;
  const std::string_view n(name);
  for (std::string_view s : {"ncclInt8", "ncclUint8", "ncclFloat8e4m3", "ncclFloat8e5m2"}) {
    if (n == s) return 1;
  }
  if (n == "ncclFloat16" || n == "ncclBfloat16") return 2;
  if (n == "ncclInt32" || n == "ncclUint32" || n == "ncclFloat32") return 4;
  if (n == "ncclInt64" || n == "ncclUint64" || n == "ncclFloat64") return 8;
  return run;
}

void startColl(Context& ctx, void** handle, const p::EventDescr& d) {
  CollHandle& h =
      ctx.colls[ctx.nextColl.fetch_add(1, std::memory_order_relaxed) % kNcclProfilerCollSlots];
  const uint64_t call = globals().call.load(std::memory_order_relaxed);
  h.call.store(call, std::memory_order_relaxed);
  NcclRawEvent e;
  e.kind = EventKind::NcclColl;
  e.call = call;
  e.info.algo = parseNcclAlgo(d.coll.algo != nullptr ? d.coll.algo : "");
  e.info.proto = parseNcclProto(d.coll.proto != nullptr ? d.coll.proto : "");
  e.info.nChannels = d.coll.nChannels;
  e.info.nWarps = d.coll.nWarps;
  e.count = d.coll.count;
  e.bytes = d.coll.count * elementBytes(d.coll.datatype);
  e.ns = steadyNowNs();
  globals().queue.push(e);
  *handle = &h;
}

void startGroup(Context& ctx, void** handle) {
  GroupHandle& h =
      ctx.groups[ctx.nextGroup.fetch_add(1, std::memory_order_relaxed) % kNcclProfilerCollSlots];
  h.call = globals().call.load(std::memory_order_relaxed);
  h.startNs = steadyNowNs();
  *handle = &h;
}

// The call of a proxy op's or kernel channel's parent collective (null: one this plugin did
// not start, a point-to-point operation).
uint64_t callOfColl(const void* parent) {
  if (parent == nullptr || *static_cast<const uint64_t*>(parent) != p::kColl) return kNoNcclCall;
  return static_cast<const CollHandle*>(parent)->call.load(std::memory_order_relaxed);
}

Handle* acquire(Context& ctx, uint64_t type) {
  Handle* h = ctx.handles.acquire();
  if (h == nullptr) {
    globals().noHandle.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  h->type = type;
  return h;
}

void startProxyOp(Context& ctx, void** handle, const p::EventDescr& d) {
  Handle* h = acquire(ctx, p::kProxyOp);
  if (h == nullptr) return;
  // A proxy op of another process (PXN) names a parent in that process's memory.
  h->call = d.proxyOp.pid == ctx.pid ? callOfColl(d.parentObj) : kNoNcclCall;
  h->peer = d.proxyOp.peer;
  h->channel = d.proxyOp.channelId;
  h->isSend = d.proxyOp.isSend != 0;
  *handle = h;
}

void startProxyStep(Context& ctx, void** handle, const p::EventDescr& d) {
  const auto* op = static_cast<const Handle*>(d.parentObj);
  if (op == nullptr || op->type != p::kProxyOp) {
    globals().ignored.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Handle* h = acquire(ctx, p::kProxyStep);
  if (h == nullptr) return;
  h->call = op->call;
  h->peer = op->peer;
  h->channel = op->channel;
  h->isSend = op->isSend;
  h->step = d.proxyStep.step;
  NcclRawEvent e;
  e.kind = h->isSend ? EventKind::NcclSendStepStart : EventKind::NcclRecvStepStart;
  e.call = h->call;
  e.channel = h->channel;
  e.peer = h->peer;
  e.step = static_cast<uint32_t>(h->step);
  e.ns = steadyNowNs();
  globals().queue.push(e);
  *handle = h;
}

void startKernelCh(Context& ctx, void** handle, const p::EventDescr& d) {
  Handle* h = acquire(ctx, p::kKernelCh);
  if (h == nullptr) return;
  h->call = callOfColl(d.parentObj);
  h->channel = d.kernelCh.channelId;
  NcclRawEvent e;
  e.kind = EventKind::NcclKernelStart;
  e.gpuClock = true;
  e.call = h->call;
  e.channel = h->channel;
  e.ns = static_cast<int64_t>(d.kernelCh.pTimer);
  globals().queue.push(e);
  *handle = h;
}

void stopHandle(Handle& h) {
  NcclRawEvent e;
  e.call = h.call;
  e.channel = h.channel;
  if (h.type == p::kProxyStep) {
    e.kind = h.isSend ? EventKind::NcclSendStepEnd : EventKind::NcclRecvStepEnd;
    e.peer = h.peer;
    e.step = static_cast<uint32_t>(h.step);
    e.bytes = h.bytes;
    e.ns = steadyNowNs();
    globals().queue.push(e);
  } else if (h.type == p::kKernelCh && h.stopped) {
    e.kind = EventKind::NcclKernelEnd;
    e.gpuClock = true;
    e.ns = static_cast<int64_t>(h.endNs);
    globals().queue.push(e);
  }
  h.pool->release(&h);
}

// ---- The table's functions -------------------------------------------------------------------

int maskFromEnvironment() {
  const char* v = std::getenv("NCCL_PROFILE_EVENT_MASK");
  if (v == nullptr || *v == '\0') return ncclProfilerMask(TelemetryLevel::Steps);
  char* end = nullptr;
  const long m = std::strtol(v, &end, 0);
  if (end == v || *end != '\0' || m < 0) return ncclProfilerMask(TelemetryLevel::Steps);
  return static_cast<int>(m);
}

p::Result init(void** context, uint64_t /*commId*/, int* eActivationMask, const char* /*commName*/,
               int nNodes, int /*nranks*/, int /*rank*/, p::DebugLogger /*logfn*/) {
  Globals& g = globals();
  const int mask = maskFromEnvironment();
  // NCCL goes on without the plugin when init fails ("Profiler init failed ... Continue
  // without profiler", src/plugin/profiler.cc).
  Context* ctx = nullptr;
  try {
    ctx = new Context();  // NOLINT(cppcoreguidelines-owning-memory): finalize deletes it
  } catch (const std::bad_alloc&) {
    return p::kInternalError;
  }
  *context = ctx;
  __atomic_store_n(eActivationMask, mask, __ATOMIC_RELAXED);
  g.mask.store(mask, std::memory_order_relaxed);
  g.nNodes.store(nNodes, std::memory_order_relaxed);
  g.inits.fetch_add(1, std::memory_order_relaxed);
  return p::kSuccess;
}

p::Result startEvent(void* context, void** eHandle, p::EventDescr* d) {
  *eHandle = nullptr;
  if (context == nullptr || d == nullptr) return p::kSuccess;
  Context& ctx = *static_cast<Context*>(context);
  switch (d->type) {
    case p::kGroup: startGroup(ctx, eHandle); break;
    case p::kColl: startColl(ctx, eHandle, *d); break;
    case p::kProxyOp: startProxyOp(ctx, eHandle, *d); break;
    case p::kProxyStep: startProxyStep(ctx, eHandle, *d); break;
    case p::kKernelCh: startKernelCh(ctx, eHandle, *d); break;
    default: globals().ignored.fetch_add(1, std::memory_order_relaxed); break;
  }
  return p::kSuccess;
}

p::Result stopEvent(void* eHandle) {
  if (eHandle == nullptr) return p::kSuccess;
  const uint64_t type = *static_cast<const uint64_t*>(eHandle);
  if (type == p::kGroup) {
    const auto& h = *static_cast<const GroupHandle*>(eHandle);
    NcclRawEvent e;
    e.kind = EventKind::NcclGroupStart;
    e.call = h.call;
    e.ns = h.startNs;
    globals().queue.push(e);
    e.kind = EventKind::NcclGroupEnd;
    e.ns = steadyNowNs();
    globals().queue.push(e);
  } else if (type == p::kProxyOp || type == p::kProxyStep || type == p::kKernelCh) {
    stopHandle(*static_cast<Handle*>(eHandle));
  }
  return p::kSuccess;  // a collective's handle stays (Context says why)
}

p::Result recordEventState(void* eHandle, int eState, p::EventStateArgs* args) {
  if (eHandle == nullptr || args == nullptr) return p::kSuccess;
  const uint64_t type = *static_cast<const uint64_t*>(eHandle);
  if (type == p::kKernelCh && eState == p::kKernelChStop) {
    auto& h = *static_cast<Handle*>(eHandle);
    h.endNs = args->kernelCh.pTimer;
    h.stopped = true;
  } else if (type == p::kProxyStep) {
    // NCCL passes the step's size with each state it reaches (send: once posted to the
    // network; receive: once received): the largest is what the step moved.
    auto& h = *static_cast<Handle*>(eHandle);
    h.bytes = std::max<uint64_t>(h.bytes, args->proxyStep.transSize);
  }
  return p::kSuccess;
}

p::Result finalize(void* context) {
  delete static_cast<Context*>(context);  // NOLINT(cppcoreguidelines-owning-memory): init's
  return p::kSuccess;
}

}  // namespace

int ncclProfilerMask(TelemetryLevel level) {
  switch (level) {
    case TelemetryLevel::Off: return 0;
    case TelemetryLevel::Steps: return static_cast<int>(p::kGroup | p::kColl | p::kKernelCh);
    case TelemetryLevel::Chunks:
      return static_cast<int>(p::kGroup | p::kColl | p::kKernelCh | p::kProxyOp | p::kProxyStep);
  }
  return 0;
}

void ncclProfilerBeginRun(size_t elementBytes) {
  Globals& g = globals();
  g.queue.reset();
  g.call.store(kNoNcclCall, std::memory_order_relaxed);
  g.runElementBytes.store(elementBytes, std::memory_order_relaxed);
  g.noHandle.store(0, std::memory_order_relaxed);
  g.ignored.store(0, std::memory_order_relaxed);
  g.inits.store(0, std::memory_order_relaxed);
}

void ncclProfilerSetCall(uint64_t call) { globals().call.store(call, std::memory_order_relaxed); }

size_t ncclProfilerDrain(const std::function<void(const NcclRawEvent&)>& f) {
  return globals().queue.drain(f);
}

NcclProfilerCounts ncclProfilerCounts() {
  const Globals& g = globals();
  NcclProfilerCounts c;
  c.queued = g.queue.queued();
  c.dropped = g.queue.dropped();
  c.noHandle = g.noHandle.load(std::memory_order_relaxed);
  c.ignored = g.ignored.load(std::memory_order_relaxed);
  c.inits = g.inits.load(std::memory_order_relaxed);
  c.nNodes = g.nNodes.load(std::memory_order_relaxed);
  c.mask = g.mask.load(std::memory_order_relaxed);
  return c;
}

const ncclprof::ProfilerV5& ncclProfilerTable() { return ncclProfiler_v5; }

}  // namespace arl::gpu

// The name NCCL reports it loaded ("PROFILER/Plugin: Loaded allreduce-lab (v5)").
extern "C" {
__attribute__((visibility("default")))
arl::gpu::ncclprof::ProfilerV5 ncclProfiler_v5 = {"allreduce-lab",
                                                  arl::gpu::init,
                                                  arl::gpu::startEvent,
                                                  arl::gpu::stopEvent,
                                                  arl::gpu::recordEventState,
                                                  arl::gpu::finalize};
}
