// NCCL's profiler plugin inside the worker (gpu/nccl_profiler.h): found the way NCCL finds it,
// called through its exported version-5 table with descriptors laid out as NCCL lays them out
// (gpu/nccl_profiler_abi.h), and what it queued, dropped and turned into telemetry. None of
// this needs a GPU; a real NCCL run's events need one, and skip without it.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "exec/collective_library.h"
#include "exec/nccl_events.h"
#include "exec/telemetry_record.h"
#include "gpu/nccl_backend.h"
#include "gpu/nccl_library.h"
#include "gpu/nccl_loader.h"
#include "gpu/nccl_profiler.h"
#include "gpu_test_util.h"

namespace arl::gpu {
namespace {

namespace p = ncclprof;

const p::ProfilerV5& table() { return ncclProfilerTable(); }

// One communicator's plugin context, made and ended through the table as NCCL does.
class Comm {
 public:
  explicit Comm(int nNodes = 1) {
    EXPECT_EQ(table().init(&ctx_, 0x1234, &mask_, "test", nNodes, 2, 0, nullptr), p::kSuccess);
  }
  ~Comm() { EXPECT_EQ(table().finalize(ctx_), p::kSuccess); }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  void* start(p::EventDescr d) {
    void* h = reinterpret_cast<void*>(0x1);  // NCCL's slot may hold anything before
    EXPECT_EQ(table().startEvent(ctx_, &h, &d), p::kSuccess);
    return h;
  }
  static void stop(void* h) { EXPECT_EQ(table().stopEvent(h), p::kSuccess); }
  static void record(void* h, int state, p::EventStateArgs a) {
    EXPECT_EQ(table().recordEventState(h, state, &a), p::kSuccess);
  }

  int mask() const { return mask_; }

