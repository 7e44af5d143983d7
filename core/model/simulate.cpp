// Discrete-event simulation of a schedule over a link model (see model.h for the rules).
//
// Ports are shared: a receiver's ingress serves every rank that sends to it, so the order in
// which sends claim ports matters, and ranks cannot be advanced one at a time. Events are
// processed in global time order from a priority queue: a rank runs its program as far as its
// received messages allow (local work touches nothing shared), and each send it issues
// becomes a claim event at the time it could start (payload ready, the sender's earlier sends
// started); a claim takes the receiver's ingress and the link when they are free, which fixes
// the message's arrival and wakes its receiver. Claims are processed in time order, so
// senders to one receiver are served first come, first served.
//
// Every event is pushed no earlier than the one being processed: a rank woken by a message
// or by a send slot resumes no earlier than the arrival or the send's start, so the claims it
// issues then are no earlier either; a rank's next claim waits for its previous one. Each op
// runs once and each send is one event: O(ops log ops). An empty queue with a rank still
// waiting means some receive is never matched.
#include <algorithm>
#include <cmath>
#include <deque>
#include <queue>
#include <string>

#include "base/errors.h"
#include "model/model.h"

namespace arl {

namespace {

// The lower of two rates where 0 means unlimited.
double minRate(double a, double b) {
  if (a <= 0) return b;
  if (b <= 0) return a;
  return std::min(a, b);
}

PortParams portAt(double bytesPerSecond) { return {bytesPerSecond, bytesPerSecond}; }

PortParams capPort(PortParams p, double rate) {
  return {minRate(p.egressBytesPerSecond, rate), minRate(p.ingressBytesPerSecond, rate)};
}

}  // namespace

LinkModel LinkModel::fromParams(const ModelParams& p, int ranksPerHost) {
  LinkModel m;
  m.port = portAt(p.beta > 0 ? 1.0 / p.beta : 0);
  m.defaults = {0, p.alpha};
  m.ranksPerHost = std::max(ranksPerHost, 0);
  m.hostPort = portAt(p.hostBeta() > 0 ? 1.0 / p.hostBeta() : 0);
  m.hostLink = {0, p.hostAlpha()};
  m.reduceBytesPerSecond = p.gamma > 0 ? 1.0 / p.gamma : 0;
  return m;
}

LinkModel LinkModel::shaped(const ModelParams& p, const LinkShaping& s, int ranksPerHost) {
  LinkModel m = fromParams(p, ranksPerHost);
  const PortParams own = m.port;  // the machine's own port, before shaping
  m.port = capPort(own, s.portBytesPerSecond);
  m.hostPort = capPort(m.hostPort, s.portBytesPerSecond);
  m.defaults.latencySeconds += s.addedLatencySeconds;
  m.hostLink.latencySeconds += s.addedLatencySeconds;
  for (const auto& [rank, rate] : s.rankPortBytesPerSecond) {
    m.rankPorts[rank] = capPort(own, rate);
    if (m.ranksPerHost <= 0) continue;
    // Inside its host a slow rank's messages are capped on their links, both ways.
    const int first = rank / m.ranksPerHost * m.ranksPerHost;
    for (int peer = first; peer < first + m.ranksPerHost; ++peer) {
      if (peer == rank) continue;
      for (const auto& dir : {std::pair{rank, peer}, std::pair{peer, rank}}) {
        LinkParams lp = m.link(dir.first, dir.second);
        lp.bytesPerSecond = minRate(lp.bytesPerSecond, rate);
        m.overrides[dir] = lp;
      }
    }
  }
  for (const auto& [dir, rate] : s.linkBytesPerSecond) {
    LinkParams lp = m.link(dir.first, dir.second);
    lp.bytesPerSecond = minRate(lp.bytesPerSecond, rate);
    m.overrides[dir] = lp;
  }
  return m;
}

bool LinkModel::sameHost(int a, int b) const {
  return ranksPerHost > 0 && a / ranksPerHost == b / ranksPerHost;
}

PortParams LinkModel::portOf(int rank, bool insideHost) const {
  if (insideHost) return hostPort;
  auto it = rankPorts.find(rank);
  return it == rankPorts.end() ? port : it->second;
}

LinkParams LinkModel::link(int from, int to) const {
  auto it = overrides.find({from, to});
  if (it != overrides.end()) return it->second;
  return sameHost(from, to) ? hostLink : defaults;
}

double LinkModel::rate(int from, int to) const {
  const bool inside = sameHost(from, to);
  return minRate(
      minRate(portOf(from, inside).egressBytesPerSecond, portOf(to, inside).ingressBytesPerSecond),
      link(from, to).bytesPerSecond);
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

// A send its rank has issued that has not claimed its ports yet.
struct IssuedSend {
  size_t op;     // index in the rank's program
  double ready;  // earliest start: the payload is ready and the rank has reached the op
};

enum class Wait : uint8_t { None, Recv, Inflight };

struct RankState {
  size_t pc = 0;                  // next op
  double t = 0;                   // when the rank's own work (program order) is free
  Wait wait = Wait::None;         // why the rank stopped, if it did
  bool received = false;          // the op at pc has done its receive and waits to send
  double ready = 0;               // ... its payload ready at this time
  std::deque<IssuedSend> issued;  // sends without ports, oldest first; the head has a claim
  std::deque<double> pending;     // ends of sends with ports still outstanding, oldest first
  double egressFree = 0, ingressFree = 0;          // network port
  double hostEgressFree = 0, hostIngressFree = 0;  // port inside the host
  double lastSendEnd = 0;
  std::vector<double> sendEnds;  // lastSendEnd after each send, in send order (for step ends)
};

// A step's end on a rank: the later of its rank time and its sends so far leaving the port,
// known once those sends have claimed their ports.
struct StepMark {
  size_t rank;
  size_t op;
  double t;
  size_t sends;  // sends the rank had issued by then
};

struct Event {
  double t;
  uint64_t seq;  // ties go first come, first served
  size_t rank;
  bool claim;  // the rank's oldest issued send claims its ports; else the rank runs
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
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
        arrivals_(n_ * n_),
        linkFree_(n_ * n_, 0.0) {
    tl_.rankSeconds.assign(n_, 0.0);
  }

  ModelTimeline run() {
    for (size_t r = 0; r < n_; ++r) push(0, r, false);
    while (!queue_.empty()) {
      const Event e = queue_.top();
      queue_.pop();
      // Every event is pushed no earlier than the one being processed (see the file comment).
      ARL_ENFORCE(e.t >= now_, "event at " << e.t << " s after one at " << now_ << " s");
      now_ = e.t;
      if (e.claim) {
        claim(e.rank, e.t);
      } else {
        runRank(e.rank);
      }
    }
    for (size_t r = 0; r < n_; ++r) {
      if (st_[r].pc < s_.ranks[r].size()) throwDeadlock();
    }
    finish();
    return std::move(tl_);
  }

 private:
  void push(double t, size_t rank, bool claim) { queue_.push({t, seq_++, rank, claim}); }

  void emit(size_t rank, const Op& op, EventKind kind, int peer, double t) {
    TelemetryEvent e;
    e.runId = opt_.runId;
    e.iteration = opt_.iteration;
    e.rank = static_cast<int>(rank);
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

  void emitIterationEnd(size_t rank, uint32_t step, double t) {
    TelemetryEvent e;
    e.runId = opt_.runId;
    e.iteration = opt_.iteration;
    e.rank = static_cast<int>(rank);
    e.step = step;
    e.kind = EventKind::IterationEnd;
    e.tNs = toNs(t);
    tl_.events.push_back(e);
  }

  // Every rank's finish time, its step ends and iteration end, events in time order.
  void finish() {
    if (steps_) {
      for (const StepMark& m : marks_) {
        const RankState& rs = st_[m.rank];
        const double sent = m.sends > 0 ? rs.sendEnds[m.sends - 1] : 0.0;
        emit(m.rank, s_.ranks[m.rank][m.op], EventKind::StepEnd, -1, std::max(m.t, sent));
      }
    }
    for (size_t r = 0; r < n_; ++r) {
      const RankState& rs = st_[r];
      const double done = std::max(rs.t, rs.lastSendEnd);
      tl_.rankSeconds[r] = done;
      tl_.totalSeconds = std::max(tl_.totalSeconds, done);
      const auto& ops = s_.ranks[r];
      if (steps_) emitIterationEnd(r, ops.empty() ? 0 : ops.back().step, done);
    }
    std::stable_sort(
        tl_.events.begin(), tl_.events.end(),
        [](const TelemetryEvent& a, const TelemetryEvent& b) { return a.tNs < b.tNs; });
  }

  void runRank(size_t r) {
    st_[r].wait = Wait::None;
    while (st_[r].pc < s_.ranks[r].size() && advance(r)) {
    }
  }

  // Advances rank r by its next op; false when that op waits (for a message not yet sent, or
  // for a send slot while its oldest send has no port yet).
  bool advance(size_t r) {
    RankState& rs = st_[r];
    const Op& op = s_.ranks[r][rs.pc];
    const double bytes = static_cast<double>(op.count) * elem_;
    if (!rs.received) {
      double t = rs.t;
      double ready = t;  // when a payload to send is ready
      if (opRecvs(op.kind)) {
        if (!receive(r, op, bytes, t, ready)) {
          rs.wait = Wait::Recv;
          return false;
        }
      } else if (op.kind == OpKind::Copy) {
        t += duration(bytes, links_.copyBytesPerSecond);
      }
      rs.t = t;
      rs.ready = ready;
      rs.received = true;
    }
    if (opSends(op.kind) && !issueSend(r, op)) {
      rs.wait = Wait::Inflight;
      return false;
    }
    rs.received = false;
    ++rs.pc;
    const auto& ops = s_.ranks[r];
    const bool lastOfStep = rs.pc == ops.size() || ops[rs.pc].step != op.step;
    if (steps_ && lastOfStep)
      marks_.push_back({r, rs.pc - 1, rs.t, rs.sendEnds.size() + rs.issued.size()});
    return true;
  }

  // The receive of `op`, then its reduction or copy; advances t and the payload's ready time.
  bool receive(size_t r, const Op& op, double bytes, double& t, double& ready) {
    ARL_ENFORCE(op.recvPeer >= 0 && op.recvPeer < s_.nranks,
                "rank " << r << " op " << st_[r].pc << " receives from " << op.recvPeer);
    auto& ch = arrivals_[static_cast<size_t>(op.recvPeer) * n_ + r];
    if (ch.empty()) return false;  // its message has no port yet
    t = std::max(t, ch.front());
    ch.pop_front();
    if (chunks_) emit(r, op, EventKind::RecvEnd, op.recvPeer, t);
    ready = t;  // RecvCopySend forwards the payload as received
    if (opReduces(op.kind)) {
      t += duration(bytes, links_.reduceRate(static_cast<int>(r)));
      if (chunks_) emit(r, op, EventKind::ReduceEnd, op.recvPeer, t);
      ready = t;
    } else if (opWritesDst(op.kind)) {
      t += duration(bytes, links_.copyBytesPerSecond);
    }
    return true;
  }

  // Issues the send of the op at pc, with at most `inflight` sends outstanding; false when
  // the rank must wait for its oldest send to get a port first.
  bool issueSend(size_t r, const Op& op) {
    RankState& rs = st_[r];
    ARL_ENFORCE(op.sendPeer >= 0 && op.sendPeer < s_.nranks,
                "rank " << r << " op " << rs.pc << " sends to " << op.sendPeer);
    while (!rs.pending.empty() && rs.pending.front() <= rs.t) rs.pending.pop_front();
    if (rs.pending.size() + rs.issued.size() >= static_cast<size_t>(opt_.inflight)) {
      if (rs.pending.empty()) return false;  // the oldest has not left: its end is not known
      rs.t = std::max(rs.t, rs.pending.front());
      rs.pending.pop_front();
    }
    rs.issued.push_back({rs.pc, std::max(rs.ready, rs.t)});
    if (rs.issued.size() == 1) pushClaim(r, 0);
    return true;
  }

  // The claim of rank r's oldest issued send: when its payload is ready and the sender's
  // port is free of its earlier sends, not before `notBefore` (sends claim in program order).
  void pushClaim(size_t r, double notBefore) {
    const RankState& rs = st_[r];
    const IssuedSend& head = rs.issued.front();
    const int to = s_.ranks[r][head.op].sendPeer;
    const bool inside = links_.sameHost(static_cast<int>(r), to);
    push(std::max({notBefore, head.ready, inside ? rs.hostEgressFree : rs.egressFree}), r, true);
  }

  // Rank r's oldest issued send starts at time tc or when the receiver's ingress and the link
  // are free, whichever is later; its message arrives the link's latency after it leaves.
  void claim(size_t r, double tc) {
    RankState& rs = st_[r];
    const IssuedSend head = rs.issued.front();
    rs.issued.pop_front();
    const Op& op = s_.ranks[r][head.op];
    const int from = static_cast<int>(r);
    const auto to = static_cast<size_t>(op.sendPeer);
    RankState& dst = st_[to];
    const bool inside = links_.sameHost(from, op.sendPeer);
    double& egress = inside ? rs.hostEgressFree : rs.egressFree;
    double& ingress = inside ? dst.hostIngressFree : dst.ingressFree;
    double& link = linkFree_[r * n_ + to];
    const double start = std::max({tc, ingress, link});
    const double bytes = static_cast<double>(op.count) * elem_;
    const LinkParams lp = links_.link(from, op.sendPeer);
    // Each of the three holds the message for its bytes at its own rate; the message leaves
    // at the pace of the slowest.
    egress = start + duration(bytes, links_.portOf(from, inside).egressBytesPerSecond);
    ingress = start + duration(bytes, links_.portOf(op.sendPeer, inside).ingressBytesPerSecond);
    link = start + duration(bytes, lp.bytesPerSecond);
    const double end = start + duration(bytes, links_.rate(from, op.sendPeer));
    rs.lastSendEnd = std::max(rs.lastSendEnd, end);
    rs.sendEnds.push_back(rs.lastSendEnd);
    rs.pending.push_back(end);
    const double arrival = end + lp.latencySeconds;
    arrivals_[r * n_ + to].push_back(arrival);
    if (chunks_) {
      emit(r, op, EventKind::SendStart, op.sendPeer, start);
      emit(r, op, EventKind::SendEnd, op.sendPeer, end);
    }
    // The channel was empty if its receiver waits on it: this is its message.
    if (dst.wait == Wait::Recv && s_.ranks[to][dst.pc].recvPeer == from) {
      dst.wait = Wait::None;
      push(std::max(dst.t, arrival), to, false);
    }
    if (rs.wait == Wait::Inflight) {
      rs.wait = Wait::None;
      push(std::max(rs.t, tc), r, false);
    }
    if (!rs.issued.empty()) pushClaim(r, tc);
  }

  [[noreturn]] void throwDeadlock() const {
    for (size_t r = 0; r < n_; ++r) {
      if (st_[r].pc < s_.ranks[r].size()) {
        const Op& op = s_.ranks[r][st_[r].pc];
        ARL_ENFORCE(st_[r].wait == Wait::Recv,
                    "rank " << r << " stopped at op " << st_[r].pc << " with no event pending");
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
  std::vector<double> linkFree_;  // linkFree_[from * n + to]: when that link is free
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  uint64_t seq_ = 0;
  double now_ = 0;  // time of the event being processed
  std::vector<StepMark> marks_;
};

}  // namespace

ModelTimeline simulate(const Schedule& s, const LinkModel& links, const SimOptions& opt) {
  ARL_ENFORCE(opt.inflight >= 1, "inflight " << opt.inflight);
  ARL_ENFORCE(static_cast<int>(s.ranks.size()) == s.nranks,
              s.ranks.size() << " op lists for " << s.nranks << " ranks");
  return Simulation(s, links, opt).run();
}

}  // namespace arl
