#include "schedule/play_rank.h"

#include <algorithm>
#include <bit>
#include <map>
#include <utility>

#include "schedule/generators.h"
#include "schedule/verifier.h"

namespace arl {

std::string_view toString(ArrivalAction a) { return a == ArrivalAction::Add ? "add" : "copy"; }

std::string maskText(uint64_t mask) {
  std::string out = "{";
  for (int r = 0; r < 64; ++r) {
    if ((mask >> r) & 1U) {
      if (out.size() > 1) out += ",";
      out += std::to_string(r);
    }
  }
  return out + "}";
}

std::string describe(const PlayMove& m) {
  switch (m.kind) {
    case PlayMove::Kind::Send:
      return "send chunk " + std::to_string(m.chunk) + " to rank " + std::to_string(m.peer);
    case PlayMove::Kind::Arrival:
      return std::string(toString(m.action)) + " chunk " + std::to_string(m.chunk) + " from rank " +
             std::to_string(m.peer);
    case PlayMove::Kind::EndStep: return "end the step";
  }
  return {};
}

namespace {

std::string stepText(uint32_t step) { return "step " + std::to_string(step + 1); }

uint64_t allRanks(int n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

// The elements of the vector an op moves: where it writes, else where it reads (allreduce's
// Input and Output are indexed alike; play schedules use no Scratch).
uint64_t offsetOf(const Op& op) { return opWritesDst(op.kind) ? op.dst.offset : op.src.offset; }

}  // namespace

Schedule RankGame::playSchedule(std::string_view algorithm, int nranks, int ranksPerHost) {
  GenParams p;
  p.collective = Collective::AllReduce;
  p.nranks = nranks;
  p.count = 2 * static_cast<uint64_t>(std::max(1, nranks));
  p.sliceElems = p.count;  // one slice per chunk
  p.ranksPerHost = ranksPerHost;
  Schedule s = generate(algorithm, p);
  const VerifyResult v = annotate(s);
  if (!v.ok) throw GenError("play a rank: the schedule does not verify: " + v.message);
  return s;
}

RankGame::RankGame(Schedule s, int rank) : s_(std::move(s)), rank_(rank) {
  const int n = s_.nranks;
  if (n < 2 || n > 64) throw GenError("play a rank: ranks must be in 2..64");
  if (rank < 0 || rank >= n) {
    throw GenError("play a rank: rank " + std::to_string(rank) + " must be in 0.." +
                   std::to_string(n - 1));
  }
  if (s_.collective != Collective::AllReduce) throw GenError("play a rank: allreduce only");
  if (rank >= resultRanks(s_)) {
    throw GenError("play a rank: rank " + std::to_string(rank) +
                   " is the switch, which holds no vector of its own; play one of ranks 0.." +
                   std::to_string(resultRanks(s_) - 1));
  }
  for (const auto& ops : s_.ranks) {
    for (const Op& op : ops) {
      if (op.slice != 0) {
        throw GenError("play a rank: one slice per chunk (chunk " + std::to_string(op.chunk) +
                       " has slice " + std::to_string(op.slice) + " at " + stepText(op.step) + ")");
      }
      nchunks_ = std::max(nchunks_, op.chunk + 1);
    }
  }
  // The mask each receive gets: the k-th message on a channel is the k-th send on it.
  arrivalMask_.resize(static_cast<size_t>(n));
  std::map<std::pair<int, int>, std::vector<uint64_t>> sent;
  for (int r = 0; r < n; ++r) {
    const auto& ops = s_.ranks[static_cast<size_t>(r)];
    arrivalMask_[static_cast<size_t>(r)].assign(ops.size(), 0);
    for (const Op& op : ops) {
      if (opSends(op.kind)) sent[{r, op.sendPeer}].push_back(op.provenance);
    }
  }
  std::map<std::pair<int, int>, size_t> taken;
  for (int r = 0; r < n; ++r) {
    const auto& ops = s_.ranks[static_cast<size_t>(r)];
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!opRecvs(ops[i].kind)) continue;
      const auto key = std::make_pair(static_cast<int>(ops[i].recvPeer), r);
      const size_t k = taken[key]++;
      const auto& masks = sent[key];
      if (k < masks.size()) arrivalMask_[static_cast<size_t>(r)][i] = masks[k];
    }
  }
  for (const auto& ops : s_.ranks) {
    for (const Op& op : ops) {
      if ((opWritesDst(op.kind) && op.dst.buf == Buffer::Scratch) ||
          (!opWritesDst(op.kind) && op.src.buf == Buffer::Scratch))
        throw GenError("play a rank: the schedule uses scratch space");
    }
  }
  holds_.assign(s_.count, uint64_t{1} << rank_);
  enterStep(0);
}

