// Symbolic execution of schedules (see verifier.h), in the spirit of MSCCL's checker: rather
// than moving numbers, every element carries the set of ranks whose contributions it holds
// and the input index they came from, so a wrong schedule is caught however the data happen to
// sum.
//
// Buffers are interval maps of segments whose input index grows linearly along the segment,
// so the cost of a run is proportional to the number of ops (times a log), not to the number
// of elements: a million-element vector cut into 1K slices verifies in milliseconds.
//
// Ranks run as sequential processes over FIFO channels of bounded capacity. An op that
// receives and sends (RecvReduceSend, ...) first takes its message, then waits for room on its
// outgoing channel, as NCCL's primitives do: they hold the received slice in a FIFO slot while
// they wait for send credit. Every rank touches only its own buffers and each channel has one
// writer and one reader, so the outcome (values, and whether a deadlock occurs) does not depend
// on the order in which ready ranks are stepped.
#include "schedule/verifier.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "base/limits.h"

namespace arl {

namespace {

// One run of elements: element k of the segment holds the contributions `mask` of input
// element inBase + k. `writer` is the index of the op that last wrote the segment's first
// element (-1: initial value); it only serves error messages, so neighbouring segments of equal
// content merge even when different ops wrote them.
struct Seg {
  uint64_t len = 0;
  bool defined = false;
  uint64_t mask = 0;
  uint64_t inBase = 0;
  int32_t writer = -1;
};

using Pieces = std::vector<Seg>;

bool canMerge(const Seg& a, const Seg& b) {
  if (a.defined != b.defined) {
    return false;
  }
  return !a.defined || (a.mask == b.mask && a.inBase + a.len == b.inBase);
}

// Interval map [start -> Seg] covering [0, size) without gaps.
class SymBuffer {
 public:
  void reset(uint64_t size) {
    m_.clear();
    size_ = size;
    if (size > 0) {
      m_.emplace(0, Seg{size, false, 0, 0, -1});
    }
  }

  // Appends to `out` the pieces covering [start, start + len), clipped to the range.
  void read(uint64_t start, uint64_t len, Pieces& out) const {
    if (len == 0) {
      return;
    }
    auto it = m_.upper_bound(start);
    --it;
    const uint64_t end = start + len;
    for (; it != m_.end() && it->first < end; ++it) {
      const uint64_t a = std::max(it->first, start);
      const uint64_t b = std::min(it->first + it->second.len, end);
      Seg p = it->second;
      p.inBase += a - it->first;
      p.len = b - a;
      out.push_back(p);
    }
  }

  // Replaces [start, start + total length of pieces) with `pieces`.
  void write(uint64_t start, const Pieces& pieces) {
    uint64_t len = 0;
    for (const Seg& p : pieces) {
      len += p.len;
    }
    if (len == 0) {
      return;
    }
    const auto first = split(start);
    const auto stop = split(start + len);
    m_.erase(first, stop);
    uint64_t pos = start;
    auto head = stop;
    for (const Seg& p : pieces) {
      auto ins = m_.emplace_hint(stop, pos, p);
      if (head == stop) {
        head = ins;
      }
      pos += p.len;
    }
    // Coalesce the written range with itself and with both neighbours, so that a buffer
    // written slice by slice shrinks back to a few segments.
    auto cur = head;
    if (cur != m_.begin()) {
      --cur;
    }
    for (;;) {
      const auto next = std::next(cur);
      if (next == m_.end()) {
        break;
      }
      const bool last = next == stop;
      if (canMerge(cur->second, next->second)) {
        cur->second.len += next->second.len;
        m_.erase(next);
      } else {
        cur = next;
      }
      if (last) {
        break;
      }
    }
  }

 private:
  using Iter = std::map<uint64_t, Seg>::iterator;

  // Makes `pos` the start of a segment; returns that segment (end() at the buffer's end).
  Iter split(uint64_t pos) {
    if (pos >= size_) {
      return m_.end();
    }
    auto it = std::prev(m_.upper_bound(pos));
    if (it->first == pos) {
      return it;
    }
    Seg tail = it->second;
    const uint64_t cut = pos - it->first;
    tail.len -= cut;
    tail.inBase += cut;
    it->second.len = cut;
    return m_.emplace_hint(std::next(it), pos, tail);
  }

