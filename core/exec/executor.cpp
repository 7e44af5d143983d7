// The executor runs one rank's ops in program order over a Transport and a Backend.
//
// Pipelining. Every op leaves an entry in a window of at most ExecOptions::inflight entries:
// the asynchronous backend operation it started (a ticket), the send it started (a
// completion), and what those still use (the received message, a staged host view, a
// temporary). When the window is full the oldest entry is waited for. Entries retire in
// program order, so telemetry and resource release stay ordered.
//
// Hazards, and how they are met without the host ever reading backend memory:
//  - a send reads data an asynchronous backend op produced: the data is staged with
//    Backend::stageOut, which by the backend's ordering contract (backend/backend.h) runs after
//    the op that wrote it, and the send starts only once the staging ticket completes (the
//    executor checks that the producing op's ticket has completed by then);
//  - an op overwrites a region an outstanding zero-copy send still reads: before the op is
//    issued, every older entry up to the last such send is retired;
//  - a backend op reads a received message: the message lives in the entry until the
//    backend's ticket completes;
//  - a RecvReduceSend result needs a home of its own (it is sent, not stored): it is reduced
//    into one of `inflight` temporaries, owned by the entry until its send completes;
//  - a peer that reads backend memory (Transport::readsBackendMemory, CUDA IPC) gets the
//    backend address, unstaged: the transport copies the bytes into device memory of its
//    own (ordered after the op that produced them) and lends that, so the send completes at
//    once and the buffer is free again. A received slice in a peer's memory is handed back
//    (InMessage::readIssued) as soon as the operations reading it are issued, and every lent
//    slice has come back before run() returns.
//
// Sends wait for their staging without holding the rank back: the next ops are issued while
// the device copies one slice out, so copy-out, copy-in and reduction of successive slices
// overlap on a backend that runs them concurrently. Pending sends start in program order (a
// channel's k-th message is the k-th send to that peer) as their staging completes, observed
// by poll(). A rank never waits for a peer while holding a send back: before a receive that
// would wait (Transport::ready() is false) and before waiting for a send to complete, every
// pending send is started, waiting only for the device to finish staging it. So a peer
// never waits for a message this rank could have sent, as when sends were started at once.
#include "exec/executor.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/errors.h"
#include "base/limits.h"
#include "exec/flight_recorder.h"

namespace arl {

namespace {

// Vector kernels (the CUDA backend's 16-byte loads, the CPU backend's SIMD) run at full width
// only when the destination and the operands share their offset modulo 16 bytes.
constexpr size_t kTmpAlign = 16;

constexpr uint32_t kFnvOffset = 2166136261u;
constexpr uint32_t kFnvPrime = 16777619u;

void fnvBytes(uint32_t& h, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= kFnvPrime;
  }
}

// Fixed-width little-endian so the signature is the same on every host.
void fnvU64(uint32_t& h, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  fnvBytes(h, b, sizeof b);
}

// Element offset the header of a sending op carries: where, in the sender's buffers, the
// data the payload was produced from lives. Both ends derive it from the schedule.
uint64_t payloadOffset(const Op& op) {
  switch (op.kind) {
    case OpKind::Send:
    case OpKind::RecvReduceSend: return op.src.offset;
    case OpKind::RecvReduceCopySend:
    case OpKind::RecvCopySend: return op.dst.offset;
    default: return 0;
  }
}

// Where the op lands or reduces data on this rank (telemetry offset of receive events).
uint64_t localOffset(const Op& op) { return opWritesDst(op.kind) ? op.dst.offset : op.src.offset; }

uint64_t bufferElems(const Schedule& s, Buffer b) {
  switch (b) {
    case Buffer::Input: return s.inputElems;
    case Buffer::Output: return s.outputElems;
    case Buffer::Scratch: return s.scratchElems;
  }
  return 0;
}

std::string bufName(Buffer b) {
  switch (b) {
    case Buffer::Input: return "input";
    case Buffer::Output: return "output";
    case Buffer::Scratch: return "scratch";
  }
  return "?";
}

std::string hex32(uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (int i = 7; i >= 0; --i) s += digits[(v >> (4 * i)) & 0xF];
  return s;
}

}  // namespace