Phase RankGame::phase() const {
  for (const auto& ops : s_.ranks) {
    for (const Op& op : ops) {
      if (op.step == step_) return op.phase;
    }
  }
  return Phase::Local;
}

void RankGame::enterStep(uint32_t step) {
  step_ = step;
  expected_.clear();
  if (done()) return;
  const auto& ops = s_.ranks[static_cast<size_t>(rank_)];
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.step != step) continue;
    if (opRecvs(op.kind)) {
      PlayMove m{PlayMove::Kind::Arrival, op.chunk, op.recvPeer,
                 opReduces(op.kind) ? ArrivalAction::Add : ArrivalAction::Copy};
      expected_.push_back(
          {m, arrivalMask_[static_cast<size_t>(rank_)][i], offsetOf(op), op.count, false});
    }
    if (opSends(op.kind)) {
      PlayMove m{PlayMove::Kind::Send, op.chunk, op.sendPeer, ArrivalAction::Add};
      expected_.push_back({m, op.provenance, offsetOf(op), op.count, false});
    }
  }
}

std::vector<PlayTransfer> RankGame::pendingArrivals() const {
  std::vector<PlayTransfer> out;
  for (const Expected& e : expected_) {
    if (!e.made && e.move.kind == PlayMove::Kind::Arrival)
      out.push_back({e.move.peer, rank_, e.move.chunk, e.mask, e.offset, e.count});
  }
  return out;
}

std::vector<PlayMove> RankGame::madeThisStep() const {
  std::vector<PlayMove> out;
  for (const Expected& e : expected_) {
    if (e.made) out.push_back(e.move);
  }
  return out;
}

std::vector<PlayTransfer> RankGame::transfersAt(uint32_t step) const {
  std::vector<PlayTransfer> out;
  for (int r = 0; r < s_.nranks; ++r) {
    for (const Op& op : s_.ranks[static_cast<size_t>(r)]) {
      if (op.step == step && opSends(op.kind))
        out.push_back({r, op.sendPeer, op.chunk, op.provenance, offsetOf(op), op.count});
    }
  }
  return out;
}

std::vector<PlayMove> RankGame::movesAt(uint32_t step) const {
  std::vector<PlayMove> out;
  for (const Op& op : s_.ranks[static_cast<size_t>(rank_)]) {
    if (op.step != step) continue;
    if (opRecvs(op.kind)) {
      out.push_back({PlayMove::Kind::Arrival, op.chunk, op.recvPeer,
                     opReduces(op.kind) ? ArrivalAction::Add : ArrivalAction::Copy});
    }
    if (opSends(op.kind)) out.push_back({PlayMove::Kind::Send, op.chunk, op.sendPeer});
  }
  return out;
}

int RankGame::find(const PlayMove& m) const {
  for (size_t i = 0; i < expected_.size(); ++i) {
    if (!expected_[i].made && expected_[i].move == m) return static_cast<int>(i);
  }
  return -1;
}

PlayVerdict RankGame::check(const PlayMove& m) const {
  PlayVerdict v;
  if (done()) {
    v.why = "the exercise is over: every step has been played";
    return v;
  }
  const bool allMade =
      std::all_of(expected_.begin(), expected_.end(), [](const Expected& e) { return e.made; });
  if (m.kind == PlayMove::Kind::EndStep ? allMade : find(m) >= 0) {
    v.ok = true;
    return v;
  }
  return explain(m);
}

