// The timeline of a run, built from its telemetry: every message that travelled from one rank
// to another (a Transfer: which slice of which chunk, when it was sent and when it arrived)
// and what each rank was doing when (an Interval: sending, receiving, reducing, a step, an
// iteration). The Perfetto trace draws it (export/); the window's animation moves chunks
// between ranks from it.
//
// Pairing. A send (SendStart, with the SendEnd of the same rank, iteration, peer, step, chunk
// and offset) and a receive (RecvEnd) are one message when they agree on sender, receiver,
// iteration, step, chunk, bytes and provenance: the message's signature. Among messages of one
// signature (the slices of one chunk) the k-th send is the k-th receive, as the data planes
// deliver them in order. When a signature's sends and receives differ in number, or their
// offsets do not keep one difference, events of it were lost and which ones cannot be known:
// none of them is paired, all are counted as unmatched. Losses on one side only (all sends or
// all receives of a rank, a full sink) and the coordinator's (it keeps a prefix of a run's
// telemetry) are therefore never mis-paired. One loss cannot be told from no loss: the first
// slice's send and the last slice's receive of one chunk, and nothing else of it; the slices
// between are then paired one off.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "exec/telemetry.h"

namespace arl {

// One message: a slice of a chunk that `sender` sent to `receiver`. Times are the events'
// (worker clocks aligned to the coordinator's).
struct Transfer {
  uint64_t runId = 0;
  uint32_t iteration = 0;
  uint32_t step = 0;
  uint8_t phase = 0;  // arl::Phase
  int sender = -1;
  int receiver = -1;
  uint32_t chunk = 0;
  uint64_t offset = 0;      // elements, in the sender's buffers
  uint64_t recvOffset = 0;  // elements, where it landed or was reduced on the receiver
  uint64_t bytes = 0;
  uint64_t provenance = 0;  // ranks whose contributions the payload holds
  int64_t sendStartNs = 0;
  int64_t sendEndNs = 0;  // the sender's send completed; sendStartNs when its event was lost
  int64_t recvEndNs = 0;  // the receiver had the whole payload
  size_t sendEvent = 0;   // index of the SendStart in the events the timeline was built from
  size_t recvEvent = 0;   // index of the RecvEnd
};

// The lab's activities, then NCCL's (from the Nccl* events, exec/nccl_events.h), then a
// training step's compute (from the Compute* events).
enum class Activity : uint8_t {
  Iteration,
  Step,
  Send,
  Recv,
  Reduce,
  NcclGroup,
  NcclColl,
  NcclKernel,
  NcclSend,
  NcclRecv,
  Forward,
  Backward,
  Optimizer
};
constexpr bool isNcclActivity(Activity a) {
  return a >= Activity::NcclGroup && a <= Activity::NcclRecv;
}
constexpr bool isComputeActivity(Activity a) { return a >= Activity::Forward; }

// What one rank did from startNs to endNs (endNs >= startNs).
//   Send: SendStart to SendEnd (zero-length when the end was lost).
//   Recv: waiting for a message: from its send's start, or the rank's previous arrival if
//         later, to its RecvEnd (zero-length when the send is unknown).
//   Reduce: from the RecvEnd the reduction consumed to ReduceEnd.
//   Step: from the rank's previous StepEnd in the iteration (or the iteration's start) to
//         this StepEnd.
//   Iteration: the rank's measured iteration time, ending at its IterationEnd (only for
//         iterations given an IterationTime).
// NCCL's, each ending at the event named (`event`):
//   NcclGroup: NcclGroupStart to NcclGroupEnd.
//   NcclColl: from NcclColl (NCCL started the collective on the host) to the last
//         NcclKernelEnd of the rank's iteration (zero-length without kernel events).
//   NcclKernel: a channel's NcclKernelStart to its NcclKernelEnd (GPU times).
//   NcclSend, NcclRecv: a proxy step's start to its end (peer: the remote rank).
// An NCCL end without its start (lost) makes no interval.
// A training step's compute, from its Compute* event (which holds both ends):
//   Forward, Backward: one layer's pass (the layer: the event's chunk); Optimizer: the update.
struct Interval {
  Activity activity = Activity::Step;
  int rank = -1;
  int peer = -1;  // Send: the receiver; Recv and Reduce: the sender; otherwise -1
  int64_t startNs = 0;
  int64_t endNs = 0;
  size_t event = 0;       // the event that ended it (a Send: its SendStart), for its details
  int64_t transfer = -1;  // Send and Recv of a paired message: index into transfers()
};

// A rank's measured time of one timed iteration (RankIteration of a run's result).
struct IterationTime {
  int rank = -1;
  uint32_t iteration = 0;
  int64_t timeNs = 0;
};

struct TimelineStats {
  uint64_t transfers = 0;
  uint64_t unmatchedSends = 0;    // sends whose receive is not in the telemetry (or ambiguous)
  uint64_t unmatchedRecvs = 0;    // receives whose send is not in the telemetry (or ambiguous)
  uint64_t unpairedSendEnds = 0;  // SendEnds without their SendStart
};

class Timeline {
 public:
  // Builds the timeline of `events` (one run's telemetry, or several runs': runs never pair
  // with each other; any order). Takes O(n log n) time and keeps no reference to `events`.
  explicit Timeline(const std::vector<TelemetryEvent>& events,
                    const std::vector<IterationTime>& iterations = {});

  // Paired messages, sorted by sendStartNs.
  const std::vector<Transfer>& transfers() const { return transfers_; }
  // Every rank's activities, sorted by startNs.
  const std::vector<Interval>& intervals() const { return intervals_; }
  const TimelineStats& stats() const { return stats_; }

  // Indices into transfers() of the messages in flight at `t` (sendStartNs <= t < recvEndNs),
  // in start order. Cost: a binary search plus the transfers that started within the longest
  // flight before `t`.
  std::vector<size_t> inFlightAt(int64_t t) const;
  // Index of the first transfer that starts at or after `t` (transfers().size() when none):
  // a frame loop that moves forward in time walks on from here.
  size_t firstStartingAt(int64_t t) const;
  // Where a transfer is at `t`, from 0 (sending started) to 1 (arrived), clamped.
  static double progress(const Transfer& x, int64_t t);

 private:
  std::vector<Transfer> transfers_;
  std::vector<Interval> intervals_;
  TimelineStats stats_;
  int64_t longestFlightNs_ = 0;
};

}  // namespace arl
