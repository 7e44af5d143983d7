// Play a rank: the student is one rank of a verified schedule and makes its moves step by
// step (which chunk to send, to whom, and whether to add or to copy what arrives); the other
// ranks follow the schedule. The checker accepts exactly the moves of the schedule (in any
// order within a step) and refuses every other with the reason, in the terms a teacher would
// use ("chunk 3 is not yours to send at step 1: rank 1 holds its partial sum"), and with the
// right move, which the game then makes in the student's place.
//
// A move is one of the played rank's ops seen from outside: a Send of chunk c to rank p, and
// for an op that receives, what it does with the arriving chunk (Add: reduce it into its own
// partial sum; Copy: keep it as it is). A fused op (RecvReduceSend: receive, add, send on) is
// an arrival and a send at the same step. Local copies are made by the game, not asked.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "schedule/schedule.h"

namespace arl {

enum class ArrivalAction : uint8_t { Add, Copy };
std::string_view toString(ArrivalAction a);

struct PlayMove {
  enum class Kind : uint8_t { Send, Arrival, EndStep } kind = Kind::Send;
  uint32_t chunk = 0;
  int32_t peer = -1;                          // Send: to; Arrival: from
  ArrivalAction action = ArrivalAction::Add;  // Arrival only
  bool operator==(const PlayMove&) const = default;
};
std::string describe(const PlayMove& m);  // "send chunk 3 to rank 2", "add chunk 0 from rank 1"

// One message of a step, any rank's: for drawing the step (the other ranks' moves).
struct PlayTransfer {
  int32_t from = -1;
  int32_t to = -1;
  uint32_t chunk = 0;
  uint64_t mask = 0;    // the ranks whose contributions the message carries
  uint64_t offset = 0;  // the elements of the vector it carries: [offset, offset + count)
  uint64_t count = 0;
};

struct PlayVerdict {
  bool ok = false;
  std::string why;  // empty when ok; otherwise the reason, naming the chunk, the step, the rank
  PlayMove right;   // when refused: the move the schedule makes instead (made by the game)
  bool hasRight = false;
};

class RankGame {
 public:
  // `s` must be verified and annotated (annotate()); one slice per chunk at each step.
  // Throws GenError naming what is wrong otherwise.
  RankGame(Schedule s, int rank);
  // The schedule for play: allreduce of `algorithm` on `nranks`, 2 elements per chunk and one
  // slice per chunk, verified and annotated.
  static Schedule playSchedule(std::string_view algorithm, int nranks, int ranksPerHost = 0);

  const Schedule& schedule() const { return s_; }
  int rank() const { return rank_; }
  int nranks() const { return s_.nranks; }
  uint32_t nchunks() const { return nchunks_; }
  uint32_t step() const { return step_; }
  uint32_t nsteps() const { return s_.nsteps; }
  bool done() const { return step_ >= s_.nsteps; }
  Phase phase() const;  // of the current step (Local when done)

  // The arrivals of the current step not yet decided, each with the mask it carries.
  std::vector<PlayTransfer> pendingArrivals() const;
  // Every message of step `step`, of every rank, in rank order.
  std::vector<PlayTransfer> transfersAt(uint32_t step) const;
  // The moves of the current step made so far (accepted, or made in the student's place).
  std::vector<PlayMove> madeThisStep() const;
  // The played rank's moves of step `step`, as the schedule makes them.
  std::vector<PlayMove> movesAt(uint32_t step) const;
  // The vector's elements (2 per chunk of the finest split), and the contributions the
  // played rank's copy of element i holds now. A chunk id names where a message starts; some
  // algorithms (halving-doubling) send several chunks' elements in one message.
  uint64_t elements() const { return holds_.size(); }
  uint64_t holds(uint64_t element) const { return holds_[element]; }

  // Checks a move against the schedule. Accepted: made. Refused: the reason and the right
  // move, which is made in its place (so the game goes on along the schedule). EndStep is
  // accepted once every move of the step is made, and moves to the next step.
  PlayVerdict play(const PlayMove& m);
  // The same check without making anything.
  PlayVerdict check(const PlayMove& m) const;

  // Moves right first time (sends and arrivals; ending a step is not counted), and moves
  // refused (each made in the student's place, ending a step too early included).
  int accepted() const { return accepted_; }
  int refused() const { return refused_; }

 private:
  struct Expected {
    PlayMove move;
    uint64_t mask = 0;    // what the message carries
    uint64_t offset = 0;  // the elements it carries
    uint64_t count = 0;
    bool made = false;
  };
  void enterStep(uint32_t step);
  int find(const PlayMove& m) const;  // index of the pending expected move equal to m, or -1
  PlayVerdict explain(const PlayMove& m) const;
  void make(int index);

  Schedule s_;
  int rank_ = 0;
  uint32_t nchunks_ = 0;
  uint32_t step_ = 0;
  std::vector<uint64_t> holds_;
  std::vector<Expected> expected_;
  // arrivalMask_[r][i]: the mask of the message rank r's op i receives (0 when it receives none)
  std::vector<std::vector<uint64_t>> arrivalMask_;
  int accepted_ = 0;
  int refused_ = 0;
};

// "{0,1,3}"
std::string maskText(uint64_t mask);

}  // namespace arl