  std::map<uint64_t, Seg> m_;
  uint64_t size_ = 0;
};

struct Message {
  int opIndex = 0;
  uint32_t step = 0;
  uint64_t count = 0;
  Pieces data;
};

std::string rankSet(uint64_t mask) {
  std::string s = "{";
  bool first = true;
  for (int i = 0; i < kMaxRanks;) {
    if (((mask >> i) & 1U) == 0) {
      ++i;
      continue;
    }
    int j = i;
    while (j + 1 < kMaxRanks && ((mask >> (j + 1)) & 1U) != 0) {
      ++j;
    }
    if (!first) {
      s += ",";
    }
    first = false;
    s += std::to_string(i);
    if (j > i) {
      s += (j == i + 1 ? "," : "-") + std::to_string(j);
    }
    i = j + 1;
  }
  return s + "}";
}

int lowestBit(uint64_t m) { return __builtin_ctzll(m); }

std::string_view bufName(Buffer b) {
  switch (b) {
    case Buffer::Input: return "Input";
    case Buffer::Output: return "Output";
    case Buffer::Scratch: return "Scratch";
  }
  return "?";
}

std::string rangeText(Buffer b, uint64_t off, uint64_t len) {
  return std::string(bufName(b)) + "[" + std::to_string(off) + ".." + std::to_string(off + len) +
         ")";
}

std::string opWhere(int rank, size_t index, const Op& op) {
  return "rank " + std::to_string(rank) + " op " + std::to_string(index) + " (step " +
         std::to_string(op.step) + ", " + std::string(toString(op.kind)) + ")";
}

uint64_t unionMask(const Pieces& p) {
  uint64_t m = 0;
  for (const Seg& s : p) {
    m |= s.mask;
  }
  return m;
}

class Machine {
 public:
  Machine(const Schedule& s, const VerifyOptions& opt, bool inPlace)
      : s_(s), opt_(opt), inPlace_(inPlace), n_(s.nranks) {}

  // Runs the schedule; returns the first error ("" when the postcondition holds).
  // `prov`, when given, receives each op's payload provenance.
  std::string run(std::vector<std::vector<uint64_t>>* prov) {
    prov_ = prov;
    if (prov_ != nullptr) {
      prov_->assign(static_cast<size_t>(n_), {});
      for (int r = 0; r < n_; ++r) {
        (*prov_)[static_cast<size_t>(r)].assign(ops(r).size(), 0);
      }
    }
    setUpBuffers();
    chans_.assign(static_cast<size_t>(n_) * static_cast<size_t>(n_), {});
    state_.assign(static_cast<size_t>(n_), {});
    if (std::string e = simulate(); !e.empty()) {
      return e;
    }
    if (std::string e = leftovers(); !e.empty()) {
      return e;
    }
    return postcondition();
  }

 private:
  struct RankState {
    size_t pc = 0;
    bool holding = false;  // received the current op's message, waiting to send
    Pieces pending;        // what the current op will send
  };

  // Where a logical buffer of a rank lives: physical buffer index and base offset.
  struct Place {
    int phys = 0;
    uint64_t base = 0;
  };

  const std::vector<Op>& ops(int r) const { return s_.ranks[static_cast<size_t>(r)]; }

  Place place(int r, Buffer b) const {
    const uint64_t window = static_cast<uint64_t>(r) * s_.count;
    if (inPlace_) {
      switch (s_.collective) {
        case Collective::ReduceScatter:
          if (b == Buffer::Output) {
            return {0, window};
          }
          break;
        case Collective::AllGather:
          if (b == Buffer::Input) {
            return {1, window};
          }
          break;
        default:
          if (b == Buffer::Input) {
            return {1, 0};
          }
          break;
      }
    }
    return {static_cast<int>(b), 0};
  }

  SymBuffer& phys(int r, int p) {
    return bufs_[static_cast<size_t>(r) * 3 + static_cast<size_t>(p)];
  }

  void setUpBuffers() {
    bufs_.assign(static_cast<size_t>(n_) * 3, {});
    for (int r = 0; r < n_; ++r) {
      phys(r, 0).reset(s_.inputElems);
      phys(r, 1).reset(s_.outputElems);
      phys(r, 2).reset(s_.scratchElems);
      if (r >= resultRanks(s_)) continue;  // no contribution: its Input holds nothing to read
      const Place in = place(r, Buffer::Input);
      Pieces init{Seg{s_.inputElems, true, 1ULL << r, 0, -1}};
      phys(r, in.phys).write(in.base, init);
    }
  }

