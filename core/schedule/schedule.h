// A schedule is plain data: for every rank, the ordered list of operations it performs.
// Generators (generators.h) produce schedules; the verifier proves them; the executor runs
// them; the cost model times them. Nothing here knows sockets, threads or clocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/types.h"

namespace arl {

// NCCL's primitive step kinds, plus a purely local Copy.
//
// Data flow of each kind (`src` is a local operand, `dst` a local destination):
//   Send               payload = src                      -> sendPeer
//   Recv               payload <- recvPeer ; dst = payload
//   RecvReduceSend     payload <- recvPeer ; sendPeer <- (payload op src)
//   RecvReduceCopySend payload <- recvPeer ; dst = payload op src ; sendPeer <- dst
//   RecvCopySend       payload <- recvPeer ; dst = payload ; sendPeer <- payload
//   RecvReduceCopy     payload <- recvPeer ; dst = payload op src
//   Copy               dst = src (no peer)
enum class OpKind : uint8_t {
  Send,
  Recv,
  RecvReduceSend,
  RecvReduceCopySend,
  RecvCopySend,
  RecvReduceCopy,
  Copy,
};

// The phase an op belongs to, for display and telemetry.
enum class Phase : uint8_t { ReduceScatter, AllGather, Reduce, Broadcast, Local };

// The three buffers of a rank. Input holds the rank's contribution (read-only for the
// schedule), Output receives the result, Scratch is temporary space some algorithms need.
// When a collective runs in place, Input aliases a window of Output (see inPlaceOffset()).
enum class Buffer : uint8_t { Input, Output, Scratch };

struct BufRef {
  Buffer buf = Buffer::Input;
  uint64_t offset = 0;  // in elements
};

struct Op {
  OpKind kind = OpKind::Send;
  Phase phase = Phase::Local;
  int32_t sendPeer = -1;    // -1 when the op does not send
  int32_t recvPeer = -1;    // -1 when the op does not receive
  BufRef src;               // local operand (Send, *Reduce*, Copy)
  BufRef dst;               // local destination (Recv, *Copy*, Copy)
  uint64_t count = 0;       // elements moved / reduced; never 0 in a generated schedule
  uint32_t step = 0;        // algorithm step (what a teacher calls "step 3 of 2(n-1)")
  uint32_t chunk = 0;       // logical chunk id (which piece of the vector)
  uint32_t slice = 0;       // pipeline slice index within the chunk at this step
  uint64_t provenance = 0;  // rank mask of contributions in the payload; set by annotate()
};

bool opSends(OpKind k);
bool opRecvs(OpKind k);
bool opReduces(OpKind k);
bool opReadsSrc(OpKind k);
bool opWritesDst(OpKind k);
std::string_view toString(OpKind k);
std::string_view toString(Phase p);

struct Schedule {
  std::string algorithm;  // "ring", "tree", ...
  Collective collective = Collective::AllReduce;
  int nranks = 0;
  int root = 0;               // Reduce / Broadcast root
  uint64_t count = 0;         // NCCL API count: elements per rank buffer (recvcount for
                              // ReduceScatter, sendcount for AllGather)
  uint64_t sliceElems = 0;    // pipeline slice size in elements
  uint64_t inputElems = 0;    // per-rank Input size
  uint64_t outputElems = 0;   // per-rank Output size
  uint64_t scratchElems = 0;  // per-rank Scratch size (0 when unused)
  uint32_t nsteps = 0;        // number of algorithm steps (max Op::step + 1, 0 when none)
  // The last `nonResultRanks` ranks are nodes that serve the others (switch's switch): they
  // contribute nothing (their Input is not part of the collective and is never read) and
  // hold no result. The collective's ranks are 0 .. resultRanks(s) - 1.
  int nonResultRanks = 0;
  // Messages a channel must hold for the schedule to be free of deadlock (GenParams::window):
  // 1 for every schedule but a windowed ring. The verifier checks at this capacity, and a
  // data plane that runs the schedule must hold as many messages a channel.
  uint32_t window = 1;
  std::vector<std::vector<Op>> ranks;  // ranks[r] = ops of rank r in program order
};

// Element offset in Output where Input lives when the collective runs in place
// (NCCL's convention: AllGather sendbuff = recvbuff + rank*count; ReduceScatter
// recvbuff = sendbuff + rank*count, i.e. Output is inside Input; otherwise 0).
// For ReduceScatter in place it is Output that aliases Input at rank*count.
uint64_t inPlaceOffset(const Schedule& s, int rank);

// Per-rank Input and Output sizes of a collective (NCCL conventions).
uint64_t inputElemsFor(Collective c, int nranks, uint64_t count);
uint64_t outputElemsFor(Collective c, int nranks, uint64_t count);

// The ranks whose contributions the collective reduces and whose Output holds its result.
inline int resultRanks(const Schedule& s) { return s.nranks - s.nonResultRanks; }

// Total bytes rank r sends in the schedule.
uint64_t bytesSent(const Schedule& s, int rank, DataType t);

}  // namespace arl
