// The verifier must reject broken schedules with a message that names the rank, the op and the
// step, and must accept correct ones. Broken schedules are built by hand or by damaging a
// generated ring.
#include "schedule/verifier.h"

#include <gtest/gtest.h>

#include <string>

#include "schedule/generators.h"

namespace arl {
namespace {

Schedule blank(Collective c, int n, uint64_t count) {
  Schedule s;
  s.algorithm = "hand-made";
  s.collective = c;
  s.nranks = n;
  s.count = count;
  s.sliceElems = count;
  s.inputElems = inputElemsFor(c, n, count);
  s.outputElems = outputElemsFor(c, n, count);
  s.ranks.assign(static_cast<size_t>(n), {});
  return s;
}

Op op(OpKind k, int sendPeer, int recvPeer, BufRef src, BufRef dst, uint64_t count, uint32_t step) {
  Op o;
  o.kind = k;
  o.sendPeer = sendPeer;
  o.recvPeer = recvPeer;
  o.src = src;
  o.dst = dst;
  o.count = count;
  o.step = step;
  return o;
}

constexpr BufRef kIn{Buffer::Input, 0};
constexpr BufRef kOut{Buffer::Output, 0};
constexpr BufRef kScratch{Buffer::Scratch, 0};

// Two-rank all-reduce: each rank sends its input and adds what it receives.
Schedule exchangeAllReduce(uint64_t count) {
  Schedule s = blank(Collective::AllReduce, 2, count);
  for (int r = 0; r < 2; ++r) {
    auto& ops = s.ranks[static_cast<size_t>(r)];
    ops.push_back(op(OpKind::Send, 1 - r, -1, kIn, kOut, count, 0));
    ops.push_back(op(OpKind::RecvReduceCopy, -1, 1 - r, kIn, kOut, count, 0));
  }
  s.nsteps = 1;
  return s;
}

Schedule ring(Collective c, int n, uint64_t count, uint64_t slice) {
  GenParams p;
  p.collective = c;
  p.nranks = n;
  p.count = count;
  p.sliceElems = slice;
  return ringSchedule(p);
}

void expectRejected(const Schedule& s, std::initializer_list<std::string> fragments,
                    const VerifyOptions& opt = {}) {
  const VerifyResult v = verify(s, opt);
  ASSERT_FALSE(v.ok) << "accepted a broken schedule";
  for (const std::string& f : fragments) {
    EXPECT_NE(v.message.find(f), std::string::npos) << "missing '" << f << "' in: " << v.message;
  }
}

TEST(Verifier, AcceptsAHandMadeExchange) {
  const VerifyResult v = verify(exchangeAllReduce(10));
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_TRUE(v.message.empty());
}

TEST(Verifier, DroppedOpIsADeadlockNamingTheBlockedRank) {
  // Rank 2 loses its RecvCopySend of step 4. Its later ops take the messages meant for the
  // dropped one (FIFO matching), so it sends one message too few and rank 3's last Recv
  // never gets data.
  Schedule s = ring(Collective::AllReduce, 4, 4, 1);
  auto& ops = s.ranks[2];
  ASSERT_EQ(ops[4].kind, OpKind::RecvCopySend);
  ops.erase(ops.begin() + 4);
  expectRejected(s, {"deadlock", "rank 3 op 6 (step 5, Recv) waits for data from rank 2"});
}

TEST(Verifier, DroppedReduceIsAMissingContribution) {
  // Rank 1 forwards what it receives instead of adding its own input: the chain is intact,
  // but rank 1's contribution is missing from chunk 3 and from everything built on it.
  Schedule s = ring(Collective::AllReduce, 4, 4, 1);
  Op& o = s.ranks[1][1];
  ASSERT_EQ(o.kind, OpKind::RecvReduceSend);
  o.kind = OpKind::RecvCopySend;
  o.dst = {Buffer::Scratch, 0};
  s.scratchElems = 4;
  expectRejected(s, {"rank ", "missing {1}", "step"});
}

TEST(Verifier, DoubleCountedChunkIsRejected) {
  // Rank 1 sends its input twice; rank 0 adds it a second time.
  Schedule s = exchangeAllReduce(8);
  s.ranks[1].insert(s.ranks[1].begin() + 1, op(OpKind::Send, 0, -1, kIn, kOut, 8, 1));
  s.ranks[0].push_back(op(OpKind::RecvReduceCopy, -1, 1, kOut, kOut, 8, 1));
  expectRejected(s,
                 {"rank 0 op 2 (step 1, RecvReduceCopy)", "double-counted contribution of rank 1"});
}

TEST(Verifier, DoubleCountInAGeneratedRing) {
  // Ring of 4, one element per chunk. Rank 1 keeps its step-1 partial of chunk 3 ({0,1}) and
  // sends it twice; rank 2 keeps its step-2 partial ({0,1,2}) and adds the duplicate to it.
  Schedule s = ring(Collective::AllReduce, 4, 4, 1);
  Op& r1 = s.ranks[1][1];
  ASSERT_EQ(r1.kind, OpKind::RecvReduceSend);
  ASSERT_EQ(r1.chunk, 3u);
  r1.kind = OpKind::RecvReduceCopySend;
  r1.dst = {Buffer::Output, 3};
  s.ranks[1].insert(s.ranks[1].begin() + 2,
                    op(OpKind::Send, 2, -1, {Buffer::Output, 3}, kOut, 1, 1));
  Op& r2 = s.ranks[2][2];
  ASSERT_EQ(r2.kind, OpKind::RecvReduceSend);
  ASSERT_EQ(r2.chunk, 3u);
  r2.kind = OpKind::RecvReduceCopySend;
  r2.dst = {Buffer::Output, 3};
  s.ranks[2].insert(s.ranks[2].begin() + 3, op(OpKind::RecvReduceCopy, -1, 1, {Buffer::Output, 3},
                                               {Buffer::Output, 3}, 1, 2));
  expectRejected(s, {"rank 2 op 3 (step 2, RecvReduceCopy)",
                     "double-counted contribution of rank 0", "message from rank 1"});
}

TEST(Verifier, SendWithoutAReceiveIsRejected) {
  Schedule s = exchangeAllReduce(8);
  s.ranks[0].push_back(op(OpKind::Send, 1, -1, kOut, kOut, 8, 3));
  expectRejected(s, {"rank 0 op 2 (step 3, Send)", "send to rank 1 without a receive"});
}

TEST(Verifier, ReadOfUnwrittenScratchIsRejected) {
  Schedule s = exchangeAllReduce(8);
  s.scratchElems = 8;
  s.ranks[1][0].src = kScratch;
  expectRejected(s, {"rank 1 op 0 (step 0, Send)", "Scratch[0..8)", "no data"});
}

TEST(Verifier, WrongLengthMessageNamesBothRanksAndTheStep) {
  Schedule s = exchangeAllReduce(8);
  s.ranks[1][0].count = 5;
  expectRejected(
      s, {"rank 0 op 1 (step 0, RecvReduceCopy)", "from rank 1", "5 elements", "rank 0 expects 8"});
}

TEST(Verifier, FineOutOfPlaceButWrongInPlace) {
  // Rank 0 receives into Output, then sends "its input": in place that is rank 1's data.
  Schedule s = blank(Collective::AllReduce, 2, 6);
  s.ranks[0] = {op(OpKind::Recv, -1, 1, kIn, kOut, 6, 0), op(OpKind::Send, 1, -1, kIn, kOut, 6, 1),
                op(OpKind::Recv, -1, 1, kIn, kOut, 6, 2)};
  s.ranks[1] = {op(OpKind::Send, 0, -1, kIn, kOut, 6, 0),
                op(OpKind::RecvReduceCopy, -1, 0, kIn, kOut, 6, 1),
                op(OpKind::Send, 0, -1, kOut, kOut, 6, 2)};
  VerifyOptions outOfPlace;
  outOfPlace.checkInPlace = false;
  const VerifyResult v = verify(s, outOfPlace);
  EXPECT_TRUE(v.ok) << v.message;
  expectRejected(s, {"in-place", "rank 1 op 1 (step 1, RecvReduceCopy)",
                     "double-counted contribution of rank 1"});
}

TEST(Verifier, InPlaceReduceScatterSeesItsOutputInsideInput) {
  // The ring's reduce-scatter only writes a rank's Output once its own chunk is done, so it
  // holds in place, where Output is Input's window at rank*count.
  for (int n : {2, 3, 5}) {
    const VerifyResult v = verify(ring(Collective::ReduceScatter, n, 7, 2));
    EXPECT_TRUE(v.ok) << v.message;
  }
  // Rank 0 parks rank 1's data in its Output before it has used its own Input[0..4): in
  // place, its Output is Input[0..4), so the later reduce reads rank 1's data there.
  Schedule s = blank(Collective::ReduceScatter, 2, 4);
  s.ranks[0] = {op(OpKind::Recv, -1, 1, kIn, kOut, 4, 0),
                op(OpKind::Send, 1, -1, {Buffer::Input, 4}, kOut, 4, 1),
                op(OpKind::RecvReduceCopy, -1, 1, kIn, kOut, 4, 2)};
  s.ranks[1] = {op(OpKind::Send, 0, -1, kIn, kOut, 4, 0),
                op(OpKind::RecvReduceCopy, -1, 0, {Buffer::Input, 4}, kOut, 4, 1),
                op(OpKind::Send, 0, -1, kIn, kOut, 4, 2)};
  VerifyOptions outOfPlace;
  outOfPlace.checkInPlace = false;
  EXPECT_TRUE(verify(s, outOfPlace).ok) << verify(s, outOfPlace).message;
  expectRejected(s, {"in-place", "rank 0 op 2 (step 2, RecvReduceCopy)", "double-counted"});
}

TEST(Verifier, DeadlockDependsOnChannelCapacity) {
  // Both ranks send two messages before receiving: fine with two slots, a deadlock with one.
  Schedule s = blank(Collective::AllReduce, 2, 8);
  for (int r = 0; r < 2; ++r) {
    s.ranks[static_cast<size_t>(r)] = {
        op(OpKind::Send, 1 - r, -1, {Buffer::Input, 0}, kOut, 4, 0),
        op(OpKind::Send, 1 - r, -1, {Buffer::Input, 4}, kOut, 4, 0),
        op(OpKind::RecvReduceCopy, -1, 1 - r, {Buffer::Input, 0}, {Buffer::Output, 0}, 4, 0),
        op(OpKind::RecvReduceCopy, -1, 1 - r, {Buffer::Input, 4}, {Buffer::Output, 4}, 4, 0)};
  }
  VerifyOptions two;
  two.channelCapacity = 2;
  EXPECT_TRUE(verify(s, two).ok) << verify(s, two).message;
  expectRejected(s, {"deadlock", "rank 0 op 1 (step 0, Send) waits for room to send to rank 1",
                     "rank 1 op 1 (step 0, Send) waits for room to send to rank 0"});
}

TEST(Verifier, MixedElementsAreRejected) {
  Schedule s = exchangeAllReduce(8);
  s.ranks[1][0].src = {Buffer::Input, 2};
  s.ranks[1][0].count = 6;
  s.ranks[0][1].count = 6;
  expectRejected(s, {"rank 0 op 1 (step 0, RecvReduceCopy)", "mixes elements"});
}

TEST(Verifier, RejectsBadPeersBoundsAndInputWrites) {
  Schedule s = exchangeAllReduce(8);
  s.ranks[0][0].sendPeer = 0;
  expectRejected(s, {"rank 0 op 0 (step 0, Send)", "itself"});
  s = exchangeAllReduce(8);
  s.ranks[1][1].recvPeer = 7;
  expectRejected(s, {"rank 1 op 1 (step 0, RecvReduceCopy)", "rank 7", "no such rank"});
  s = exchangeAllReduce(8);
  s.ranks[0][1].dst = kIn;
  expectRejected(s, {"rank 0 op 1", "read-only"});
  s = exchangeAllReduce(8);
  s.ranks[0][1].dst = {Buffer::Output, 4};
  expectRejected(s, {"rank 0 op 1", "Output[4..12)", "beyond"});
  s = exchangeAllReduce(8);
  s.ranks[1][0].count = 0;
  expectRejected(s, {"rank 1 op 0", "0 elements"});
}

TEST(Verifier, WrongPostconditionNamesTheLastWriter) {
  // A broadcast from rank 1 that lets rank 0 keep its own input copy.
  Schedule s = blank(Collective::Broadcast, 2, 5);
  s.root = 1;
  s.ranks[0] = {op(OpKind::Copy, -1, -1, kIn, kOut, 5, 0)};
  s.ranks[1] = {op(OpKind::Copy, -1, -1, kIn, kOut, 5, 0)};
  expectRejected(s, {"rank 0", "Output[0..5)", "ranks {0}, expected {1}", "op 0 (step 0, Copy)"});
}

TEST(Verifier, RefusesMoreThan64Ranks) {
  Schedule s = blank(Collective::AllReduce, 65, 1);
  const VerifyResult v = verify(s);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.message.find("at most 64 ranks"), std::string::npos) << v.message;
}

TEST(Verifier, AnnotateRecordsPayloadProvenanceOnARingOfFour) {
  Schedule s = ring(Collective::AllReduce, 4, 4, 1);
  const VerifyResult v = annotate(s);
  ASSERT_TRUE(v.ok) << v.message;
  for (int r = 0; r < 4; ++r) {
    const auto& ops = s.ranks[static_cast<size_t>(r)];
    ASSERT_EQ(ops.size(), 7u);
    auto bit = [](int k) { return uint64_t{1} << ((k + 4) % 4); };
    // Step 0 sends the rank's own input; each reduce-scatter step adds the sender's bit.
    EXPECT_EQ(ops[0].provenance, bit(r));
    EXPECT_EQ(ops[1].provenance, bit(r) | bit(r - 1));
    // The last RecvReduceSend carries three ranks: everyone but the next rank, whose input
    // completes the sum in its RecvReduceCopySend.
    EXPECT_EQ(ops[2].provenance, 0xFu & ~bit(r + 1));
    // The RecvReduceCopySend receives three ranks ({r-1, r-2, r-3}), adds its own and sends all.
    EXPECT_EQ(ops[3].kind, OpKind::RecvReduceCopySend);
    EXPECT_EQ(ops[3].provenance, 0xFu);
    for (size_t i = 4; i < 7; ++i) EXPECT_EQ(ops[i].provenance, 0xFu) << "op " << i;
  }
}

TEST(Verifier, AnnotateRecordsCopiesAndBroadcastOrigins) {
  GenParams p;
  p.collective = Collective::AllGather;
  p.nranks = 3;
  p.count = 2;
  p.sliceElems = 2;
  Schedule s = ringSchedule(p);
  ASSERT_TRUE(annotate(s).ok);
  for (int r = 0; r < 3; ++r) {
    for (const Op& o : s.ranks[static_cast<size_t>(r)]) {
      // Every all-gather payload is one rank's chunk: exactly the chunk's owner.
      EXPECT_EQ(o.provenance, uint64_t{1} << o.chunk) << "rank " << r << " " << toString(o.kind);
    }
  }
}

}  // namespace
}  // namespace arl