  // Reads a logical range; returns "" or an error naming the unwritten part.
  std::string readRange(int r, const BufRef& ref, uint64_t len, Pieces& out) {
    const Place pl = place(r, ref.buf);
    out.clear();
    phys(r, pl.phys).read(pl.base + ref.offset, len, out);
    uint64_t pos = ref.offset;
    for (const Seg& p : out) {
      if (!p.defined) {
        return "reads " + rangeText(ref.buf, pos, p.len) + ", which holds no data yet";
      }
      pos += p.len;
    }
    return {};
  }

  void writeRange(int r, const BufRef& ref, Pieces data, int32_t writer) {
    for (Seg& p : data) {
      p.writer = writer;
    }
    const Place pl = place(r, ref.buf);
    phys(r, pl.phys).write(pl.base + ref.offset, data);
  }

  // payload (op) local, element by element; both are fully defined and of equal length.
  static std::string reduce(const Pieces& payload, const Pieces& local, uint64_t srcOffset,
                            Buffer srcBuf, Pieces& out) {
    out.clear();
    size_t i = 0;
    size_t j = 0;
    uint64_t usedA = 0;
    uint64_t usedB = 0;
    uint64_t pos = 0;
    while (i < payload.size() && j < local.size()) {
      const Seg& a = payload[i];
      const Seg& b = local[j];
      const uint64_t len = std::min(a.len - usedA, b.len - usedB);
      const uint64_t ia = a.inBase + usedA;
      const uint64_t ib = b.inBase + usedB;
      if ((a.mask & b.mask) != 0) {
        return "double-counted contribution of rank " + std::to_string(lowestBit(a.mask & b.mask)) +
               ": the received data holds ranks " + rankSet(a.mask) + " and " +
               rangeText(srcBuf, srcOffset + pos, len) + " holds ranks " + rankSet(b.mask);
      }
      if (ia != ib) {
        return "mixes elements: received data for input element " + std::to_string(ia) +
               " is reduced with " + rangeText(srcBuf, srcOffset + pos, len) +
               ", which holds input element " + std::to_string(ib);
      }
      Seg c{len, true, a.mask | b.mask, ia, -1};
      if (!out.empty() && canMerge(out.back(), c)) {
        out.back().len += len;
      } else {
        out.push_back(c);
      }
      pos += len;
      usedA += len;
      usedB += len;
      if (usedA == a.len) {
        ++i;
        usedA = 0;
      }
      if (usedB == b.len) {
        ++j;
        usedB = 0;
      }
    }
    return {};
  }

  std::deque<Message>& chan(int from, int to) {
    return chans_[static_cast<size_t>(from) * static_cast<size_t>(n_) + static_cast<size_t>(to)];
  }

  bool full(int from, int to) {
    const int64_t cap = opt_.channelCapacity > 0 ? opt_.channelCapacity : s_.window;
    return chan(from, to).size() >= static_cast<size_t>(std::max<int64_t>(1, cap));
  }

  void record(int r, size_t i, uint64_t mask) {
    if (prov_ != nullptr) {
      (*prov_)[static_cast<size_t>(r)][i] = mask;
    }
  }

  enum class Stepped { Advanced, Blocked, Failed };