uint32_t opSignature(const Schedule& s, DataType t, RedOp op) {
  uint32_t h = kFnvOffset;
  fnvBytes(h, s.algorithm.data(), s.algorithm.size());
  fnvU64(h, s.algorithm.size());  // separates the name from what follows
  fnvU64(h, static_cast<uint64_t>(s.collective));
  fnvU64(h, static_cast<uint64_t>(t));
  // The operator means nothing to a collective that does not reduce; leaving it out keeps
  // two ranks that were given different (ignored) operators compatible.
  fnvU64(h, collectiveReduces(s.collective) ? static_cast<uint64_t>(op) : 0xFF);
  fnvU64(h, s.count);
  fnvU64(h, static_cast<uint64_t>(s.nranks));
  fnvU64(h, s.sliceElems);
  fnvU64(h, static_cast<uint64_t>(s.root));
  return h;
}

namespace {

// The executor's private state; Executor::State (declared in the header) derives from it so
// that the run's helpers below can name it.
struct ExecState {
  // What a receive op expects from the matching send of its peer (the k-th message on the
  // channel peer -> rank is the k-th op of the peer that sends to rank).
  // Identity fields come from the sender's op because a receiving op's own step may differ
  // from the message's (a RecvReduceSend is labelled with the step of what it sends).
  struct RecvPlan {
    bool known = false;  // false when the peer's program sends fewer messages than we receive
    uint32_t step = 0;
    uint32_t chunk = 0;
    uint32_t slice = 0;
    uint64_t senderOffset = 0;
    uint64_t provenance = 0;
  };
  struct Entry {
    size_t opIndex = 0;
    std::unique_ptr<InMessage> msg;
    std::optional<Backend::Ticket> ticket;
    bool ticketDone = true;
    bool reduceEndPending = false;
    std::shared_ptr<SendCompletion> send;
    bool sendEndEmitted = true;
    const void* staged = nullptr;  // view to hand back with releaseStaged
    // Backend bytes a zero-copy send still reads (empty when the payload is a copy).
    const unsigned char* readLo = nullptr;
    const unsigned char* readHi = nullptr;
    int tmpSlot = -1;
    bool stepEnd = false;
    // The send's data is being staged (stageTicket), or waits for an earlier send to start.
    std::optional<Backend::Ticket> stageTicket;
    bool stageDone = true;
    bool sendPending = false;
    const void* sendData = nullptr;
    uint64_t sendBytes = 0;
    // The latest device end time of the entry's backend operations (Backend::deviceEndNs).
    std::optional<int64_t> deviceEndNs;
  };

  uint32_t signature = 0;
  size_t esize = 0;
  std::vector<RecvPlan> recvPlan;   // per op of this rank
  std::vector<bool> lastOfStep;     // per op: last op of its step in program order
  std::vector<uint64_t> stepBytes;  // per step: bytes this rank sends in it
  uint64_t totalBytes = 0;
  uint64_t tmpElems = 0;  // largest RecvReduceSend count
  size_t tmpSlots = 0;    // temporaries that can be in use at once: min(inflight, RRS ops)
  std::vector<void*> tmp;
  std::vector<bool> tmpBusy;
  std::deque<Entry> window;

  // Per-run context.
  RankBuffers bufs;
  uint32_t iteration = 0;
};

}  // namespace

struct Executor::State : ExecState {};

namespace {

// The RecvReduceSend temporaries, allocated and written once, when the Executor is made: at
// their first use the first timed iteration paid their page faults (a warm-up runs on another
// Executor; 15 us a page on a virtual machine, so 15 ms for 4 MiB). Each has kTmpAlign bytes
// more than the largest result, so that a result can sit at its `local` operand's offset
// modulo kTmpAlign (issue(), RecvReduceSend). Frees what it allocated when it throws.
void allocateTemporaries(ExecState& st, Backend& backend) {
  if (st.tmpSlots == 0) return;
  const size_t bytes = std::max<uint64_t>(st.tmpElems, 1) * st.esize + kTmpAlign;
  const std::vector<unsigned char> zeros(std::min<size_t>(bytes, size_t{1} << 20), 0);
  st.tmp.reserve(st.tmpSlots);
  try {
    for (size_t k = 0; k < st.tmpSlots; ++k) {
      auto* p = static_cast<unsigned char*>(backend.allocate(bytes));
      st.tmp.push_back(p);
      for (size_t off = 0; off < bytes; off += zeros.size()) {
        backend.upload(p + off, zeros.data(), std::min(zeros.size(), bytes - off));
      }
    }
  } catch (...) {
    for (void* p : st.tmp) backend.deallocate(p);
    st.tmp.clear();
    throw;
  }
  st.tmpBusy.assign(st.tmpSlots, false);
}

}  // namespace

