// The simulation's cores (LinkModel::cores: the ranks' work list-scheduled onto the cores they
// share) and the shared-memory plane's choice between the cache-resident and the streaming
// rates by a run's working set. Hand-made schedules with known answers, and the generators'
// schedules where only a relation is known.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "model/metrics.h"
#include "model/model.h"
#include "schedule/generators.h"
#include "schedule/verifier.h"
#include "transport/shm_ring.h"

namespace arl {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

Op sendOp(int to) {
  Op op;
  op.kind = OpKind::Send;
  op.sendPeer = to;
  op.src = {Buffer::Input, 0};
  op.count = 2;
  return op;
}

Op recvOp(int from) {
  Op op;
  op.kind = OpKind::Recv;
  op.recvPeer = from;
  op.dst = {Buffer::Output, 0};
  op.count = 2;
  return op;
}

Schedule emptySchedule(int n) {
  Schedule s;
  s.algorithm = "hand-made";
  s.nranks = n;
  s.count = s.sliceElems = s.inputElems = s.outputElems = 2;
  s.nsteps = 1;
  s.ranks.resize(static_cast<size_t>(n));
  return s;
}

// For each (from, to), `from` sends 2 floats (8 bytes) to `to`; sends before receives.
Schedule transfers(int n, const std::vector<std::pair<int, int>>& pairs) {
  Schedule s = emptySchedule(n);
  for (const auto& [from, to] : pairs) s.ranks[static_cast<size_t>(from)].push_back(sendOp(to));
  for (const auto& [from, to] : pairs) s.ranks[static_cast<size_t>(to)].push_back(recvOp(from));
  return s;
}

// A chain 0 -> 1 -> ... -> n-1: each middle rank passes on what it received (RecvCopySend).
Schedule chain(int n) {
  Schedule s = emptySchedule(n);
  s.ranks[0].push_back(sendOp(1));
  for (int r = 1; r + 1 < n; ++r) {
    Op op = recvOp(r - 1);
    op.kind = OpKind::RecvCopySend;
    op.sendPeer = r + 1;
    s.ranks[static_cast<size_t>(r)].push_back(op);
  }
  s.ranks[static_cast<size_t>(n - 1)].push_back(recvOp(n - 2));
  return s;
}

// The shared-memory plane's link model by hand: a send is its sender's copy at 8 B/s (an
// 8-byte send holds its sender's thread for 1 s), receives copy out for free, no latency.
LinkModel copyingSenders(int cores, double latency = 0) {
  LinkModel m;
  m.port = {8, 0};
  m.defaults = {0, latency};
  m.copyBytesPerSecond = 0;
  m.sendersCopy = true;
  m.cores = cores;
  return m;
}

TEST(ModelCores, TwoIndependentSendsOnOneCoreTakeTwiceAsLongAsOnTwo) {
  const Schedule s = transfers(4, {{0, 1}, {2, 3}});
  EXPECT_DOUBLE_EQ(simulate(s, copyingSenders(0)).totalSeconds, 1.0);
  EXPECT_DOUBLE_EQ(simulate(s, copyingSenders(2)).totalSeconds, 1.0);
  EXPECT_DOUBLE_EQ(simulate(s, copyingSenders(1)).totalSeconds, 2.0);
  // The core goes to the piece that was ready first, the first come among equals: rank 0's
  // send, then rank 2's, whose receiver has it at 2 s.
  const ModelTimeline one = simulate(s, copyingSenders(1));
  EXPECT_DOUBLE_EQ(one.rankSeconds[1], 1.0);
  EXPECT_DOUBLE_EQ(one.rankSeconds[3], 2.0);
}

TEST(ModelCores, AChainIsNotSpedUpByCores) {
  // Three copies, each waiting for the one before: 3 s on one core or on four.
  const Schedule s = chain(4);
  for (int cores : {0, 1, 2, 4}) {
    EXPECT_DOUBLE_EQ(simulate(s, copyingSenders(cores)).totalSeconds, 3.0) << cores << " cores";
  }
}

TEST(ModelCores, APieceStartsWhenItsDataIsReadyAndACoreIsFree) {
  // Three senders to one receiver: 1 s on three cores; on two, the third copy waits for a
  // core (1 to 2 s); on one, the copies follow each other.
  const Schedule s = transfers(4, {{1, 0}, {2, 0}, {3, 0}});
  EXPECT_DOUBLE_EQ(simulate(s, copyingSenders(3)).totalSeconds, 1.0);
  EXPECT_DOUBLE_EQ(simulate(s, copyingSenders(2)).totalSeconds, 2.0);
  EXPECT_DOUBLE_EQ(simulate(s, copyingSenders(1)).totalSeconds, 3.0);
  // A reduction waits for its data, then for a core: rank 1 reduces what rank 0 sent (1 s at
  // 8 B/s) while rank 2's copy to rank 3 holds the only core from 1 s to 2 s.
  Schedule r = transfers(4, {{0, 1}, {2, 3}});
  r.ranks[1][0].kind = OpKind::RecvReduceCopy;
  LinkModel m = copyingSenders(1);
  m.reduceBytesPerSecond = 8;
  const ModelTimeline tl = simulate(r, m);
  EXPECT_DOUBLE_EQ(tl.rankSeconds[3], 2.0);
  EXPECT_DOUBLE_EQ(tl.rankSeconds[1], 3.0);
  m.cores = 2;
  EXPECT_DOUBLE_EQ(simulate(r, m).rankSeconds[1], 2.0);
}

TEST(ModelCores, WithFewerCoresThanRanksAMessagesLatencyIsItsReceiversWorkOnACore) {
  const Schedule s = transfers(4, {{0, 1}, {2, 3}});
  LinkModel m = copyingSenders(1, 0.5);
  // As a delay: the copies take the core 0-1 s and 1-2 s, the receivers have them 0.5 s later.
  EXPECT_DOUBLE_EQ(simulate(s, m).totalSeconds, 2.5);
  // As work: rank 1's wake-up takes the core 2-2.5 s, rank 3's 2.5-3 s.
  m.wakeOnCore = true;
  EXPECT_DOUBLE_EQ(simulate(s, m).totalSeconds, 3.0);
  // With a core per rank a waiting rank needs no waking on another's core: a delay again.
  m.cores = 4;
  EXPECT_DOUBLE_EQ(simulate(s, m).totalSeconds, 1.5);
}

TEST(ModelCores, AFreshPayloadIsSentAtTheFreshRateAndABuffersAtThePorts) {
  // A chain 0 -> 1 -> 2: rank 0 sends from its buffer (8 bytes at 8 B/s: 1 s), rank 1 passes
  // on what it has just received (RecvCopySend), at the fresh rate when there is one.
  const Schedule s = chain(3);
  LinkModel m = copyingSenders(0);
  EXPECT_DOUBLE_EQ(simulate(s, m).totalSeconds, 2.0);
  m.freshSendBytesPerSecond = 32;  // 0.25 s for 8 bytes
  const ModelTimeline tl = simulate(s, m);
  EXPECT_DOUBLE_EQ(tl.totalSeconds, 1.25);
  EXPECT_DOUBLE_EQ(cpuSeconds(s, m, DataType::Float), 1.25);
  // Only a copying sender's: with the ports of a network, the fresh rate says nothing.
  m.sendersCopy = false;
  EXPECT_EQ(m.egressRate(1, false, OpKind::RecvCopySend), 8);
  m.sendersCopy = true;
  EXPECT_EQ(m.egressRate(1, false, OpKind::RecvCopySend), 32);
  EXPECT_EQ(m.egressRate(0, false, OpKind::Send), 8);
  // What is fresh: a payload the op itself produces, by reducing or by receiving.
  for (OpKind k : {OpKind::RecvReduceSend, OpKind::RecvReduceCopySend, OpKind::RecvCopySend}) {
    EXPECT_TRUE(sendPayloadIsFresh(k)) << static_cast<int>(k);
  }
  for (OpKind k : {OpKind::Send, OpKind::Recv, OpKind::RecvReduceCopy, OpKind::Copy}) {
    EXPECT_FALSE(sendPayloadIsFresh(k)) << static_cast<int>(k);
  }
}

// Every generator's schedule, as the shared-memory plane runs it (copying senders, latency as
// the wake-up's), at 4 and 8 ranks.
class ModelCoresAlgorithms : public ::testing::TestWithParam<std::string> {};

Schedule generated(const std::string& algo, int n, uint64_t bytes) {
  GenParams g;
  g.nranks = n;
  g.count = bytes / 4;
  g.sliceElems = (256 << 10) / 4;
  Schedule s = generate(algo, g);
  const VerifyResult vr = annotate(s);
  EXPECT_TRUE(vr.ok) << vr.message;
  return s;
}

LinkModel sharedMemoryLinks(int cores) {
  ModelParams p;
  p.alpha = 10e-6;
  LinkModel m = LinkModel::fromParams(p);
  m.sendersCopy = true;
  m.port = {12e9, 0};
  m.copyBytesPerSecond = 12e9;
  m.reduceBytesPerSecond = 8e9;
  m.wakeOnCore = true;
  m.cores = cores;
  return m;
}

TEST_P(ModelCoresAlgorithms, AsManyCoresAsRanksGiveExactlyTheResultWithoutCores) {
  SimOptions o;
  o.iterations = 3;
  for (int n : {4, 8}) {
    const Schedule s = generated(GetParam(), n, 4 * kMiB);
    const ModelTimeline free = simulate(s, sharedMemoryLinks(0), o);
    for (int cores : {n, n + 3}) {
      const ModelTimeline tl = simulate(s, sharedMemoryLinks(cores), o);
      EXPECT_EQ(tl.rankSeconds, free.rankSeconds) << n << " ranks, " << cores << " cores";
      EXPECT_EQ(tl.iterationSeconds, free.iterationSeconds) << n << " ranks, " << cores;
    }
  }
}

TEST_P(ModelCoresAlgorithms, CoresToShareNeverMakeARunFasterNorOneCoreFasterThanAllItsWork) {
  for (int n : {4, 8}) {
    const Schedule s = generated(GetParam(), n, 4 * kMiB);
    // A piece waits for a core or starts when ready, as it would with a core per rank.
    const double own = simulate(s, sharedMemoryLinks(0)).totalSeconds;
    for (int cores = 1; cores < n; ++cores) {
      LinkModel m = sharedMemoryLinks(cores);
      m.wakeOnCore = false;  // so that only the cores change
      EXPECT_GE(simulate(s, m).totalSeconds, own) << n << " ranks, " << cores << " cores";
    }
    // One core does every rank's work one piece after another: no less than all of it.
    LinkModel one = sharedMemoryLinks(1);
    one.wakeOnCore = false;
    EXPECT_GE(simulate(s, one).totalSeconds, cpuSeconds(s, one, DataType::Float) * (1 - 1e-12))
        << n;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, ModelCoresAlgorithms,
                         ::testing::Values("ring", "tree", "halving-doubling", "recursive-doubling",
                                           "reduce-broadcast", "parameter-server"));

ModelParams sharedMemoryParams(int cores) {
  ModelParams p;
  p.alpha = 10e-6;
  p.gamma = 1.0 / 8e9;
  p.shmCopy = 1.0 / 12e9;
  p.cores = cores;
  return p;
}

CostQuery sharedMemoryQuery(std::string_view algo, int n, uint64_t bytes) {
  CostQuery q;
  q.algorithm = algo;
  q.nranks = n;
  q.bytes = bytes;
  q.sliceBytes = kMiB;
  q.sharedMemory = true;
  return q;
}

TEST(ModelCores, TheSharedMemoryModelWithACorePerRankIsTheSimulationAlone) {
  for (const char* algo : {"ring", "tree", "parameter-server"}) {
    const CostQuery q = sharedMemoryQuery(algo, 4, 16 * kMiB);
    EXPECT_EQ(predictSharedMemory(q, sharedMemoryParams(4)),
              predictSharedMemory(q, sharedMemoryParams(0)))
        << algo;
    EXPECT_EQ(predictSharedMemory(q, sharedMemoryParams(6)),
              predictSharedMemory(q, sharedMemoryParams(0)))
        << algo;
  }
}

Schedule generatedFor(const CostQuery& q) {
  GenParams g;
  g.nranks = q.nranks;
  g.count = q.bytes / 4;
  g.sliceElems = q.sliceBytes / 4;
  return generate(q.algorithm, g);
}

// Every rank's copying and reducing, and one wake-up (alpha) per message, over the cores: the
// bound the model took the larger of until the simulation scheduled the cores itself.
double workOverCores(const Schedule& s, const ModelParams& p) {
  size_t messages = 0;
  for (const auto& ops : s.ranks) {
    for (const Op& op : ops) messages += opSends(op.kind) ? 1 : 0;
  }
  return (cpuSeconds(s, sharedMemoryLinks(p, false), DataType::Float) +
          static_cast<double>(messages) * p.alpha) /
         p.cores;
}

TEST(ModelCores, TheSharedMemoryModelFollowsTheDependenciesAndTheCoresTogether) {
  // The tree at 8 ranks on 2 cores: its critical path and the cores overlap, so the schedule
  // on the cores takes longer than either alone.
  const CostQuery q = sharedMemoryQuery("tree", 8, kMiB);
  const ModelParams p = sharedMemoryParams(2);
  const double both = predictSharedMemory(q, p);
  EXPECT_GT(both, predictSharedMemory(q, sharedMemoryParams(8)));
  EXPECT_GT(both, workOverCores(generatedFor(q), p) * 1.01);
}

TEST(ModelCores, TheScheduleOnTheCoresIsNeverBelowTheirWork) {
  // Why predictSharedMemory() keeps no separate bound of the work over the cores: the
  // schedule does all of it on them, so it never comes out below it.
  for (const char* algo : {"ring", "tree", "halving-doubling", "recursive-doubling",
                           "reduce-broadcast", "parameter-server", "hierarchical"}) {
    for (int n : {4, 8}) {
      for (uint64_t bytes : {kMiB, 16 * kMiB}) {
        const CostQuery q = sharedMemoryQuery(algo, n, bytes);
        for (int cores : {1, 2, 3}) {
          const ModelParams p = sharedMemoryParams(cores);
          EXPECT_GE(predictSharedMemory(q, p), workOverCores(generatedFor(q), p) * (1 - 1e-9))
              << algo << ", " << n << " ranks, " << (bytes >> 20) << " MiB, " << cores << " cores";
        }
      }
    }
  }
}

TEST(ModelCores, TheWorkingSetCountsBuffersAndOneWholeRingPerSender) {
  // Two ranks, 8 bytes: each has an 8-byte input and output; rank 1 receives from rank 0
  // into one ring of the smallest size.
  EXPECT_EQ(sharedMemoryWorkingSet(transfers(2, {{0, 1}}), DataType::Float, 4),
            2 * 16 + kShmMinRingBytes);
  // Three senders to rank 0: three rings there.
  EXPECT_EQ(sharedMemoryWorkingSet(transfers(4, {{1, 0}, {2, 0}, {3, 0}}), DataType::Float, 4),
            4 * 16 + 3 * kShmMinRingBytes);
  // A ring all-reduce of 16 MiB in 1 MiB slices at 4 ranks: 4 MiB chunks, each rank's 16 MiB
  // input and output, one ring from its predecessor for inflight + 2 slices (1 MiB each, with
  // a 64-byte head), RecvReduceSend temporaries of a slice, as many as the window holds.
  GenParams g;
  g.nranks = 4;
  g.count = 16 * kMiB / 4;
  g.sliceElems = kMiB / 4;
  const Schedule ring = generate("ring", g);
  const uint64_t ringBytes = shmRingBytes(kMiB, 4);
  EXPECT_EQ(ringBytes, 6 * (kMiB + kShmRecordHeadBytes));
  EXPECT_EQ(sharedMemoryWorkingSet(ring, DataType::Float, 4),
            4 * (2 * 16 * kMiB + ringBytes + 4 * kMiB));
}

TEST(ModelCores, TheSendRatesCostTheSendsAsCalibrateMeasuredThem) {
  const CostQuery q = sharedMemoryQuery("ring", 4, 16 * kMiB);
  ModelParams p = sharedMemoryParams(2);
  const double copies = predictSharedMemory(q, p);
  // Sends from a buffer at the copy rate and fresh ones faster: the ring sends all but its
  // first slice fresh (reduced, or received and passed on), so it runs faster.
  p.shmSend = *p.shmCopy;
  p.shmSendFresh = *p.shmCopy / 2;
  const double fresh = predictSharedMemory(q, p);
  EXPECT_LT(fresh, copies);
  const LinkModel m = sharedMemoryLinks(p, false);
  EXPECT_DOUBLE_EQ(m.freshSendBytesPerSecond, 24e9);
  EXPECT_DOUBLE_EQ(m.port.egressBytesPerSecond, 12e9);
  EXPECT_DOUBLE_EQ(m.copyBytesPerSecond, 12e9);
  // Both are work, scaled by the work scale as the copies and reductions are.
  p.shmWorkScale = 2;
  EXPECT_DOUBLE_EQ(sharedMemoryLinks(p, false).freshSendBytesPerSecond, 12e9);
  EXPECT_DOUBLE_EQ(sharedMemoryLinks(p, false).port.egressBytesPerSecond, 6e9);
  // One without the other, or the cache-resident rates: every send at the copy rate.
  p.shmWorkScale = 1;
  p.shmSendFresh.reset();
  EXPECT_EQ(predictSharedMemory(q, p), copies);
  p.shmSendFresh = *p.shmCopy / 2;
  p.shmCopyCached = 1.0 / 36e9;
  p.gammaCached = 1.0 / 24e9;
  const LinkModel cached = sharedMemoryLinks(p, true);
  EXPECT_EQ(cached.freshSendBytesPerSecond, 0);
  EXPECT_DOUBLE_EQ(cached.port.egressBytesPerSecond, 36e9);
}

TEST(ModelCores, TheSharedMemoryModelsOwnPerMessageCostReplacesAlpha) {
  ModelParams p = sharedMemoryParams(2);
  const CostQuery small = sharedMemoryQuery("ring", 8, 64 * 1024);
  const double withAlpha = predictSharedMemory(small, p);
  EXPECT_DOUBLE_EQ(sharedMemoryLinks(p, false).defaults.latencySeconds, p.alpha);
  // Its own cost, when set, is every message's wake-up; alpha is left to the closed forms.
  p.shmAlpha = p.alpha;
  EXPECT_EQ(predictSharedMemory(small, p), withAlpha);
  p.shmAlpha = 4 * p.alpha;
  EXPECT_DOUBLE_EQ(sharedMemoryLinks(p, false).defaults.latencySeconds, 40e-6);
  const double slower = predictSharedMemory(small, p);
  EXPECT_GT(slower, 2 * withAlpha);
  p.alpha = 1e-3;
  EXPECT_EQ(predictSharedMemory(small, p), slower);
}

TEST(ModelCores, TheCacheRatesCostRunsWhoseWorkingSetFitsInTheCache) {
  ModelParams p = sharedMemoryParams(2);
  const CostQuery small = sharedMemoryQuery("ring", 4, kMiB);
  const CostQuery large = sharedMemoryQuery("ring", 4, 64 * kMiB);
  const double smallStreaming = predictSharedMemory(small, p);
  const double largeStreaming = predictSharedMemory(large, p);
  // Without the cache's rates (or its size): the streaming rates, as before.
  EXPECT_EQ(predict(small, p).method, PredictionMethod::SharedMemory);
  EXPECT_FALSE(costSharedMemory(small, p).cacheRates);
  p.shmCopyCached = 1.0 / 36e9;
  p.gammaCached = 1.0 / 24e9;
  EXPECT_FALSE(costSharedMemory(small, p).cacheRates) << "no cache size";
  p.llcBytes = 32 * kMiB;
  const SharedMemoryCost s = costSharedMemory(small, p);
  const SharedMemoryCost l = costSharedMemory(large, p);
  EXPECT_LE(s.workingSetBytes, p.llcBytes);
  EXPECT_GT(l.workingSetBytes, p.llcBytes);
  EXPECT_TRUE(s.cacheRates);
  EXPECT_FALSE(l.cacheRates);
  EXPECT_LT(s.seconds, smallStreaming);
  EXPECT_EQ(l.seconds, largeStreaming);
  EXPECT_EQ(predict(small, p).method, PredictionMethod::SharedMemoryCached);
  EXPECT_EQ(toString(predict(small, p).method), "shared memory, cache rates");
  EXPECT_EQ(predict(large, p).method, PredictionMethod::SharedMemory);
  // The line is the cache's size: a working set of exactly it fits, one byte more does not.
  p.llcBytes = s.workingSetBytes;
  EXPECT_TRUE(costSharedMemory(small, p).cacheRates);
  p.llcBytes = s.workingSetBytes - 1;
  EXPECT_FALSE(costSharedMemory(small, p).cacheRates);
  EXPECT_EQ(costSharedMemory(small, p).seconds, smallStreaming);
}

}  // namespace
}  // namespace arl