  // Tries to make progress on rank r's current op.
  Stepped stepRank(int r, std::string& err) {
    RankState& st = state_[static_cast<size_t>(r)];
    const Op& op = ops(r)[st.pc];
    const auto idx = static_cast<int32_t>(st.pc);
    auto fail = [&](const std::string& what) {
      err = (inPlace_ ? "in-place run: " : "") + opWhere(r, st.pc, op) + ": " + what;
      return Stepped::Failed;
    };

    if (op.kind == OpKind::Copy) {
      if (std::string e = readRange(r, op.src, op.count, a_); !e.empty()) {
        return fail(e);
      }
      record(r, st.pc, unionMask(a_));
      writeRange(r, op.dst, a_, idx);
      ++st.pc;
      return Stepped::Advanced;
    }

    bool tookMessage = false;
    if (opRecvs(op.kind) && !st.holding) {
      std::deque<Message>& in = chan(op.recvPeer, r);
      if (in.empty()) {
        return Stepped::Blocked;
      }
      Message msg = std::move(in.front());
      in.pop_front();
      if (msg.count != op.count) {
        return fail("message from rank " + std::to_string(op.recvPeer) + " (its op " +
                    std::to_string(msg.opIndex) + ", step " + std::to_string(msg.step) +
                    ") carries " + std::to_string(msg.count) + " elements, rank " +
                    std::to_string(r) + " expects " + std::to_string(op.count));
      }
      Pieces value;
      if (opReduces(op.kind)) {
        if (std::string e = readRange(r, op.src, op.count, a_); !e.empty()) {
          return fail(e);
        }
        if (std::string e = reduce(msg.data, a_, op.src.offset, op.src.buf, value); !e.empty()) {
          return fail(e + " (message from rank " + std::to_string(op.recvPeer) + ")");
        }
      } else {
        value = std::move(msg.data);
      }
      if (opWritesDst(op.kind)) {
        writeRange(r, op.dst, value, idx);
      }
      if (!opSends(op.kind)) {
        record(r, st.pc, unionMask(value));
        ++st.pc;
        return Stepped::Advanced;
      }
      st.pending = std::move(value);
      st.holding = true;
      tookMessage = true;
    }

    // The op sends: a Send, or a receiving op that holds its message.
    if (full(r, op.sendPeer)) {
      return tookMessage ? Stepped::Advanced : Stepped::Blocked;
    }
    Message msg;
    msg.opIndex = idx;
    msg.step = op.step;
    msg.count = op.count;
    if (st.holding) {
      msg.data = std::move(st.pending);
      st.holding = false;
    } else if (std::string e = readRange(r, op.src, op.count, msg.data); !e.empty()) {
      return fail(e);
    }
    record(r, st.pc, unionMask(msg.data));
    chan(r, op.sendPeer).push_back(std::move(msg));
    ++st.pc;
    return Stepped::Advanced;
  }

  std::string simulate() {
    for (;;) {
      bool progress = false;
      bool allDone = true;
      for (int r = 0; r < n_; ++r) {
        RankState& st = state_[static_cast<size_t>(r)];
        while (st.pc < ops(r).size()) {
          std::string err;
          const Stepped res = stepRank(r, err);
          if (res == Stepped::Failed) {
            return err;
          }
          if (res == Stepped::Blocked) {
            break;
          }
          progress = true;
        }
        if (st.pc < ops(r).size()) {
          allDone = false;
        }
      }
      if (allDone) {
        return {};
      }
      if (!progress) {
        return deadlock();
      }
    }
  }

  std::string deadlock() {
    std::string m = std::string(inPlace_ ? "in-place run: " : "") + "deadlock:";
    bool first = true;
    for (int r = 0; r < n_; ++r) {
      const RankState& st = state_[static_cast<size_t>(r)];
      if (st.pc >= ops(r).size()) {
        continue;
      }
      const Op& op = ops(r)[st.pc];
      m += first ? " " : "; ";
      first = false;
      m += opWhere(r, st.pc, op);
      if (opRecvs(op.kind) && !st.holding) {
        m += " waits for data from rank " + std::to_string(op.recvPeer);
      } else {
        m += " waits for room to send to rank " + std::to_string(op.sendPeer) + " (channel holds " +
             std::to_string(chan(r, op.sendPeer).size()) + " unreceived message(s))";
      }
    }
    return m;
  }

  std::string leftovers() {
    for (int from = 0; from < n_; ++from) {
      for (int to = 0; to < n_; ++to) {
        const std::deque<Message>& c = chan(from, to);
        if (c.empty()) {
          continue;
        }
        const Message& msg = c.front();
        const size_t i = static_cast<size_t>(msg.opIndex);
        return std::string(inPlace_ ? "in-place run: " : "") + opWhere(from, i, ops(from)[i]) +
               ": send to rank " + std::to_string(to) + " without a receive (" +
               std::to_string(msg.count) + " elements never received by rank " +
               std::to_string(to) + ", " + std::to_string(c.size()) + " message(s) left)";
      }
    }
    return {};
  }