Executor::Executor(const Schedule& s, int rank, Transport& transport, Backend& backend,
                   TelemetrySink* sink, ExecOptions opt)
    : s_(s),
      rank_(rank),
      transport_(transport),
      backend_(backend),
      sink_(sink),
      opt_(std::move(opt)),
      state_(std::make_unique<State>()) {
  if (opt_.inflight < 1) {
    throw ConfigError("inflight must be at least 1 (got " + std::to_string(opt_.inflight) + ")");
  }
  ARL_ENFORCE(rank >= 0 && rank < s.nranks, "rank " << rank << " of " << s.nranks);
  ARL_ENFORCE(s.ranks.size() == static_cast<size_t>(s.nranks),
              "schedule has " << s.ranks.size() << " programs for " << s.nranks << " ranks");
  State& st = *state_;
  st.signature = opSignature(s, opt_.dtype, opt_.op);
  st.esize = dtypeSize(opt_.dtype);

  const auto& ops = s.ranks[static_cast<size_t>(rank)];
  const auto checkRef = [&](const Op& op, size_t i, BufRef ref) {
    const uint64_t size = bufferElems(s, ref.buf);
    ARL_ENFORCE(ref.offset <= size && op.count <= size - ref.offset,
                "rank " << rank << " op " << i << " (" << toString(op.kind) << ") reaches "
                        << bufName(ref.buf) << "[" << ref.offset << ", " << ref.offset + op.count
                        << ") beyond its " << size << " elements");
  };
  const auto checkPeer = [&](int peer, size_t i) {
    ARL_ENFORCE(peer >= 0 && peer < s.nranks,
                "rank " << rank << " op " << i << " names peer " << peer);
  };

  // Messages each peer sends to this rank, in its program order.
  std::vector<std::vector<const Op*>> incoming(static_cast<size_t>(s.nranks));
  for (int p = 0; p < s.nranks; ++p) {
    for (const Op& op : s.ranks[static_cast<size_t>(p)]) {
      if (opSends(op.kind) && op.sendPeer == rank) incoming[static_cast<size_t>(p)].push_back(&op);
    }
  }
  std::vector<size_t> received(static_cast<size_t>(s.nranks), 0);

  st.recvPlan.resize(ops.size());
  st.lastOfStep.assign(ops.size(), false);
  st.stepBytes.assign(s.nsteps + 1, 0);
  std::vector<size_t> lastIndex(s.nsteps + 1, ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    ARL_ENFORCE(op.step <= s.nsteps, "rank " << rank << " op " << i << " has step " << op.step
                                             << " beyond the schedule's " << s.nsteps);
    if (opReadsSrc(op.kind)) checkRef(op, i, op.src);
    if (opWritesDst(op.kind)) checkRef(op, i, op.dst);
    if (opSends(op.kind)) {
      checkPeer(op.sendPeer, i);
      st.stepBytes[op.step] += op.count * st.esize;
      st.totalBytes += op.count * st.esize;
    }
    if (opRecvs(op.kind)) {
      checkPeer(op.recvPeer, i);
      auto& from = incoming[static_cast<size_t>(op.recvPeer)];
      size_t& k = received[static_cast<size_t>(op.recvPeer)];
      if (k < from.size()) {
        const Op& sop = *from[k];
        st.recvPlan[i] = {true, sop.step, sop.chunk, sop.slice, payloadOffset(sop), sop.provenance};
      }
      ++k;
    }
    if (op.kind == OpKind::RecvReduceSend) {
      st.tmpElems = std::max(st.tmpElems, op.count);
      ++st.tmpSlots;
    }
    lastIndex[op.step] = i;
  }
  for (size_t i : lastIndex) {
    if (i < ops.size()) st.lastOfStep[i] = true;
  }
  st.tmpSlots = std::min(st.tmpSlots, static_cast<size_t>(opt_.inflight));
  allocateTemporaries(st, backend_);
}

Executor::~Executor() {
  State& st = *state_;
  for (void* p : st.tmp) backend_.deallocate(p);
}

namespace {

// The body of one run; a class so that the many small steps share their context plainly.
class Run {
 public:
  using State = ExecState;

