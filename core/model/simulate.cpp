// Discrete-event simulation of a schedule over a link model (see model.h for the rules).
//
// Every cross-rank dependency is a message, and a message's arrival time is fixed once its
// sender has reached the send, so ranks can be advanced one at a time, each in program order,
// as far as their received messages allow: the times come out the same as with a global
// event queue, at O(ops) cost. A round in which no rank advances means some receive is never
// matched.
#include <algorithm>
#include <cmath>
#include <deque>
#include <string>

#include "base/errors.h"
#include "model/model.h"

namespace arl {

LinkModel LinkModel::fromParams(const ModelParams& p) {
  LinkModel m;
  m.defaults.bytesPerSecond = p.beta > 0 ? 1.0 / p.beta : 0;
  m.defaults.latencySeconds = p.alpha;
  m.reduceBytesPerSecond = p.gamma > 0 ? 1.0 / p.gamma : 0;
  return m;
}

LinkParams LinkModel::link(int from, int to) const {
  auto it = overrides.find({from, to});
  return it == overrides.end() ? defaults : it->second;
}

double LinkModel::reduceRate(int rank) const {
  auto it = rankReduceBytesPerSecond.find(rank);
  return it == rankReduceBytesPerSecond.end() ? reduceBytesPerSecond : it->second;
}

void LinkModel::setLinkBothWays(int a, int b, LinkParams lp) {
  overrides[{a, b}] = lp;
  overrides[{b, a}] = lp;
}

namespace {

// Seconds to move `bytes` at `rate` bytes/s; a rate of 0 or less means infinitely fast.
double duration(double bytes, double rate) { return rate > 0 ? bytes / rate : 0.0; }

int64_t toNs(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e9)); }

struct RankState {
  size_t pc = 0;               // next op
  double t = 0;                // when the rank's own work (program order) is free
  double portFree = 0;         // when its outbound port is free
  std::deque<double> pending;  // completion times of outstanding sends, oldest first
  double lastSendEnd = 0;
};

// One simulation: the ranks' states, the channels' arrival times and the timeline so far.
class Simulation {
 public:
  Simulation(const Schedule& s, const LinkModel& links, const SimOptions& opt)
      : s_(s),
        links_(links),
        opt_(opt),
        n_(static_cast<size_t>(s.nranks)),
        elem_(static_cast<double>(dtypeSize(opt.dtype))),
        chunks_(opt.telemetry == TelemetryLevel::Chunks),
        steps_(opt.telemetry != TelemetryLevel::Off),
        st_(n_),
        arrivals_(n_ * n_) {
    tl_.rankSeconds.assign(n_, 0.0);
  }

  ModelTimeline run() {
    finishEmptyRanks();
    while (finished_ < n_) {
      bool progressed = false;
      for (size_t r = 0; r < n_; ++r) {
        while (st_[r].pc < s_.ranks[r].size() && advance(r)) progressed = true;
      }
      if (!progressed && finished_ < n_) throwDeadlock();
    }
    for (double d : tl_.rankSeconds) tl_.totalSeconds = std::max(tl_.totalSeconds, d);
    std::stable_sort(
        tl_.events.begin(), tl_.events.end(),
        [](const TelemetryEvent& a, const TelemetryEvent& b) { return a.tNs < b.tNs; });
    return std::move(tl_);
  }

 private:
  void emit(int rank, const Op& op, EventKind kind, int peer, double t) {
    TelemetryEvent e;
    e.runId = opt_.runId;
    e.iteration = opt_.iteration;
    e.rank = rank;
    e.step = op.step;
    e.kind = kind;
    e.phase = static_cast<uint8_t>(op.phase);
    e.peer = peer;
    e.chunk = op.chunk;
    e.offset = opWritesDst(op.kind) ? op.dst.offset : op.src.offset;
    e.bytes = op.count * dtypeSize(opt_.dtype);
    e.tNs = toNs(t);
    e.provenance = op.provenance;
    tl_.events.push_back(e);
  }

  void emitIterationEnd(int rank, uint32_t step, double t) {
    TelemetryEvent e;
    e.runId = opt_.runId;
    e.iteration = opt_.iteration;
    e.rank = rank;
    e.step = step;
    e.kind = EventKind::IterationEnd;
    e.tNs = toNs(t);
    tl_.events.push_back(e);
  }

  // Ranks with nothing to do are done at time 0.
  void finishEmptyRanks() {
    for (size_t r = 0; r < n_; ++r) {
      if (!s_.ranks[r].empty()) continue;
      ++finished_;
      if (steps_) emitIterationEnd(static_cast<int>(r), 0, 0);
    }
  }