  // Expected content of a window of Output: element k holds ranks `mask` of input index
  // inBase + k.
  struct Expect {
    uint64_t begin = 0;
    uint64_t len = 0;
    uint64_t mask = 0;
    uint64_t inBase = 0;
  };

  std::string checkOutput(int r, const Expect& x) {
    Pieces got;
    const Place pl = place(r, Buffer::Output);
    phys(r, pl.phys).read(pl.base + x.begin, x.len, got);
    uint64_t pos = x.begin;
    for (const Seg& p : got) {
      const uint64_t want = x.inBase + (pos - x.begin);
      std::string what;
      if (!p.defined) {
        what = "was never written";
      } else if (p.mask != x.mask) {
        what = "holds contributions of ranks " + rankSet(p.mask) + ", expected " + rankSet(x.mask);
        if ((x.mask & ~p.mask) != 0) {
          what += " (missing " + rankSet(x.mask & ~p.mask) + ")";
        }
      } else if (p.inBase != want) {
        what = "holds input element " + std::to_string(p.inBase) + " at element " +
               std::to_string(pos) + ", expected input element " + std::to_string(want);
      }
      if (!what.empty()) {
        std::string m = std::string(inPlace_ ? "in-place run: " : "") + "rank " +
                        std::to_string(r) + ": after the schedule " +
                        rangeText(Buffer::Output, pos, p.len) + " " + what;
        if (p.writer >= 0) {
          const size_t i = static_cast<size_t>(p.writer);
          m += "; its first element was last written by " + opWhere(r, i, ops(r)[i]);
        } else if (p.defined) {
          m += "; never written by the schedule";
        }
        return m;
      }
      pos += p.len;
    }
    return {};
  }

  std::string postcondition() {
    const int results = resultRanks(s_);
    const uint64_t all = results == kMaxRanks ? ~0ULL : (1ULL << results) - 1;
    const uint64_t c = s_.count;
    for (int r = 0; r < results; ++r) {
      std::vector<Expect> want;
      switch (s_.collective) {
        case Collective::AllReduce: want.push_back({0, c, all, 0}); break;
        case Collective::ReduceScatter:
          want.push_back({0, c, all, static_cast<uint64_t>(r) * c});
          break;
        case Collective::AllGather:
          for (int k = 0; k < n_; ++k) {
            want.push_back({static_cast<uint64_t>(k) * c, c, 1ULL << k, 0});
          }
          break;
        case Collective::Reduce:
          if (r == s_.root) {
            want.push_back({0, c, all, 0});
          }
          break;
        case Collective::Broadcast: want.push_back({0, c, 1ULL << s_.root, 0}); break;
      }
      for (const Expect& x : want) {
        if (x.len == 0) {
          continue;
        }
        if (std::string e = checkOutput(r, x); !e.empty()) {
          return e;
        }
      }
    }
    return {};
  }