  Run(const Schedule& s, int rank, Transport& transport, Backend& backend, TelemetrySink* sink,
      const ExecOptions& opt, State& st, uint64_t seq)
      : s_(s),
        rank_(rank),
        transport_(transport),
        backend_(backend),
        sink_(opt.telemetry == TelemetryLevel::Off ? nullptr : sink),
        chunks_(opt.telemetry == TelemetryLevel::Chunks),
        opt_(opt),
        st_(st),
        seq_(seq),
        clockShiftNs_(now() - steadyNowNs()) {}

  void execute() {
    const auto& ops = s_.ranks[static_cast<size_t>(rank_)];
    for (size_t i = 0; i < ops.size(); ++i) {
      if (opt_.beforeOp) opt_.beforeOp(i, ops[i]);
      issue(i, ops[i]);
      poll();
    }
    while (!st_.window.empty()) retireOldest();
    // Slices lent to peers come back before the run ends.
    transport_.reclaimAll(s_.nsteps);
    finalizeAvg();
    if (sink_) {
      TelemetryEvent e = event(EventKind::IterationEnd, s_.nsteps, Phase::Local);
      e.bytes = st_.totalBytes;
      sink_->record(e);
    }
  }

  // After a failure, before abandon(): the peers this rank still waited on (bit r), the one
  // it was blocked on and those whose sends had not completed. For the flight recorder.
  uint64_t unfinishedPeers() const noexcept {
    uint64_t mask = 0;
    const auto add = [&](int peer) {
      if (peer >= 0 && peer < kMaxRanks) mask |= uint64_t{1} << peer;
    };
    add(blockedOn_);
    for (const auto& e : st_.window) {
      if (e.sendPending || (e.send && !e.send->done())) add(opAt(e.opIndex).sendPeer);
    }
    return mask;
  }

  // After a failure: let the backend finish with every message and temporary before they
  // are released. Sends that have not completed keep their staged views (the transport may
  // still read them); the backend reclaims those when it is destroyed.
  void abandon() noexcept {
    for (auto& e : st_.window) {
      try {
        if (e.ticket && !e.ticketDone) backend_.wait(*e.ticket);
        if (e.stageTicket && !e.stageDone) backend_.wait(*e.stageTicket);
        // A send still pending was never handed to the transport.
        const bool sent = !e.send || e.send->done();
        if (sent && e.staged) backend_.releaseStaged(e.staged);
      } catch (...) {
        // Nothing more can be done for this entry; the run is already failing.
      }
      if (e.tmpSlot >= 0) st_.tmpBusy[static_cast<size_t>(e.tmpSlot)] = false;
    }
    st_.window.clear();
  }

 private:
  using Entry = State::Entry;

  // What this rank blocks on, for the stall report (exec/progress.h): a few relaxed stores.
  void waiting(WaitKind k, int peer, uint32_t step) noexcept {
    blockedOn_ = peer;
    if (opt_.progress) opt_.progress->beginWait(k, peer, step);
  }
  void doneWaiting() noexcept {
    blockedOn_ = -1;
    if (opt_.progress) opt_.progress->endWait();
  }

  int64_t now() const {
    if (opt_.clock) return opt_.clock();
    return steadyNowNs();
  }

  // `deviceNs`: when the device finished the work the event marks (Backend::deviceEndNs, on
  // the host's steady clock), mapped onto the executor's clock; none: the host's time now.
  TelemetryEvent event(EventKind kind, uint32_t step, Phase phase,
                       std::optional<int64_t> deviceNs = std::nullopt) const {
    TelemetryEvent e;
    e.runId = opt_.runId;
    e.iteration = st_.iteration;
    e.rank = rank_;
    e.step = step;
    e.kind = kind;
    e.phase = static_cast<uint8_t>(phase);
    e.tNs = deviceNs ? *deviceNs + clockShiftNs_ : now();
    e.clock = deviceNs ? ClockSource::Device : ClockSource::Host;
    return e;
  }

  // The device's end time of the entry's completed ticket t, if the backend knows it.
  std::optional<int64_t> deviceEnd(Entry& e, Backend::Ticket t) {
    const std::optional<int64_t> d = backend_.deviceEndNs(t);
    if (d) e.deviceEndNs = std::max(e.deviceEndNs.value_or(*d), *d);
    return d;
  }

  void chunkEvent(EventKind kind, const Op& op, uint32_t step, int peer, uint64_t offset,
                  uint64_t prov, std::optional<int64_t> deviceNs = std::nullopt) {
    if (!chunks_ || !sink_) return;
    TelemetryEvent e = event(kind, step, op.phase, deviceNs);
    e.peer = peer;
    e.chunk = op.chunk;
    e.offset = offset;
    e.bytes = op.count * st_.esize;
    e.provenance = prov;
    sink_->record(e);
  }