  // Advances rank r by its next op; false when that op waits for a message not yet sent.
  bool advance(size_t r) {
    RankState& rs = st_[r];
    const Op& op = s_.ranks[r][rs.pc];
    const int rank = static_cast<int>(r);
    const double bytes = static_cast<double>(op.count) * elem_;
    double t = rs.t;
    double ready = t;  // when a payload to send is ready
    if (opRecvs(op.kind)) {
      if (!receive(r, op, bytes, t, ready)) return false;
    } else if (op.kind == OpKind::Copy) {
      t += duration(bytes, links_.copyBytesPerSecond);
    }
    if (opSends(op.kind)) send(r, op, bytes, ready, t);
    rs.t = t;
    ++rs.pc;
    const auto& ops = s_.ranks[r];
    const bool lastOfStep = rs.pc == ops.size() || ops[rs.pc].step != op.step;
    if (steps_ && lastOfStep) emit(rank, op, EventKind::StepEnd, -1, std::max(t, rs.lastSendEnd));
    if (rs.pc == ops.size()) finishRank(r, op);
    return true;
  }

  // The receive of `op`, then its reduction or copy; advances t and the payload's ready time.
  bool receive(size_t r, const Op& op, double bytes, double& t, double& ready) {
    const int rank = static_cast<int>(r);
    ARL_ENFORCE(op.recvPeer >= 0 && op.recvPeer < s_.nranks,
                "rank " << rank << " op " << st_[r].pc << " receives from " << op.recvPeer);
    auto& ch = arrivals_[static_cast<size_t>(op.recvPeer) * n_ + r];
    if (ch.empty()) return false;  // its message has not been sent yet
    t = std::max(t, ch.front());
    ch.pop_front();
    if (chunks_) emit(rank, op, EventKind::RecvEnd, op.recvPeer, t);
    ready = t;  // RecvCopySend forwards the payload as received
    if (opReduces(op.kind)) {
      t += duration(bytes, links_.reduceRate(rank));
      if (chunks_) emit(rank, op, EventKind::ReduceEnd, op.recvPeer, t);
      ready = t;
    } else if (opWritesDst(op.kind)) {
      t += duration(bytes, links_.copyBytesPerSecond);
    }
    return true;
  }

  // The send of `op`: through the rank's port, with at most `inflight` sends outstanding.
  void send(size_t r, const Op& op, double bytes, double ready, double& t) {
    RankState& rs = st_[r];
    const int rank = static_cast<int>(r);
    ARL_ENFORCE(op.sendPeer >= 0 && op.sendPeer < s_.nranks,
                "rank " << rank << " op " << rs.pc << " sends to " << op.sendPeer);
    // Bounded outstanding sends: wait for the oldest to leave the port.
    while (!rs.pending.empty() && rs.pending.front() <= t) rs.pending.pop_front();
    if (static_cast<int>(rs.pending.size()) >= opt_.inflight) {
      t = std::max(t, rs.pending.front());
      rs.pending.pop_front();
    }
    const LinkParams lp = links_.link(rank, op.sendPeer);
    const double start = std::max({ready, t, rs.portFree});
    const double end = start + duration(bytes, lp.bytesPerSecond);
    rs.portFree = end;
    rs.lastSendEnd = std::max(rs.lastSendEnd, end);
    rs.pending.push_back(end);
    arrivals_[r * n_ + static_cast<size_t>(op.sendPeer)].push_back(end + lp.latencySeconds);
    if (chunks_) {
      emit(rank, op, EventKind::SendStart, op.sendPeer, start);
      emit(rank, op, EventKind::SendEnd, op.sendPeer, end);
    }
  }

  void finishRank(size_t r, const Op& last) {
    const RankState& rs = st_[r];
    const double done = std::max(rs.t, rs.lastSendEnd);
    tl_.rankSeconds[r] = done;
    if (steps_) emitIterationEnd(static_cast<int>(r), last.step, done);
    ++finished_;
  }

  [[noreturn]] void throwDeadlock() const {
    for (size_t r = 0; r < n_; ++r) {
      if (st_[r].pc < s_.ranks[r].size()) {
        const Op& op = s_.ranks[r][st_[r].pc];
        throw ConfigError("model: rank " + std::to_string(r) + " op " + std::to_string(st_[r].pc) +
                          " (step " + std::to_string(op.step) + ") waits for a message from rank " +
                          std::to_string(op.recvPeer) + " that is never sent");
      }
    }
    ARL_ENFORCE(false, "no progress, yet every rank is done");
  }

  const Schedule& s_;
  const LinkModel& links_;
  const SimOptions& opt_;
  size_t n_;
  double elem_;
  bool chunks_;
  bool steps_;
  ModelTimeline tl_;
  std::vector<RankState> st_;
  // arrivals_[from * n + to]: arrival times of messages sent on that channel and not yet
  // consumed by the receiver.
  std::vector<std::deque<double>> arrivals_;
  size_t finished_ = 0;
};

}  // namespace

ModelTimeline simulate(const Schedule& s, const LinkModel& links, const SimOptions& opt) {
  ARL_ENFORCE(opt.inflight >= 1, "inflight " << opt.inflight);
  ARL_ENFORCE(static_cast<int>(s.ranks.size()) == s.nranks,
              s.ranks.size() << " op lists for " << s.nranks << " ranks");
  return Simulation(s, links, opt).run();
}

}  // namespace arl