 private:
  void* ctx_ = nullptr;
  int mask_ = -1;
};

p::EventDescr collDescr(const char* algo, const char* proto, uint8_t channels) {
  p::EventDescr d{};
  d.type = p::kColl;
  d.coll.func = "AllReduce";
  d.coll.count = 1024;
  d.coll.datatype = "ncclFloat32";
  d.coll.nChannels = channels;
  d.coll.nWarps = 16;
  d.coll.algo = algo;
  d.coll.proto = proto;
  return d;
}

p::EventDescr kernelDescr(void* parent, uint8_t channel, uint64_t pTimer) {
  p::EventDescr d{};
  d.type = p::kKernelCh;
  d.parentObj = parent;
  d.kernelCh.channelId = channel;
  d.kernelCh.pTimer = pTimer;
  return d;
}

// A kernel channel from start to stop, as NCCL's proxy reports it: two events.
void kernelChannel(Comm& c, void* coll, uint8_t channel, uint64_t start, uint64_t end) {
  void* k = c.start(kernelDescr(coll, channel, start));
  p::EventStateArgs a{};
  a.kernelCh.pTimer = end;
  if (k != nullptr) Comm::record(k, p::kKernelChStop, a);
  Comm::stop(k);
}

std::vector<NcclRawEvent> drainAll() {
  std::vector<NcclRawEvent> out;
  ncclProfilerDrain([&](const NcclRawEvent& e) { out.push_back(e); });
  return out;
}

TEST(NcclProfiler, NcclFindsTheTableInTheProgramAsStaticPlugin) {
  // NCCL_PROFILER_PLUGIN=STATIC_PLUGIN: dlopen(NULL), then dlsym "ncclProfiler_v5".
  void* self = ::dlopen(nullptr, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(self, nullptr) << ::dlerror();
  EXPECT_EQ(::dlsym(self, "ncclProfiler_v5"), static_cast<const void*>(&table()));
  ::dlclose(self);
  EXPECT_EQ(::dlsym(RTLD_DEFAULT, "ncclProfiler_v5"), static_cast<const void*>(&table()));
  EXPECT_STREQ(table().name, "allreduce-lab");
}

TEST(NcclProfiler, TheWorkerExportsTheTable) {
  const testutil::Result r =
      testutil::runBinary("nm", "-D --defined-only '" + gputest::workerBinary() + "'");
  if (r.rc != 0) GTEST_SKIP() << "nm could not list the worker's dynamic symbols: " << r.err;
  EXPECT_NE(r.out.find(" ncclProfiler_v5\n"), std::string::npos)
      << "the worker's dynamic symbol table lacks ncclProfiler_v5";
}

TEST(NcclProfiler, InitReturnsTheMaskTheWorkerSet) {
  ncclProfilerBeginRun(4);
  ::setenv("NCCL_PROFILE_EVENT_MASK", "0x5a", 1);
  {
    Comm c;
    EXPECT_EQ(c.mask(), 0x5a);
  }
  ::unsetenv("NCCL_PROFILE_EVENT_MASK");
  {
    Comm c(3);
    EXPECT_EQ(c.mask(), ncclProfilerMask(TelemetryLevel::Steps));
    EXPECT_EQ(ncclProfilerCounts().nNodes, 3);
  }
  EXPECT_EQ(ncclProfilerCounts().inits, 2u);
  EXPECT_EQ(ncclProfilerMask(TelemetryLevel::Off), 0);
  EXPECT_EQ(ncclProfilerMask(TelemetryLevel::Steps), p::kGroup | p::kColl | p::kKernelCh);
  EXPECT_EQ(ncclProfilerMask(TelemetryLevel::Chunks),
            p::kGroup | p::kColl | p::kKernelCh | p::kProxyOp | p::kProxyStep);
}

// A collective as NCCL reports it on two nodes: group, collective, a kernel channel, and a
// network send step through a proxy op; then what the run thread makes of it.
TEST(NcclProfiler, QueuesACollectivesEventsAsNcclReportsThem) {
  ncclProfilerBeginRun(4);
  Comm c(2);
  ncclProfilerSetCall(7);
  p::EventDescr g{};
  g.type = p::kGroup;
  void* group = c.start(g);
  void* coll = c.start(collDescr("RING", "SIMPLE", 2));
  ASSERT_NE(coll, nullptr);
  Comm::stop(coll);  // NCCL stops the collective on the host once it launched it
  Comm::stop(group);
  ncclProfilerSetCall(8);  // a later call does not move the earlier collective's children
  kernelChannel(c, coll, 1, 5'000, 9'000);
  p::EventDescr op{};
  op.type = p::kProxyOp;
  op.parentObj = coll;
  op.proxyOp.pid = ::getpid();
  op.proxyOp.channelId = 1;
  op.proxyOp.peer = 1;
  op.proxyOp.isSend = 1;
  void* proxyOp = c.start(op);
  p::EventDescr st{};
  st.type = p::kProxyStep;
  st.parentObj = proxyOp;
  st.proxyStep.step = 3;
  void* step = c.start(st);
  p::EventStateArgs a{};
  a.proxyStep.transSize = 4096;
  Comm::record(step, p::kProxyStepSendGPUWait, p::EventStateArgs{});
  Comm::record(step, p::kProxyStepSendWait, a);
  Comm::stop(step);
  Comm::stop(proxyOp);
  p::EventDescr api{};
  api.type = p::kCollApi;
  EXPECT_EQ(c.start(api), nullptr);  // not recorded, and NCCL then stops nothing

  const std::vector<NcclRawEvent> ev = drainAll();
  std::vector<EventKind> kinds;
  for (const auto& e : ev) kinds.push_back(e.kind);
  const std::vector<EventKind> want = {EventKind::NcclColl,       EventKind::NcclGroupStart,
                                       EventKind::NcclGroupEnd,   EventKind::NcclKernelStart,
                                       EventKind::NcclKernelEnd,  EventKind::NcclSendStepStart,
                                       EventKind::NcclSendStepEnd};
  ASSERT_EQ(kinds, want);
  for (const auto& e : ev) EXPECT_EQ(e.call, 7u) << toString(e.kind);
  EXPECT_EQ(ev[0].info, (NcclCollInfo{NcclAlgo::Ring, NcclProto::Simple, 2, 16}));
  EXPECT_EQ(ev[0].bytes, 4096u);
  EXPECT_EQ(ev[0].count, 1024u);
  EXPECT_LE(ev[1].ns, ev[2].ns);
  EXPECT_TRUE(ev[3].gpuClock);
  EXPECT_EQ(ev[3].ns, 5'000);
  EXPECT_EQ(ev[4].ns, 9'000);
  EXPECT_EQ(ev[4].channel, 1);
  EXPECT_EQ(ev[6].peer, 1);
  EXPECT_EQ(ev[6].step, 3u);
  EXPECT_EQ(ev[6].bytes, 4096u);
  EXPECT_FALSE(ev[6].gpuClock);
  const NcclProfilerCounts n = ncclProfilerCounts();
  EXPECT_EQ(n.queued, 7u);
  EXPECT_EQ(n.dropped, 0u);
  EXPECT_EQ(n.ignored, 1u);
}

// NCCL 2.28 names ncclUint8 "Unknown" (ncclDatatypeToString): the bytes come from the run's
// own element size then; a name NCCL gives keeps its own size.
TEST(NcclProfiler, ATypeNcclDoesNotNameTakesTheRunsElementSize) {
  for (const size_t runBytes : {size_t{1}, size_t{8}}) {
    ncclProfilerBeginRun(runBytes);
    Comm c;
    ncclProfilerSetCall(0);
    p::EventDescr unknown = collDescr("RING", "SIMPLE", 1);
    unknown.coll.datatype = "Unknown";
    (void)c.start(unknown);
    p::EventDescr bytes = collDescr("RING", "SIMPLE", 1);
    bytes.coll.datatype = "ncclInt8";  // all-gather and broadcast: count in bytes
    (void)c.start(bytes);
    const std::vector<NcclRawEvent> ev = drainAll();
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[0].bytes, 1024 * runBytes) << "run element size " << runBytes;
    EXPECT_EQ(ev[1].bytes, 1024u);
  }
}

TEST(NcclProfiler, AFullQueueDropsAndCountsInsteadOfWaiting) {
  ncclProfilerBeginRun(4);
  Comm c;
  ncclProfilerSetCall(0);
  void* coll = c.start(collDescr("TREE", "LL", 1));
  ASSERT_EQ(drainAll().size(), 1u);
  // Nobody drains: every channel queues two events until the queue is full.
  const size_t extra = 100;
  const size_t pairs = (kNcclProfilerQueueEvents + extra) / 2;
  for (size_t i = 0; i < pairs; ++i) {
    kernelChannel(c, coll, static_cast<uint8_t>(i % 32), 2 * i, 2 * i + 1);
  }
  const NcclProfilerCounts n = ncclProfilerCounts();
  EXPECT_EQ(n.queued, 1 + kNcclProfilerQueueEvents);
  EXPECT_EQ(n.dropped, 2 * pairs - kNcclProfilerQueueEvents);
  const std::vector<NcclRawEvent> ev = drainAll();
  ASSERT_EQ(ev.size(), kNcclProfilerQueueEvents);
  for (size_t i = 0; i < ev.size(); ++i) {
    ASSERT_EQ(ev[i].ns, static_cast<int64_t>(i)) << i;  // the first ones, in order
  }
  kernelChannel(c, coll, 0, 1, 2);  // room again once drained
  EXPECT_EQ(drainAll().size(), 2u);
}

TEST(NcclProfiler, NoHandleLeftCountsTheEventInsteadOfWaiting) {
  ncclProfilerBeginRun(4);
  Comm c;
  ncclProfilerSetCall(0);
  void* coll = c.start(collDescr("RING", "LL128", 4));
  std::vector<void*> open;
  for (size_t i = 0; i < kNcclProfilerHandles + 5; ++i) {
    open.push_back(c.start(kernelDescr(coll, 0, i)));
  }
  EXPECT_EQ(std::count(open.begin(), open.end(), nullptr), 5);
  EXPECT_EQ(ncclProfilerCounts().noHandle, 5u);
  for (void* h : open) Comm::stop(h);  // NCCL stops only what it got a handle for; null is safe
  EXPECT_NE(c.start(kernelDescr(coll, 0, 1)), nullptr);  // handles came back
}

TEST(NcclProfiler, ConcurrentProducersLoseNothingBelowTheQueuesSize) {
  ncclProfilerBeginRun(4);
  Comm c;
  ncclProfilerSetCall(0);
  void* coll = c.start(collDescr("RING", "SIMPLE", 4));
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 4000;  // two events each: 32 000 in all
  std::atomic<int> done{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      for (uint64_t i = 0; i < kPerThread; ++i) {
        kernelChannel(c, coll, static_cast<uint8_t>(t), 2 * i, 2 * i + 1);
      }
      done.fetch_add(1);
    });
  }
  std::map<int, int64_t> last;  // per channel: the GPU time last seen
  size_t got = 0;
  const auto take = [&](const NcclRawEvent& e) {
    if (e.kind == EventKind::NcclColl) return;
    ++got;
    auto [it, fresh] = last.try_emplace(e.channel, e.ns);
    if (!fresh) {
      EXPECT_EQ(e.ns, it->second + 1) << "channel " << int(e.channel) << " out of order";
      it->second = e.ns;
    }
  };
  while (done.load() < kThreads) ncclProfilerDrain(take);
  for (auto& th : producers) th.join();
  ncclProfilerDrain(take);
  EXPECT_EQ(got, kThreads * kPerThread * 2);
  EXPECT_EQ(ncclProfilerCounts().dropped, 0u);
}

TEST(NcclProfiler, EventsWithoutAKnownParentBelongToNoCall) {
  ncclProfilerBeginRun(4);
  Comm c;
  ncclProfilerSetCall(0);
  kernelChannel(c, nullptr, 0, 1, 2);  // a point-to-point kernel: no collective of ours
  p::EventDescr op{};
  op.type = p::kProxyOp;
  op.parentObj = reinterpret_cast<void*>(0x1000);  // another process's (PXN): never read
  op.proxyOp.pid = ::getpid() + 1;
  void* h = c.start(op);
  ASSERT_NE(h, nullptr);
  Comm::stop(h);
  const std::vector<NcclRawEvent> ev = drainAll();
  ASSERT_EQ(ev.size(), 2u);
  for (const auto& e : ev) EXPECT_EQ(e.call, kNoNcclCall);
}

// The run thread's side: raw events to telemetry (warm-ups left out, GPU times mapped), and
// those through the wire's records and back.
TEST(NcclProfiler, RawEventsBecomeTelemetryRecords) {
  NcclEventContext ctx;
  ctx.warmup = 2;
  ctx.clockOffsetNs = 1'000;
  ctx.gpu = NcclClockMap{true, 500'000, 3'000};
  NcclRawEvent coll;
  coll.kind = EventKind::NcclColl;
  coll.call = 3;
  coll.info = NcclCollInfo{NcclAlgo::Tree, NcclProto::LL128, 8, 4};
  coll.count = 256;
  coll.bytes = 512;
  coll.ns = 10'000;
  NcclRawEvent kernel;
  kernel.kind = EventKind::NcclKernelEnd;
  kernel.gpuClock = true;
  kernel.call = 3;
  kernel.channel = 5;
  kernel.ns = 520'000;
  NcclRawEvent recv;
  recv.kind = EventKind::NcclRecvStepEnd;
  recv.call = 2;
  recv.channel = 1;
  recv.peer = 3;
  recv.step = 9;
  recv.bytes = 65536;
  recv.ns = 30'000;

  NcclEventFate fate = NcclEventFate::Recorded;
  const auto c = toTelemetry(coll, ctx, &fate);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->iteration, 1u);  // the fourth call, after two warm-ups
  EXPECT_EQ(c->tNs, 11'000);
  EXPECT_EQ(c->bytes, 512u);
  EXPECT_EQ(c->offset, 256u);
  EXPECT_EQ(unpackNcclCollInfo(c->provenance), coll.info);
  const auto k = toTelemetry(kernel, ctx);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->tNs, 520'000 - 500'000 + 1'000);
  EXPECT_EQ(k->chunk, 5u);
  const auto r = toTelemetry(recv, ctx);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->iteration, 0u);
  EXPECT_EQ(r->peer, 3);
  EXPECT_EQ(r->step, 9u);