  const Op& opAt(size_t i) const { return s_.ranks[static_cast<size_t>(rank_)][i]; }

  unsigned char* addr(BufRef ref) const {
    void* base = nullptr;
    switch (ref.buf) {
      case Buffer::Input: base = st_.bufs.input; break;
      case Buffer::Output: base = st_.bufs.output; break;
      case Buffer::Scratch: base = st_.bufs.scratch; break;
    }
    return static_cast<unsigned char*>(base) + ref.offset * st_.esize;
  }

  // Waits for the entry's backend op and send; emits their end events once.
  void complete(Entry& e, bool block) {
    const Op& op = opAt(e.opIndex);
    if (e.ticket && !e.ticketDone) {
      if (block) backend_.wait(*e.ticket);
      if (block || backend_.done(*e.ticket)) {
        e.ticketDone = true;
        const std::optional<int64_t> end = deviceEnd(e, *e.ticket);
        if (e.reduceEndPending) {
          e.reduceEndPending = false;
          chunkEvent(EventKind::ReduceEnd, op, op.step, op.recvPeer, localOffset(op), op.provenance,
                     end);
        }
      }
    }
    if (e.send && !e.sendEndEmitted) {
      if (block && !e.send->done()) {
        // About to wait on the transport: hold no send back meanwhile.
        startSends(true);
        waiting(WaitKind::Room, op.sendPeer, op.step);
        e.send->wait();
        doneWaiting();
      }
      if (block || e.send->done()) {
        e.sendEndEmitted = true;
        chunkEvent(EventKind::SendEnd, op, op.step, op.sendPeer, payloadOffset(op), op.provenance);
      }
    }
  }

  bool finished(const Entry& e) const { return e.ticketDone && e.sendEndEmitted; }

  void release(Entry& e) {
    e.msg.reset();
    if (e.staged) backend_.releaseStaged(e.staged);
    e.staged = nullptr;
    if (e.tmpSlot >= 0) st_.tmpBusy[static_cast<size_t>(e.tmpSlot)] = false;
    e.tmpSlot = -1;
    if (e.deviceEndNs) {
      deviceHorizonNs_ = std::max(deviceHorizonNs_.value_or(*e.deviceEndNs), *e.deviceEndNs);
    }
    if (e.stepEnd && opt_.flight) opt_.flight->stepDone(opAt(e.opIndex).step);
    if (e.stepEnd && sink_) {
      const Op& op = opAt(e.opIndex);
      // On a device backend: when the device had finished every op retired so far, this
      // step's last included (entries retire in program order).
      TelemetryEvent ev = event(EventKind::StepEnd, op.step, op.phase, deviceHorizonNs_);
      ev.bytes = st_.stepBytes[op.step];
      sink_->record(ev);
    }
  }

  void retireOldest() {
    Entry& e = st_.window.front();
    if (e.sendPending) startSends(true, 0);
    complete(e, true);
    release(e);
    st_.window.pop_front();
  }

  // Observes completions without blocking and retires finished entries in order.
  void poll() {
    startSends(false);
    for (Entry& e : st_.window) complete(e, false);
    while (!st_.window.empty() && finished(st_.window.front())) {
      release(st_.window.front());
      st_.window.pop_front();
    }
  }

  // Before writing [lo, hi): retire everything up to the newest zero-copy send reading it.
  void waitForReaders(const unsigned char* lo, const unsigned char* hi) {
    size_t last = 0;
    bool found = false;
    for (size_t j = 0; j < st_.window.size(); ++j) {
      const Entry& e = st_.window[j];
      if (e.readLo && e.readLo < hi && lo < e.readHi && !e.sendEndEmitted) {
        last = j;
        found = true;
      }
    }
    if (!found) return;
    for (size_t j = 0; j <= last; ++j) retireOldest();
  }

  // The step of the message op i receives: the sender's, when the schedule names it.
  uint32_t recvStep(size_t i, const Op& op) const {
    const State::RecvPlan& plan = st_.recvPlan[i];
    return plan.known ? plan.step : op.step;
  }