// The reason a move is refused, and the move the schedule makes instead.
PlayVerdict RankGame::explain(const PlayMove& m) const {
  PlayVerdict v;
  const std::string at = " at " + stepText(step_);
  const uint64_t all = allRanks(resultRanks(s_));
  // The right move: a pending one of the same kind (and chunk) first, else any pending one,
  // else ending the step.
  int right = -1;
  for (int pass = 0; pass < 3 && right < 0; ++pass) {
    for (size_t i = 0; i < expected_.size() && right < 0; ++i) {
      const Expected& e = expected_[i];
      if (e.made) continue;
      const bool sameKind = e.move.kind == m.kind;
      if ((pass == 0 && sameKind && e.move.chunk == m.chunk) || (pass == 1 && sameKind) ||
          pass == 2)
        right = static_cast<int>(i);
    }
  }
  v.hasRight = true;
  v.right = right >= 0 ? expected_[static_cast<size_t>(right)].move
                       : PlayMove{PlayMove::Kind::EndStep, 0, -1, ArrivalAction::Add};
  const std::string instead = right >= 0 ? "; the schedule's move: " + describe(v.right)
                                         : "; you have nothing more to do" + at;
  auto made = [&](const PlayMove& x) {
    return std::any_of(expected_.begin(), expected_.end(),
                       [&](const Expected& e) { return e.made && e.move == x; });
  };
  if (m.kind == PlayMove::Kind::EndStep) {
    v.why = "not yet: you still " + describe(v.right) + at;
    return v;
  }
  if (m.peer < 0 || m.peer >= s_.nranks) {
    v.why = "there is no rank " + std::to_string(m.peer) + instead;
    return v;
  }
  if (m.peer == rank_) {
    v.why = "rank " + std::to_string(m.peer) + " is you: a rank does not send to itself" + instead;
    return v;
  }
  if (m.chunk >= nchunks_) {
    v.why = "there is no chunk " + std::to_string(m.chunk) + " (chunks 0.." +
            std::to_string(nchunks_ - 1) + ")" + instead;
    return v;
  }
  const std::string chunk = "chunk " + std::to_string(m.chunk);
  if (made(m)) {
    v.why = "you have already " +
            std::string(m.kind == PlayMove::Kind::Send ? "sent " + chunk + " to"
                                                       : "taken " + chunk + " from") +
            " rank " + std::to_string(m.peer) + at + instead;
    return v;
  }
  if (m.kind == PlayMove::Kind::Send) {
    for (const Expected& e : expected_) {
      if (!e.made && e.move.kind == PlayMove::Kind::Send && e.move.chunk == m.chunk) {
        v.why = chunk + " goes to rank " + std::to_string(e.move.peer) + at + ", not to rank " +
                std::to_string(m.peer) + instead;
        return v;
      }
    }
    for (const PlayTransfer& t : transfersAt(step_)) {
      if (t.from != rank_ && t.chunk == m.chunk) {
        v.why = chunk + " is not yours to send" + at + ": rank " + std::to_string(t.from) +
                " holds its " + (t.mask == all ? "full sum" : "partial sum " + maskText(t.mask)) +
                " and sends it to rank " + std::to_string(t.to) + instead;
        return v;
      }
    }
    v.why = "no rank sends " + chunk + at + instead;
    return v;
  }
  // An arrival.
  for (const Expected& e : expected_) {
    if (e.made || e.move.kind != PlayMove::Kind::Arrival || e.move.chunk != m.chunk ||
        e.move.peer != m.peer)
      continue;
    const std::string from = " from rank " + std::to_string(m.peer);
    if (e.move.action == ArrivalAction::Add) {
      v.why = "copying would throw your own contribution away: " + chunk + from + " carries " +
              maskText(e.mask) + ", your copy holds " + maskText(holds_[e.offset]) +
              ", and the sum needs both: add it";
    } else {
      const uint64_t twice = e.mask & holds_[e.offset];
      v.why = chunk + from + " carries " + maskText(e.mask) +
              (e.mask == all ? ", the full sum" : "") +
              (twice != 0 ? ", which already holds " + maskText(twice) +
                                " of your copy: adding would count it twice"
                          : ": it replaces what you hold") +
              "; copy it";
    }
    return v;
  }
  std::string arriving;
  for (const Expected& e : expected_) {
    if (!e.made && e.move.kind == PlayMove::Kind::Arrival) {
      arriving += (arriving.empty() ? "" : ", ") + std::string("chunk ") +
                  std::to_string(e.move.chunk) + " from rank " + std::to_string(e.move.peer);
    }
  }
  v.why = chunk + " does not arrive from rank " + std::to_string(m.peer) + at +
          (arriving.empty() ? ": nothing more arrives" : ": what arrives is " + arriving) + instead;
  return v;
}

void RankGame::make(int index) {
  Expected& e = expected_[static_cast<size_t>(index)];
  e.made = true;
  if (e.move.kind == PlayMove::Kind::Arrival) {
    for (uint64_t i = e.offset; i < e.offset + e.count && i < holds_.size(); ++i)
      holds_[i] = e.move.action == ArrivalAction::Add ? (holds_[i] | e.mask) : e.mask;
  }
}

PlayVerdict RankGame::play(const PlayMove& m) {
  PlayVerdict v = check(m);
  if (done()) return v;
  const PlayMove& made = v.ok ? m : v.right;
  if (v.ok) {
    if (m.kind != PlayMove::Kind::EndStep) ++accepted_;
  } else {
    ++refused_;
  }
  if (made.kind == PlayMove::Kind::EndStep) {
    enterStep(step_ + 1);
  } else {
    make(find(made));
  }
  return v;
}

}  // namespace arl