  const Schedule& s_;
  const VerifyOptions& opt_;
  bool inPlace_;
  int n_;
  std::vector<SymBuffer> bufs_;  // 3 per rank: Input, Output, Scratch (physical)
  std::vector<std::deque<Message>> chans_;
  std::vector<RankState> state_;
  std::vector<std::vector<uint64_t>>* prov_ = nullptr;
  Pieces a_;  // scratch for reads
};

uint64_t bufSize(const Schedule& s, Buffer b) {
  switch (b) {
    case Buffer::Input: return s.inputElems;
    case Buffer::Output: return s.outputElems;
    case Buffer::Scratch: return s.scratchElems;
  }
  return 0;
}

// Checks what needs no execution: header, peers, counts, bounds, writes to Input.
std::string checkStatic(const Schedule& s) {
  if (s.nranks < 1) {
    return "schedule has " + std::to_string(s.nranks) + " ranks";
  }
  if (s.nranks > kMaxRanks) {
    return "the verifier supports at most " + std::to_string(kMaxRanks) +
           " ranks (rank sets are 64-bit masks); the schedule has " + std::to_string(s.nranks);
  }
  if (s.ranks.size() != static_cast<size_t>(s.nranks)) {
    return "schedule lists ops for " + std::to_string(s.ranks.size()) + " ranks but has nranks " +
           std::to_string(s.nranks);
  }
  if ((s.collective == Collective::Reduce || s.collective == Collective::Broadcast) &&
      (s.root < 0 || s.root >= s.nranks)) {
    return "root " + std::to_string(s.root) + " is not a rank";
  }
  if (s.nonResultRanks < 0 || s.nonResultRanks >= s.nranks) {
    return "schedule has " + std::to_string(s.nonResultRanks) + " non-result ranks of " +
           std::to_string(s.nranks) + " (at least one rank must hold the result)";
  }
  const uint64_t wantIn = inputElemsFor(s.collective, resultRanks(s), s.count);
  const uint64_t wantOut = outputElemsFor(s.collective, resultRanks(s), s.count);
  if (s.inputElems != wantIn || s.outputElems != wantOut) {
    return "schedule header gives Input/Output sizes " + std::to_string(s.inputElems) + "/" +
           std::to_string(s.outputElems) + " elements, but " + std::string(toString(s.collective)) +
           " of count " + std::to_string(s.count) + " over " + std::to_string(resultRanks(s)) +
           " ranks needs " + std::to_string(wantIn) + "/" + std::to_string(wantOut);
  }
  for (int r = 0; r < s.nranks; ++r) {
    const auto& ops = s.ranks[static_cast<size_t>(r)];
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      auto fail = [&](const std::string& what) { return opWhere(r, i, op) + ": " + what; };
      if (op.count == 0) {
        return fail("moves 0 elements");
      }
      auto badPeer = [&](int p) { return p < 0 || p >= s.nranks || p == r; };
      if (opSends(op.kind) && badPeer(op.sendPeer)) {
        return fail("sends to rank " + std::to_string(op.sendPeer) +
                    (op.sendPeer == r ? " (itself)" : " (no such rank)"));
      }
      if (opRecvs(op.kind) && badPeer(op.recvPeer)) {
        return fail("receives from rank " + std::to_string(op.recvPeer) +
                    (op.recvPeer == r ? " (itself)" : " (no such rank)"));
      }
      auto outOfBounds = [&](const BufRef& ref) {
        const uint64_t size = bufSize(s, ref.buf);
        return ref.offset > size || op.count > size - ref.offset;
      };
      if (opReadsSrc(op.kind) && outOfBounds(op.src)) {
        return fail("reads " + rangeText(op.src.buf, op.src.offset, op.count) + " beyond its " +
                    std::to_string(bufSize(s, op.src.buf)) + " elements");
      }
      if (opWritesDst(op.kind)) {
        if (op.dst.buf == Buffer::Input) {
          return fail("writes " + rangeText(op.dst.buf, op.dst.offset, op.count) +
                      "; Input is read-only");
        }
        if (outOfBounds(op.dst)) {
          return fail("writes " + rangeText(op.dst.buf, op.dst.offset, op.count) + " beyond its " +
                      std::to_string(bufSize(s, op.dst.buf)) + " elements");
        }
      }
    }
  }
  return {};
}

VerifyResult runAll(const Schedule& s, const VerifyOptions& opt,
                    std::vector<std::vector<uint64_t>>* prov) {
  VerifyResult res;
  res.message = checkStatic(s);
  if (res.message.empty()) {
    res.message = Machine(s, opt, false).run(prov);
  }
  if (res.message.empty() && opt.checkInPlace) {
    res.message = Machine(s, opt, true).run(nullptr);
  }
  res.ok = res.message.empty();
  return res;
}

}  // namespace

VerifyResult verify(const Schedule& s, const VerifyOptions& opt) { return runAll(s, opt, nullptr); }

// Provenance is the rank set of the payload an op sends (for ops that receive and send, the
// set after the op's own reduction), of the payload it receives for receive-only ops, and of
// the copied data for Copy: the union over the payload's elements, which is every element's
// set when the payload is uniform. Recorded from the out-of-place run.
VerifyResult annotate(Schedule& s, const VerifyOptions& opt) {
  std::vector<std::vector<uint64_t>> prov;
  VerifyResult res = runAll(s, opt, &prov);
  for (size_t r = 0; r < prov.size() && r < s.ranks.size(); ++r) {
    for (size_t i = 0; i < prov[r].size() && i < s.ranks[r].size(); ++i) {
      s.ranks[r][i].provenance = prov[r][i];
    }
  }
  return res;
}

}  // namespace arl