  [[noreturn]] void mismatch(size_t i, const Op& op, const std::string& field,
                             const std::string& want, const std::string& got) {
    const uint32_t step = recvStep(i, op);
    throw PeerError(rank_, op.recvPeer, step,
                    "header mismatch from rank " + std::to_string(op.recvPeer) + " at step " +
                        std::to_string(step) + ": expected " + field + " " + want + ", got " +
                        field + " " + got);
  }

  void validate(size_t i, const Op& op, const InMessage& m) {
    const ChunkHeader& h = m.header();
    const auto num = [](auto v) { return std::to_string(v); };
    if (h.magic != ChunkHeader::kMagic)
      mismatch(i, op, "magic", hex32(ChunkHeader::kMagic), hex32(h.magic));
    if (h.opSignature != st_.signature) {
      mismatch(i, op, "op signature", hex32(st_.signature), hex32(h.opSignature));
    }
    if (h.epoch != opt_.epoch) mismatch(i, op, "epoch", num(opt_.epoch), num(h.epoch));
    if (h.seq != seq_) mismatch(i, op, "sequence number", num(seq_), num(h.seq));
    if (h.src != op.recvPeer) mismatch(i, op, "source rank", num(op.recvPeer), num(h.src));
    // What the schedule says the peer sends; without a matching send (the peer sends fewer
    // messages than this rank receives) the op's own chunk and slice are all there is.
    const State::RecvPlan& plan = st_.recvPlan[i];
    if (plan.known && h.step != plan.step) mismatch(i, op, "step", num(plan.step), num(h.step));
    const uint32_t chunk = plan.known ? plan.chunk : op.chunk;
    const uint32_t slice = plan.known ? plan.slice : op.slice;
    if (h.chunk != chunk) mismatch(i, op, "chunk", num(chunk), num(h.chunk));
    if (h.slice != slice) mismatch(i, op, "slice", num(slice), num(h.slice));
    if (plan.known && h.offset != plan.senderOffset) {
      mismatch(i, op, "offset", num(plan.senderOffset), num(h.offset));
    }
    const uint64_t bytes = op.count * st_.esize;
    if (h.length != bytes) mismatch(i, op, "length", num(bytes), num(h.length));
    if (m.size() != h.length) mismatch(i, op, "payload size", num(h.length), num(m.size()));
  }

  int acquireTmp() {
    for (size_t k = 0; k < st_.tmpBusy.size(); ++k) {
      if (!st_.tmpBusy[k]) {
        st_.tmpBusy[k] = true;
        return static_cast<int>(k);
      }
    }
    ARL_ENFORCE(false, "no free temporary with " << st_.window.size() << " entries in flight");
    return -1;
  }

  // Stages backend bytes at `p` for sending; the send starts once the staging completes.
  void stageAndSend(Entry& e, const unsigned char* p, uint64_t bytes) {
    const void* view = nullptr;
    e.stageTicket = backend_.stageOut(p, bytes, &view);
    e.stageDone = false;
    e.staged = view;
    if (view == p) {
      e.readLo = p;
      e.readHi = p + bytes;
    }
    deferSend(e, view, bytes);
  }

  // The entry sends `bytes` at `data` once its staging (if any) has completed and every
  // earlier send has started.
  void deferSend(Entry& e, const void* data, uint64_t bytes) {
    e.sendPending = true;
    e.sendData = data;
    e.sendBytes = bytes;
    e.sendEndEmitted = false;
    ++pendingSends_;
  }

  // Whether the entry's staging has completed; with `block`, waits for it.
  bool staged(Entry& e, bool block) {
    if (e.stageDone) return true;
    if (block) {
      backend_.wait(*e.stageTicket);
    } else if (!backend_.done(*e.stageTicket)) {
      return false;
    }
    e.stageDone = true;
    (void)deviceEnd(e, *e.stageTicket);
    // The staging read what the entry's own op wrote: by the ordering contract that op has
    // completed. A backend that breaks it would send bytes not yet reduced.
    const Op& op = opAt(e.opIndex);
    ARL_ENFORCE(!e.ticket || e.ticketDone || backend_.done(*e.ticket),
                "backend " << backend_.name() << ": rank " << rank_ << " op " << e.opIndex
                           << " (step " << op.step << "): staging for the send completed before "
                           << "the operation that produced its data");
    complete(e, false);  // its ReduceEnd before its SendStart
    return true;
  }

