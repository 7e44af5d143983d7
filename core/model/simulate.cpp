// Discrete-event simulation of a schedule over a link model (see model.h for the rules).
//
// The rules are the data planes' pacing (transport/pacing.h) and the executor's window
// (exec/executor.cpp), so that the model charges what a run pays:
//  - a send takes its sender's egress port and the link when both are free and the payload is
//    ready, holds each for its bytes at that one's rate, and has left at the slower pace; the
//    sender goes on at once (its port works while it receives and reduces);
//  - the receiver claims its ingress port when it takes the message, in its program order: the
//    bytes come in from the message's start or when the ingress is free, whichever is later,
//    and the message is available once it has left and come in, plus the link's latency;
//  - a rank issues an op only while fewer than `inflight` older ops are unretired, and ops
//    retire in program order, a send when it has left the port;
//  - iterations run back to back: a rank starts the next one when its previous one is done
//    (its last op, and every send left), without waiting for the others, as RankRun does;
//  - with cores to share (LinkModel::cores), each piece of a rank's work (a wake-up, a
//    reduction, a copy, a copying sender's send) becomes a Work event at the time it is ready;
//    processed in time order, the pieces take the earliest free core in the order they became
//    ready (list scheduling), and the rank waits for its piece meanwhile.
//
// Events are processed in global time order from a priority queue: a rank runs its program as
// far as its messages and window allow (local work touches nothing shared), and each send it
// issues becomes a claim event at the time it can start; a claim fixes the message's start
// and departure and wakes its receiver, if it waits on that channel.
//
// Every event is pushed no earlier than the one being processed: a rank woken by a message
// or by its own send resumes no earlier than the send's start, and a receive or a wait for
// room moves its time to the message's arrival or the send's departure, so the claims it
// issues then are no earlier; a rank's next claim waits for its previous one. Each op runs
// once per iteration and each send is one event: O(ops log ops). An empty queue with a rank
// still waiting means some receive is never matched.
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
  for (const auto& [dir, seconds] : s.linkLatencySeconds) {
    LinkParams lp = m.link(dir.first, dir.second);
    lp.latencySeconds += seconds;
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

double LinkModel::rate(int from, int to) const { return sendRate(from, to, OpKind::Send); }

double LinkModel::egressRate(int from, bool insideHost, OpKind kind) const {
  if (sendersCopy && freshSendBytesPerSecond > 0 && sendPayloadIsFresh(kind)) {
    return freshSendBytesPerSecond;
  }
  return portOf(from, insideHost).egressBytesPerSecond;
}

double LinkModel::sendRate(int from, int to, OpKind kind) const {
  const bool inside = sameHost(from, to);
  return minRate(minRate(egressRate(from, inside, kind), portOf(to, inside).ingressBytesPerSecond),
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

// A send its rank has issued that has not taken its egress port yet.
struct IssuedSend {
  size_t op;     // index in the rank's program
  double ready;  // earliest start: the payload is ready and the rank has reached the op
};

// A message on a channel: when it starts to leave its sender and when it has left (the
// sender's side), and the latency of its link. The receiver's ingress is claimed when the
// receiver takes it.
struct Message {
  double start;
  double left;
  double latency;
};

// An op in the rank's window (the executor's ExecOptions::inflight entries): a send retires
// when it has left its sender's port, any other op when it is done, which is when it was
// issued (the CPU backend's work is synchronous, charged to the rank's time).
struct WindowEntry {
  bool send;
  size_t index;  // send: its index in the rank's sends; else unused
  double done;   // else: when it was done
};

enum class Wait : uint8_t { None, Recv, Inflight, Core };

// Where a rank is in the op at its pc.
enum class Stage : uint8_t {
  Admit,      // the op needs a place in the window
  Input,      // its receive (or local copy) is next
  InputWork,  // its receive's wake-up, reduction or copy (or its local copy) waits for a core
  Output,     // its send, if any, is next
  SendWork,   // its send's copy (a copying sender's) waits for a core
  Done,
};

// The work on the rank's thread that an op's input costs once its data is there.
struct InputWork {
  double wake = 0;    // the receiver's wake-up (LinkModel::wakeOnCore)
  double reduce = 0;  // its reduction
  double copy = 0;    // its copy into the destination, or a local copy
  double total() const { return wake + reduce + copy; }
};

struct RankState {
  size_t pc = 0;                   // next op of the current iteration
  uint32_t iter = 0;               // current iteration
  double t = 0;                    // when the rank's own work (program order) is free
  Wait wait = Wait::None;          // why the rank stopped, if it did
  Stage stage = Stage::Admit;      // how far the op at pc has come
  double ready = 0;                // its payload is ready at this time (from Output on)
  InputWork input;                 // its input's work (InputWork)
  double workSeconds = 0;          // the piece of work waiting for a core (Wait::Core)
  std::deque<IssuedSend> issued;   // sends without a port yet, oldest first; the head has a claim
  std::deque<WindowEntry> window;  // ops not retired, oldest first
  std::vector<double> sendLeft;    // when each claimed send has left, in order
  std::vector<double> sendEnds;    // lastSendEnd after each claimed send
  size_t sendsIssued = 0;          // sends issued so far, every iteration
  double egressFree = 0, ingressFree = 0;          // network port
  double hostEgressFree = 0, hostIngressFree = 0;  // port inside the host
  double lastSendEnd = 0;
  std::vector<double> iterationEnds;  // when each iteration was done (its sends left)
};

// A step's end on a rank: the later of its rank time and its sends so far leaving the port,
// known once those sends have claimed their ports.
struct StepMark {
  size_t rank;
  size_t op;
  uint32_t iter;
  double t;
  size_t sends;  // sends the rank had issued by then
};

enum class Action : uint8_t {
  Run,    // the rank runs its program
  Claim,  // the rank's oldest issued send claims its ports
  Work,   // the rank's pending piece of work is ready and asks for a core
};

struct Event {
  double t;
  uint64_t seq;  // ties go first come, first served
  size_t rank;
  Action action;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// One simulation: the ranks' states, the channels' messages and the timeline so far.
class Simulation {
 public:
  Simulation(const Schedule& s, const LinkModel& links, const SimOptions& opt)
      : s_(s),
        links_(links),
        opt_(opt),
        n_(static_cast<size_t>(s.nranks)),
        iterations_(static_cast<uint32_t>(opt.iterations)),
        elem_(static_cast<double>(dtypeSize(opt.dtype))),
        chunks_(opt.telemetry == TelemetryLevel::Chunks),
        steps_(opt.telemetry != TelemetryLevel::Off),
        st_(n_),
        channels_(n_ * n_),
        linkFree_(n_ * n_, 0.0),
        coreFree_(static_cast<size_t>(std::max(links.cores, 0)), 0.0),
        wakeOnCore_(links.wakeOnCore && links.cores > 0 && links.cores < s.nranks) {
    tl_.rankSeconds.assign(n_, 0.0);
  }

  ModelTimeline run() {
    for (size_t r = 0; r < n_; ++r) push(0, r, Action::Run);
    while (!queue_.empty()) {
      const Event e = queue_.top();
      queue_.pop();
      // Every event is pushed no earlier than the one being processed (see the file comment).
      ARL_ENFORCE(e.t >= now_, "event at " << e.t << " s after one at " << now_ << " s");
      now_ = e.t;
      switch (e.action) {
        case Action::Run: runRank(e.rank); break;
        case Action::Claim: claim(e.rank, e.t); break;
        case Action::Work:
          workDone(e.rank, grantCore(e.t, st_[e.rank].workSeconds));
          runRank(e.rank);
          break;
      }
    }
    for (size_t r = 0; r < n_; ++r) {
      if (st_[r].iter < iterations_) throwDeadlock();
    }
    finish();
    return std::move(tl_);
  }

 private:
  void push(double t, size_t rank, Action a) { queue_.push({t, seq_++, rank, a}); }

  void emit(size_t rank, uint32_t iter, const Op& op, EventKind kind, int peer, double t) {
    TelemetryEvent e;
    e.runId = opt_.runId;
    e.iteration = opt_.iteration + iter;
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

  void emitIterationEnd(size_t rank, uint32_t iter, double t) {
    const auto& ops = s_.ranks[rank];
    TelemetryEvent e;
    e.runId = opt_.runId;
    e.iteration = opt_.iteration + iter;
    e.rank = static_cast<int>(rank);
    e.step = ops.empty() ? 0 : ops.back().step;
    e.kind = EventKind::IterationEnd;
    e.tNs = toNs(t);
    tl_.events.push_back(e);
  }

  // Every rank's finish time, each iteration's time, the step ends, events in time order.
  void finish() {
    if (steps_) {
      for (const StepMark& m : marks_) {
        const RankState& rs = st_[m.rank];
        const double sent = m.sends > 0 ? rs.sendEnds[m.sends - 1] : 0.0;
        emit(m.rank, m.iter, s_.ranks[m.rank][m.op], EventKind::StepEnd, -1, std::max(m.t, sent));
      }
    }
    tl_.iterationSeconds.assign(iterations_, 0.0);
    for (size_t r = 0; r < n_; ++r) {
      const std::vector<double>& ends = st_[r].iterationEnds;
      tl_.rankSeconds[r] = ends.back();
      tl_.totalSeconds = std::max(tl_.totalSeconds, ends.back());
      // Each rank times an iteration from the end of its previous one, as RankRun does.
      for (size_t i = 0; i < ends.size(); ++i) {
        const double took = ends[i] - (i > 0 ? ends[i - 1] : 0.0);
        tl_.iterationSeconds[i] = std::max(tl_.iterationSeconds[i], took);
      }
    }
    std::stable_sort(
        tl_.events.begin(), tl_.events.end(),
        [](const TelemetryEvent& a, const TelemetryEvent& b) { return a.tNs < b.tNs; });
  }

  void runRank(size_t r) {
    RankState& rs = st_[r];
    rs.wait = Wait::None;
    while (rs.iter < iterations_) {
      if (rs.pc == s_.ranks[r].size()) {
        if (!endIteration(r)) {
          rs.wait = Wait::Inflight;
          return;
        }
      } else if (!advance(r)) {
        return;
      }
    }
  }

  // The rank's iteration is done once every send it issued has left its port (the executor
  // retires its whole window); the next one starts then, without waiting for any other rank.
  bool endIteration(size_t r) {
    RankState& rs = st_[r];
    if (!rs.issued.empty()) return false;  // a send has no port yet: its end is not known
    rs.t = std::max(rs.t, rs.lastSendEnd);
    rs.window.clear();
    rs.iterationEnds.push_back(rs.t);
    if (steps_) emitIterationEnd(r, rs.iter, rs.t);
    ++rs.iter;
    rs.pc = 0;
    return true;
  }

  // Advances rank r by its next op; false when that op waits (for room in the window while
  // its oldest entry is a send without a port yet, for a message not yet sent, or for a core).
  bool advance(size_t r) {
    RankState& rs = st_[r];
    const Op& op = s_.ranks[r][rs.pc];
    const double bytes = static_cast<double>(op.count) * elem_;
    if (rs.stage == Stage::Admit) {
      if (!makeRoom(rs)) {
        rs.wait = Wait::Inflight;
        return false;
      }
      rs.stage = Stage::Input;
    }
    if (rs.stage == Stage::Input && !takeInput(r, op, bytes)) return false;
    if (rs.stage == Stage::Output && !output(r, op, bytes)) return false;
    ARL_ENFORCE(rs.stage == Stage::Done,
                "rank " << r << " op " << rs.pc << " runs while its work waits for a core");
    rs.stage = Stage::Admit;
    ++rs.pc;
    const auto& ops = s_.ranks[r];
    const bool lastOfStep = rs.pc == ops.size() || ops[rs.pc].step != op.step;
    if (steps_ && lastOfStep) marks_.push_back({r, rs.pc - 1, rs.iter, rs.t, rs.sendsIssued});
    return true;
  }

  // The op's input: its receive (the message taken, then its work) or a local copy; false
  // when it waits for the message or for a core.
  bool takeInput(size_t r, const Op& op, double bytes) {
    RankState& rs = st_[r];
    double t = rs.t;  // when its work may start
    InputWork w;
    if (opRecvs(op.kind)) {
      if (!receive(r, op, bytes, t, w)) {
        rs.wait = Wait::Recv;
        return false;
      }
    } else if (op.kind == OpKind::Copy) {
      w.copy = duration(bytes, links_.copyBytesPerSecond);
    }
    rs.input = w;
    rs.stage = Stage::InputWork;
    return startWork(r, t, w.total());
  }

  // The op's send, if it has one, once its input is done; false when the copy of a copying
  // sender waits for a core.
  bool output(size_t r, const Op& op, double bytes) {
    RankState& rs = st_[r];
    if (!opSends(op.kind)) {
      rs.window.push_back({false, 0, rs.t});
      rs.stage = Stage::Done;
      return true;
    }
    // A sender that copies holds its own thread for the copy (claim() charges the same).
    const double copy =
        links_.sendersCopy
            ? duration(bytes, links_.sendRate(static_cast<int>(r), op.sendPeer, op.kind))
            : 0.0;
    rs.stage = Stage::SendWork;
    return startWork(r, std::max(rs.ready, rs.t), copy);
  }

  // A piece of rank r's work, ready at `ready`, taking `seconds` of a core. Without cores to
  // share (LinkModel::cores 0) or with nothing to do it starts when ready and is done here;
  // else it asks for a core at `ready`, in the order pieces become ready (list scheduling),
  // and the rank waits for it (false).
  bool startWork(size_t r, double ready, double seconds) {
    if (coreFree_.empty() || seconds <= 0) {
      workDone(r, ready);
      return true;
    }
    RankState& rs = st_[r];
    rs.workSeconds = seconds;
    rs.wait = Wait::Core;
    push(ready, r, Action::Work);
    return false;
  }

  // The earliest free core (the first of equals) takes a piece ready at `ready`: its start.
  double grantCore(double ready, double seconds) {
    const auto core = std::min_element(coreFree_.begin(), coreFree_.end());
    const double start = std::max(ready, *core);
    *core = start + seconds;
    return start;
  }

  // Rank r's pending piece of work started at `start`: the rank's time and its payload's
  // readiness follow, and the op goes on to its next stage.
  void workDone(size_t r, double start) {
    RankState& rs = st_[r];
    const Op& op = s_.ranks[r][rs.pc];
    if (rs.stage == Stage::InputWork) {
      const InputWork& w = rs.input;
      double t = start + w.wake;  // the receiver has its message
      if (opRecvs(op.kind) && chunks_) emit(r, rs.iter, op, EventKind::RecvEnd, op.recvPeer, t);
      rs.ready = t;  // RecvCopySend forwards the payload as received
      if (opReduces(op.kind)) {
        t += w.reduce;
        if (chunks_) emit(r, rs.iter, op, EventKind::ReduceEnd, op.recvPeer, t);
        rs.ready = t;
      }
      rs.t = t + w.copy;
      rs.stage = Stage::Output;
      return;
    }
    ARL_ENFORCE(rs.stage == Stage::SendWork, "rank " << r << " op " << rs.pc << " has no work");
    rs.window.push_back({true, rs.sendsIssued++, 0.0});
    rs.issued.push_back({rs.pc, start});
    if (links_.sendersCopy) {
      const double bytes = static_cast<double>(op.count) * elem_;
      rs.t = start + duration(bytes, links_.sendRate(static_cast<int>(r), op.sendPeer, op.kind));
    }
    if (rs.issued.size() == 1) pushClaim(r, 0);
    rs.stage = Stage::Done;
  }

  // The executor's window: an op is issued only with fewer than `inflight` older ops not
  // retired, and entries retire in program order, so the oldest send that has not left holds
  // every op behind it. Retires what is done by the rank's time, then waits for the oldest
  // while the window is full; false when the oldest is a send whose end is not known yet.
  bool makeRoom(RankState& rs) const {
    const auto doneAt = [&](const WindowEntry& e) {
      return e.send ? (e.index < rs.sendLeft.size() ? rs.sendLeft[e.index] : -1.0) : e.done;
    };
    while (!rs.window.empty()) {
      const double done = doneAt(rs.window.front());
      if (done < 0) break;
      if (done > rs.t) {
        if (rs.window.size() < static_cast<size_t>(opt_.inflight)) break;
        rs.t = done;
      }
      rs.window.pop_front();
    }
    return rs.window.size() < static_cast<size_t>(opt_.inflight);
  }

  // The receive of `op`: moves t to when its message is in, and says its work (a wake-up, a
  // reduction or a copy into the destination), which workDone() charges.
  // The receiver claims its ingress as the data plane's pacing does (transport/pacing.h): in
  // the order it receives, from the message's start or when the ingress is free, whichever
  // is later; the message is available when it has left its sender and come in through the
  // ingress, plus the link's latency.
  bool receive(size_t r, const Op& op, double bytes, double& t, InputWork& w) {
    ARL_ENFORCE(op.recvPeer >= 0 && op.recvPeer < s_.nranks,
                "rank " << r << " op " << st_[r].pc << " receives from " << op.recvPeer);
    auto& ch = channels_[static_cast<size_t>(op.recvPeer) * n_ + r];
    if (ch.empty()) return false;  // its message has no port yet
    const Message m = ch.front();
    ch.pop_front();
    RankState& rs = st_[r];
    const bool inside = links_.sameHost(op.recvPeer, static_cast<int>(r));
    double arrived = m.left;
    if (!links_.sendersCopy) {  // a copying sender's bytes are in once it is done
      double& ingress = inside ? rs.hostIngressFree : rs.ingressFree;
      ingress = std::max(m.start, ingress) +
                duration(bytes, links_.portOf(static_cast<int>(r), inside).ingressBytesPerSecond);
      arrived = std::max(arrived, ingress);
    }
    // A receiver woken on a core pays the latency there, as work; else it is the link's delay.
    if (wakeOnCore_) {
      t = std::max(t, arrived);
      w.wake = m.latency;
    } else {
      t = std::max(t, arrived + m.latency);
    }
    if (opReduces(op.kind)) {
      w.reduce = duration(bytes, links_.reduceRate(static_cast<int>(r)));
    } else if (opWritesDst(op.kind)) {
      w.copy = duration(bytes, links_.copyBytesPerSecond);
    }
    return true;
  }

  // The claim of rank r's oldest issued send: when its payload is ready and the sender's
  // egress and the link are free of its earlier sends, not before `notBefore` (sends claim
  // in program order).
  void pushClaim(size_t r, double notBefore) {
    const RankState& rs = st_[r];
    const IssuedSend& head = rs.issued.front();
    const int to = s_.ranks[r][head.op].sendPeer;
    ARL_ENFORCE(to >= 0 && to < s_.nranks, "rank " << r << " op " << head.op << " sends to " << to);
    const bool inside = links_.sameHost(static_cast<int>(r), to);
    const double link = linkFree_[r * n_ + static_cast<size_t>(to)];
    push(std::max({notBefore, head.ready, inside ? rs.hostEgressFree : rs.egressFree, link}), r,
         Action::Claim);
  }

  // Rank r's oldest issued send starts at tc: it holds the sender's egress and the link for
  // its bytes at each one's rate and has left at the pace of the slower (a data plane's
  // sender, transport/pacing.h). Its receiver claims its ingress when it takes it.
  void claim(size_t r, double tc) {
    RankState& rs = st_[r];
    const IssuedSend head = rs.issued.front();
    rs.issued.pop_front();
    const Op& op = s_.ranks[r][head.op];
    const int from = static_cast<int>(r);
    const auto to = static_cast<size_t>(op.sendPeer);
    RankState& dst = st_[to];
    const bool inside = links_.sameHost(from, op.sendPeer);
    const double egressRate = links_.egressRate(from, inside, op.kind);
    const LinkParams lp = links_.link(from, op.sendPeer);
    const double bytes = static_cast<double>(op.count) * elem_;
    (inside ? rs.hostEgressFree : rs.egressFree) = tc + duration(bytes, egressRate);
    linkFree_[r * n_ + to] = tc + duration(bytes, lp.bytesPerSecond);
    const double left = tc + duration(bytes, minRate(egressRate, lp.bytesPerSecond));
    rs.lastSendEnd = std::max(rs.lastSendEnd, left);
    rs.sendEnds.push_back(rs.lastSendEnd);
    rs.sendLeft.push_back(left);
    channels_[r * n_ + to].push_back({tc, left, lp.latencySeconds});
    if (chunks_) {
      emit(r, rs.iter, op, EventKind::SendStart, op.sendPeer, tc);
      emit(r, rs.iter, op, EventKind::SendEnd, op.sendPeer, left);
    }
    // The channel was empty if its receiver waits on it: this is its message.
    if (dst.wait == Wait::Recv && s_.ranks[to][dst.pc].recvPeer == from) {
      dst.wait = Wait::None;
      push(std::max(dst.t, tc), to, Action::Run);
    }
    if (rs.wait == Wait::Inflight) {
      rs.wait = Wait::None;
      push(std::max(rs.t, tc), r, Action::Run);
    }
    if (!rs.issued.empty()) pushClaim(r, tc);
  }

  [[noreturn]] void throwDeadlock() const {
    for (size_t r = 0; r < n_; ++r) {
      const RankState& rs = st_[r];
      if (rs.iter < iterations_) {
        ARL_ENFORCE(rs.wait == Wait::Recv && rs.pc < s_.ranks[r].size(),
                    "rank " << r << " stopped at op " << rs.pc << " with no event pending");
        const Op& op = s_.ranks[r][rs.pc];
        throw ConfigError("model: rank " + std::to_string(r) + " op " + std::to_string(rs.pc) +
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
  uint32_t iterations_;
  double elem_;
  bool chunks_;
  bool steps_;
  ModelTimeline tl_;
  std::vector<RankState> st_;
  // channels_[from * n + to]: messages sent on that channel, not yet taken by the receiver.
  std::vector<std::deque<Message>> channels_;
  std::vector<double> linkFree_;  // linkFree_[from * n + to]: when that link is free
  std::vector<double> coreFree_;  // when each core is free (none: a core per rank, unshared)
  bool wakeOnCore_;               // messages' latency is their receivers' work on a core
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  uint64_t seq_ = 0;
  double now_ = 0;  // time of the event being processed
  std::vector<StepMark> marks_;
};

}  // namespace

ModelTimeline simulate(const Schedule& s, const LinkModel& links, const SimOptions& opt) {
  ARL_ENFORCE(opt.inflight >= 1, "inflight " << opt.inflight);
  ARL_ENFORCE(opt.iterations >= 1, "iterations " << opt.iterations);
  ARL_ENFORCE(static_cast<int>(s.ranks.size()) == s.nranks,
              s.ranks.size() << " op lists for " << s.nranks << " ranks");
  return Simulation(s, links, opt).run();
}

double cpuSeconds(const Schedule& s, const LinkModel& links, DataType dtype) {
  const double elem = static_cast<double>(dtypeSize(dtype));
  double total = 0;
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    for (const Op& op : s.ranks[r]) {
      const double bytes = static_cast<double>(op.count) * elem;
      if (links.sendersCopy && opSends(op.kind)) {
        total += duration(bytes, links.sendRate(static_cast<int>(r), op.sendPeer, op.kind));
      }
      if (opReduces(op.kind)) {
        total += duration(bytes, links.reduceRate(static_cast<int>(r)));
      } else if (op.kind == OpKind::Copy || (opRecvs(op.kind) && opWritesDst(op.kind))) {
        total += duration(bytes, links.copyBytesPerSecond);
      }
    }
  }
  return total;
}

double iterationSeconds(const Schedule& s, const LinkModel& links, SimOptions opt) {
  opt.iterations = kSimulatedIterations;
  const ModelTimeline tl = simulate(s, links, opt);
  double sum = 0;
  for (size_t i = 1; i < tl.iterationSeconds.size(); ++i) sum += tl.iterationSeconds[i];
  return sum / static_cast<double>(tl.iterationSeconds.size() - 1);
}

}  // namespace arl
