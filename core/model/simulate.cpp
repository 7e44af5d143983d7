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

}  // namespace

ModelTimeline simulate(const Schedule& s, const LinkModel& links, const SimOptions& opt) {
  ARL_ENFORCE(opt.inflight >= 1, "inflight " << opt.inflight);
  ARL_ENFORCE(static_cast<int>(s.ranks.size()) == s.nranks,
              s.ranks.size() << " op lists for " << s.nranks << " ranks");
  const auto n = static_cast<size_t>(s.nranks);
  const double elem = static_cast<double>(dtypeSize(opt.dtype));
  const bool chunks = opt.telemetry == TelemetryLevel::Chunks;
  const bool steps = opt.telemetry != TelemetryLevel::Off;

  ModelTimeline tl;
  tl.rankSeconds.assign(n, 0.0);
  std::vector<RankState> st(n);
  // arrivals[from * n + to]: arrival times of messages sent so far on that channel, and how
  // many the receiver has consumed.
  std::vector<std::deque<double>> arrivals(n * n);

  auto emit = [&](int rank, const Op& op, EventKind kind, int peer, double t) {
    TelemetryEvent e;
    e.runId = opt.runId;
    e.iteration = opt.iteration;
    e.rank = rank;
    e.step = op.step;
    e.kind = kind;
    e.phase = static_cast<uint8_t>(op.phase);
    e.peer = peer;
    e.chunk = op.chunk;
    e.offset = opWritesDst(op.kind) ? op.dst.offset : op.src.offset;
    e.bytes = op.count * dtypeSize(opt.dtype);
    e.tNs = toNs(t);
    e.provenance = op.provenance;
    tl.events.push_back(e);
  };

  size_t finished = 0;
  for (size_t r = 0; r < n; ++r) {
    if (!s.ranks[r].empty()) continue;
    ++finished;
    if (steps) {
      TelemetryEvent e;
      e.runId = opt.runId;
      e.iteration = opt.iteration;
      e.rank = static_cast<int32_t>(r);
      e.kind = EventKind::IterationEnd;
      tl.events.push_back(e);
    }
  }
  while (finished < n) {
    bool progressed = false;
    for (size_t r = 0; r < n; ++r) {
      RankState& rs = st[r];
      const auto& ops = s.ranks[r];
      const int rank = static_cast<int>(r);
      while (rs.pc < ops.size()) {
        const Op& op = ops[rs.pc];
        const double bytes = static_cast<double>(op.count) * elem;
        double t = rs.t;
        double ready = t;  // when a payload to send is ready
        if (opRecvs(op.kind)) {
          ARL_ENFORCE(op.recvPeer >= 0 && op.recvPeer < s.nranks,
                      "rank " << rank << " op " << rs.pc << " receives from " << op.recvPeer);
          auto& ch = arrivals[static_cast<size_t>(op.recvPeer) * n + r];
          if (ch.empty()) break;  // its message has not been sent yet
          t = std::max(t, ch.front());
          ch.pop_front();
          if (chunks) emit(rank, op, EventKind::RecvEnd, op.recvPeer, t);
          ready = t;  // RecvCopySend forwards the payload as received
          if (opReduces(op.kind)) {
            t += duration(bytes, links.reduceRate(rank));
            if (chunks) emit(rank, op, EventKind::ReduceEnd, op.recvPeer, t);
            ready = t;
          } else if (opWritesDst(op.kind)) {
            t += duration(bytes, links.copyBytesPerSecond);
          }
        } else if (op.kind == OpKind::Copy) {
          t += duration(bytes, links.copyBytesPerSecond);
        }
        if (opSends(op.kind)) {
          ARL_ENFORCE(op.sendPeer >= 0 && op.sendPeer < s.nranks,
                      "rank " << rank << " op " << rs.pc << " sends to " << op.sendPeer);
          // Bounded outstanding sends: wait for the oldest to leave the port.
          while (!rs.pending.empty() && rs.pending.front() <= t) rs.pending.pop_front();
          if (static_cast<int>(rs.pending.size()) >= opt.inflight) {
            t = std::max(t, rs.pending.front());
            rs.pending.pop_front();
          }
          const LinkParams lp = links.link(rank, op.sendPeer);
          const double start = std::max({ready, t, rs.portFree});
          const double end = start + duration(bytes, lp.bytesPerSecond);
          rs.portFree = end;
          rs.lastSendEnd = std::max(rs.lastSendEnd, end);
          rs.pending.push_back(end);
          arrivals[r * n + static_cast<size_t>(op.sendPeer)].push_back(end + lp.latencySeconds);
          if (chunks) {
            emit(rank, op, EventKind::SendStart, op.sendPeer, start);
            emit(rank, op, EventKind::SendEnd, op.sendPeer, end);
          }
        }
        rs.t = t;
        ++rs.pc;
        progressed = true;
        const bool lastOfStep = rs.pc == ops.size() || ops[rs.pc].step != op.step;
        if (steps && lastOfStep)
          emit(rank, op, EventKind::StepEnd, -1, std::max(t, rs.lastSendEnd));
        if (rs.pc == ops.size()) {
          const double done = std::max(rs.t, rs.lastSendEnd);
          tl.rankSeconds[r] = done;
          if (steps) {
            TelemetryEvent e;
            e.runId = opt.runId;
            e.iteration = opt.iteration;
            e.rank = rank;
            e.step = op.step;
            e.kind = EventKind::IterationEnd;
            e.tNs = toNs(done);
            tl.events.push_back(e);
          }
          ++finished;
        }
      }
    }
    if (!progressed && finished < n) {
      for (size_t r = 0; r < n; ++r) {
        if (st[r].pc < s.ranks[r].size()) {
          const Op& op = s.ranks[r][st[r].pc];
          throw ConfigError("model: rank " + std::to_string(r) + " op " + std::to_string(st[r].pc) +
                            " (step " + std::to_string(op.step) +
                            ") waits for a message from rank " + std::to_string(op.recvPeer) +
                            " that is never sent");
        }
      }
    }
  }
  for (double d : tl.rankSeconds) tl.totalSeconds = std::max(tl.totalSeconds, d);
  std::stable_sort(tl.events.begin(), tl.events.end(),
                   [](const TelemetryEvent& a, const TelemetryEvent& b) { return a.tNs < b.tNs; });
  return tl;
}

}  // namespace arl