  // Starts pending sends in program order, each once its staging has completed; with
  // `block`, waits for the staging of those at window index `upTo` or earlier.
  void startSends(bool block, size_t upTo = SIZE_MAX) {
    for (size_t j = 0; j < st_.window.size() && pendingSends_ > 0; ++j) {
      Entry& e = st_.window[j];
      if (!e.sendPending) continue;
      if (!staged(e, block && j <= upTo)) return;  // later sends wait their turn
      startSend(e, opAt(e.opIndex), e.sendData, e.sendBytes);
    }
  }

  // Sends backend bytes at `p`: to a peer that reads backend memory as they are (the
  // transport lends it a device copy), else staged.
  void sendFromBackend(Entry& e, const Op& op, const unsigned char* p, uint64_t bytes) {
    if (!transport_.readsBackendMemory(op.sendPeer)) {
      stageAndSend(e, p, bytes);
      return;
    }
    // Unstaged, yet after every earlier send has started (a channel's messages in program
    // order); until it starts, later ops may not write what it will lend.
    if (pendingSends_ == 0) {
      startSend(e, op, p, bytes);
      return;
    }
    e.readLo = p;
    e.readHi = p + bytes;
    deferSend(e, p, bytes);
  }

  // The peer of the send that follows op i's before this rank could wait on a peer (the next
  // op sends and receives nothing: a ring window's first step), or -1. Between the two, the
  // executor waits on nothing but its backend (Transport::sendFollows).
  int followingSendPeer(size_t i) const {
    const auto& ops = s_.ranks[static_cast<size_t>(rank_)];
    if (i + 1 >= ops.size()) return -1;
    const Op& next = ops[i + 1];
    return opSends(next.kind) && !opRecvs(next.kind) ? next.sendPeer : -1;
  }

  void startSend(Entry& e, const Op& op, const void* data, uint64_t bytes) {
    ChunkHeader h;
    h.opSignature = st_.signature;
    h.epoch = opt_.epoch;
    h.seq = seq_;
    h.src = rank_;
    h.step = op.step;
    h.chunk = op.chunk;
    h.slice = op.slice;
    h.offset = payloadOffset(op);
    h.length = bytes;
    chunkEvent(EventKind::SendStart, op, op.step, op.sendPeer, h.offset, op.provenance);
    if (const int next = followingSendPeer(e.opIndex); next >= 0) {
      transport_.sendFollows(op.sendPeer, next);
    }
    waiting(WaitKind::Room, op.sendPeer, op.step);
    e.send = transport_.send(op.sendPeer, h, data, bytes);
    doneWaiting();
    e.sendEndEmitted = false;
    if (e.sendPending) {
      e.sendPending = false;
      --pendingSends_;
    }
  }