  NcclRawEvent warm = coll;
  warm.call = 1;
  EXPECT_FALSE(toTelemetry(warm, ctx, &fate));
  EXPECT_EQ(fate, NcclEventFate::Warmup);
  warm.call = kNoNcclCall;
  EXPECT_FALSE(toTelemetry(warm, ctx, &fate));
  EXPECT_EQ(fate, NcclEventFate::NoCall);
  NcclEventContext noClock = ctx;
  noClock.gpu.known = false;
  EXPECT_FALSE(toTelemetry(kernel, noClock, &fate));
  EXPECT_EQ(fate, NcclEventFate::NoGpuClock);

  std::vector<TelemetryEvent> in = {*c, *k, *r};
  std::vector<uint8_t> bytes(in.size() * kTelemetryRecordBytes);
  for (size_t i = 0; i < in.size(); ++i) {
    in[i].runId = 4;
    in[i].rank = 1;
    packTelemetryRecord(in[i], bytes.data() + i * kTelemetryRecordBytes);
  }
  std::vector<TelemetryEvent> out;
  ASSERT_FALSE(
      unpackTelemetryRecords(bytes, kTelemetryRecordVersion, kTelemetryRecordBytes, 4, 1, out));
  EXPECT_EQ(out, in);
}

// A real NCCL run of one rank (one GPU). NCCL makes the communicator with the lab's plugin
// (init, with the mask the worker set, and finalize); its collectives are another matter:
// NCCL 2.28.9 runs a one-rank collective as a copy or a one-rank kernel of its own
// (ncclLaunchOneRank in src/enqueue.cc) without the task that its group, collective and
// kernel-channel events hang on, so none may come. What does come must be whole: one
// collective per timed call at most, every kernel channel's end after its start, no proxy
// step (no network). The counts are printed for the record; NCCL's events proper need two
// ranks, two GPUs (nccl_process_test.cpp, TwoRanksTraceHoldsNcclsOwnEvents).
TEST(NcclProfilerOnGpu, AOneRankRunInitialisesThePluginAndReportsOnlyWholeEvents) {
  if (auto why = ncclDeviceProblem(0)) GTEST_SKIP() << "needs a CUDA device: " << *why;
  if (auto why = ncclLoadProblem()) GTEST_SKIP() << "needs NCCL: " << *why;
  LibraryRunSpec spec;
  spec.algorithm = findLibraryAlgorithm("nccl-ring");
  spec.count = 1 << 20;
  spec.nranks = 1;
  spec.device = 0;
  spec.telemetry = TelemetryLevel::Chunks;
  NcclLibrary lib(spec);
  const std::atomic<bool> cancel{false};
  lib.join(lib.newBootstrap(), cancel);
  NcclBackend backend;
  RankBuffers b;
  b.input = backend.allocate(spec.count * 4);
  b.output = backend.allocate(spec.count * 4);
  BoundedSink sink(1 << 16);
  const int kCalls = 4;  // one warm-up, three timed
  for (int i = 0; i < kCalls; ++i) {
    (void)lib.collectEvents(sink, 1, 0, false);
    lib.run(b, cancel);
  }
  const LibraryEventCounts n = lib.collectEvents(sink, 1, 0, true);
  backend.deallocate(b.input);
  backend.deallocate(b.output);
  const NcclProfilerCounts plugin = ncclProfilerCounts();
  if (ncclLibrary()->version >= kNcclProfilerV5Version) {
    EXPECT_EQ(plugin.inits, 1u) << "NCCL did not load the worker's profiler plugin";
    EXPECT_EQ(plugin.mask, ncclProfilerMask(TelemetryLevel::Chunks));
  } else {
    EXPECT_EQ(plugin.inits, 0u) << "an NCCL older than 2.28 called interface version 5";
  }
  EXPECT_EQ(n.dropped, 0u);
  std::map<uint32_t, std::vector<TelemetryEvent>> byIteration;
  for (const TelemetryEvent& e : sink.take()) byIteration[e.iteration].push_back(e);
  size_t colls = 0;
  size_t channels = 0;
  for (const auto& [it, events] : byIteration) {
    EXPECT_LT(it, 3u) << "an event of no timed call";
    std::map<uint32_t, int64_t> starts;
    for (const auto& e : events) {
      EXPECT_NE(e.kind, EventKind::NcclSendStepStart) << "a proxy step on one node";
      EXPECT_NE(e.kind, EventKind::NcclRecvStepStart) << "a proxy step on one node";
      if (e.kind == EventKind::NcclColl) ++colls;
      if (e.kind == EventKind::NcclKernelStart) starts[e.chunk] = e.tNs;
      if (e.kind != EventKind::NcclKernelEnd) continue;
      ++channels;
      ASSERT_TRUE(starts.count(e.chunk)) << "a kernel channel's end without its start";
      EXPECT_GE(e.tNs, starts[e.chunk]);
    }
  }
  EXPECT_LE(colls, 3u) << "more collectives than timed calls";
  std::printf(
      "NCCL %s, one rank: %zu collective and %zu kernel-channel events over 3 timed "
      "calls\n",
      ncclVersionString(ncclLibrary()->version).c_str(), colls, channels);
}

}  // namespace
}  // namespace arl::gpu