  void issue(size_t i, const Op& op) {
    while (st_.window.size() >= static_cast<size_t>(opt_.inflight)) retireOldest();
    const uint64_t bytes = op.count * st_.esize;
    if (opWritesDst(op.kind)) {
      unsigned char* d = addr(op.dst);
      waitForReaders(d, d + bytes);
    }
    Entry e;
    e.opIndex = i;
    e.stepEnd = st_.lastOfStep[i];
    if (opRecvs(op.kind)) {
      // A receive that would wait must not hold back a send a peer may be waiting for.
      if (pendingSends_ > 0 && !transport_.ready(op.recvPeer, recvStep(i, op))) startSends(true);
      waiting(WaitKind::Data, op.recvPeer, recvStep(i, op));
      e.msg = transport_.recv(op.recvPeer, recvStep(i, op), opt_.recvTimeout);
      doneWaiting();
      validate(i, op, *e.msg);
      chunkEvent(EventKind::RecvEnd, op, recvStep(i, op), op.recvPeer, localOffset(op),
                 st_.recvPlan[i].provenance);
    }
    // Avg reduces as a sum; the division happens once, in finalizeAvg().
    const RedOp rop = opt_.op == RedOp::Avg ? RedOp::Sum : opt_.op;
    const auto setTicket = [&](Backend::Ticket t, bool reduces) {
      e.ticket = t;
      e.ticketDone = false;
      e.reduceEndPending = reduces;
    };
    switch (op.kind) {
      case OpKind::Send: sendFromBackend(e, op, addr(op.src), bytes); break;
      case OpKind::Recv:
        setTicket(backend_.copyFromHost(addr(op.dst), e.msg->data(), bytes), false);
        break;
      case OpKind::RecvReduceSend: {
        e.tmpSlot = acquireTmp();
        const unsigned char* local = addr(op.src);
        auto* base = static_cast<unsigned char*>(st_.tmp[static_cast<size_t>(e.tmpSlot)]);
        unsigned char* t =
            base +
            (reinterpret_cast<uintptr_t>(local) - reinterpret_cast<uintptr_t>(base)) % kTmpAlign;
        setTicket(backend_.reduceFromHost(t, local, e.msg->data(), op.count, opt_.dtype, rop),
                  true);
        sendFromBackend(e, op, t, bytes);
        break;
      }
      case OpKind::RecvReduceCopySend:
        setTicket(backend_.reduceFromHost(addr(op.dst), addr(op.src), e.msg->data(), op.count,
                                          opt_.dtype, rop),
                  true);
        sendFromBackend(e, op, addr(op.dst), bytes);
        break;
      case OpKind::RecvCopySend:
        if (e.msg->inPeerMemory() || transport_.readsBackendMemory(op.sendPeer)) {
          // A peer's memory is not ours to lend on, nor host memory to send: forward the copy.
          setTicket(backend_.copyFromHost(addr(op.dst), e.msg->data(), bytes), false);
          sendFromBackend(e, op, addr(op.dst), bytes);
          break;
        }
        // Forward the received bytes themselves: the send need not wait for the copy, only
        // for earlier sends to start.
        if (pendingSends_ == 0) {
          startSend(e, op, e.msg->data(), bytes);
        } else {
          deferSend(e, e.msg->data(), bytes);
        }
        setTicket(backend_.copyFromHost(addr(op.dst), e.msg->data(), bytes), false);
        break;
      case OpKind::RecvReduceCopy:
        setTicket(backend_.reduceFromHost(addr(op.dst), addr(op.src), e.msg->data(), op.count,
                                          opt_.dtype, rop),
                  true);
        break;
      case OpKind::Copy: setTicket(backend_.copy(addr(op.dst), addr(op.src), bytes), false); break;
    }
    // Every backend operation reading the message is issued: a lent slice goes back now.
    if (e.msg) e.msg->readIssued();
    st_.window.push_back(std::move(e));
    startSends(false);
  }

  void finalizeAvg() {
    // A non-result rank (the switch) holds no result; its Output is what it sent.
    if (opt_.op != RedOp::Avg || rank_ >= resultRanks(s_)) return;
    uint64_t elems = 0;
    switch (s_.collective) {
      case Collective::AllReduce:
      case Collective::ReduceScatter: elems = s_.outputElems; break;
      case Collective::Reduce: elems = rank_ == s_.root ? s_.outputElems : 0; break;
      case Collective::AllGather:
      case Collective::Broadcast: return;
    }
    if (elems == 0) return;
    backend_.wait(
        backend_.finalize(st_.bufs.output, elems, opt_.dtype, RedOp::Avg, resultRanks(s_)));
  }

  const Schedule& s_;
  int rank_;
  Transport& transport_;
  Backend& backend_;
  TelemetrySink* sink_;
  bool chunks_;
  const ExecOptions& opt_;
  State& st_;
  uint64_t seq_;
  // The executor's clock minus the host's steady clock: device times (Backend::deviceEndNs,
  // on the steady clock) read on the executor's clock after adding it. ExecOptions::clock is
  // the steady clock shifted by a constant (the worker's offset to the coordinator's).
  int64_t clockShiftNs_;
  std::optional<int64_t> deviceHorizonNs_;  // the latest device end of the entries retired
  size_t pendingSends_ = 0;
  int blockedOn_ = -1;  // the peer a wait in progress is for; -1: none
};

}  // namespace

void Executor::run(const RankBuffers& bufs, uint32_t iteration, uint64_t seq) {
  State& st = *state_;
  ARL_ENFORCE(st.window.empty(), "executor of rank " << rank_ << " re-entered");
  ARL_ENFORCE(s_.inputElems == 0 || bufs.input, "rank " << rank_ << ": no input buffer");
  ARL_ENFORCE(s_.outputElems == 0 || bufs.output, "rank " << rank_ << ": no output buffer");
  ARL_ENFORCE(s_.scratchElems == 0 || bufs.scratch, "rank " << rank_ << ": no scratch buffer");
  st.bufs = bufs;
  st.iteration = iteration;
  Run r(s_, rank_, transport_, backend_, sink_, opt_, st, seq);
  try {
    r.execute();
  } catch (...) {
    if (opt_.flight) opt_.flight->waitedOn(r.unfinishedPeers());
    r.abandon();
    throw;
  }
}

}  // namespace arl
