// Ordering an MSCCL program's thread blocks into one sequence of ops per rank, and laying its
// chunks out over the lab's buffers (msccl_import.h says how).
#include "schedule/msccl_import.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <tuple>

#include "gen_util.h"

namespace arl {

namespace {

bool stepSends(MscclStepType t) {
  return t == MscclStepType::Send || t == MscclStepType::RecvCopySend ||
         t == MscclStepType::RecvReduceSend || t == MscclStepType::RecvReduceCopySend;
}
bool stepRecvs(MscclStepType t) {
  return t != MscclStepType::Send && t != MscclStepType::Copy && t != MscclStepType::Nop;
}
bool stepReadsSrc(MscclStepType t) {
  return t == MscclStepType::Send || t == MscclStepType::Copy ||
         t == MscclStepType::RecvReduceSend || t == MscclStepType::RecvReduceCopy ||
         t == MscclStepType::RecvReduceCopySend;
}
bool stepWritesDst(MscclStepType t) {
  return t == MscclStepType::Recv || t == MscclStepType::RecvReduceCopy ||
         t == MscclStepType::RecvCopySend || t == MscclStepType::RecvReduceCopySend ||
         t == MscclStepType::Copy;
}

OpKind opKindOf(MscclStepType t) {
  switch (t) {
    case MscclStepType::Send: return OpKind::Send;
    case MscclStepType::Recv: return OpKind::Recv;
    case MscclStepType::RecvReduceCopy: return OpKind::RecvReduceCopy;
    case MscclStepType::RecvCopySend: return OpKind::RecvCopySend;
    case MscclStepType::RecvReduceSend: return OpKind::RecvReduceSend;
    case MscclStepType::RecvReduceCopySend: return OpKind::RecvReduceCopySend;
    case MscclStepType::Copy:
    case MscclStepType::Nop: return OpKind::Copy;
  }
  return OpKind::Copy;
}

char bufLetter(MscclBuffer b) {
  return b == MscclBuffer::Input ? 'i' : b == MscclBuffer::Output ? 'o' : 's';
}

// Chunks of buffer `b` on gpu `g`; an in-place program's o is its i.
int bufChunks(const MscclProgram& p, const MscclGpu& g, MscclBuffer b) {
  if (b == MscclBuffer::Scratch) return g.sChunks;
  if (b == MscclBuffer::Output && !p.inPlace) return g.oChunks;
  return g.iChunks;
}

// Every step of every tb as one node of a graph whose edges are what must come first.
struct Node {
  int gpu = 0;
  int tb = 0;
  int step = 0;
  const MscclStep* st = nullptr;
  int match = -1;  // the step at the other end of its message (a send's receive or vice versa)
  int level = 0;   // longest path to it
};

struct Graph {
  std::vector<Node> nodes;
  std::vector<std::vector<int>> first;  // first[gpu][tb]: index of its step 0
  std::vector<std::vector<int>> succ;
  int at(int gpu, int tb, int step) const {
    return first[static_cast<size_t>(gpu)][static_cast<size_t>(tb)] + step;
  }
};

[[noreturn]] void fail(const MscclProgram& p, int line, const std::string& why) {
  throw MscclImportError(p.file, line, why);
}

std::string stepName(const Node& n) {
  return "gpu " + std::to_string(n.gpu) + " tb " + std::to_string(n.tb) + " step " +
         std::to_string(n.step) + " (line " + std::to_string(n.st->line) + ")";
}

void checkChunks(const MscclProgram& p, const MscclGpu& g) {
  const int n = p.ngpus;
  const auto bad = [&](const std::string& want) {
    fail(p, g.line,
         "gpu " + std::to_string(g.id) + " has i_chunks=" + std::to_string(g.iChunks) +
             " o_chunks=" + std::to_string(g.oChunks) + "; " + std::string(toString(p.collective)) +
             " needs " + want);
  };
  const MscclGpu& g0 = p.gpus.front();
  if (g.iChunks != g0.iChunks || g.oChunks != g0.oChunks) {
    bad("the same buffers on every gpu (gpu 0 has i_chunks=" + std::to_string(g0.iChunks) +
        " o_chunks=" + std::to_string(g0.oChunks) + ")");
  }
  switch (p.collective) {
    case Collective::AllReduce:
      if (g.iChunks < 1 || (g.oChunks != g.iChunks && !(p.inPlace && g.oChunks == 0))) {
        bad("i_chunks >= 1 and o_chunks equal to it");
      }
      break;
    case Collective::AllGather:
      if (g.iChunks < 1 || g.oChunks != n * g.iChunks) bad("o_chunks = ngpus * i_chunks >= 1");
      break;
    default:
      if (g.oChunks < 1 || g.iChunks != n * g.oChunks) bad("i_chunks = ngpus * o_chunks >= 1");
      break;
  }
}

void checkRange(const MscclProgram& p, const MscclGpu& g, const MscclStep& s, bool src) {
  const MscclBuffer b = src ? s.srcbuf : s.dstbuf;
  const int off = src ? s.srcoff : s.dstoff;
  const int have = bufChunks(p, g, b);
  if (off < 0 || s.cnt > have - off) {
    fail(p, s.line,
         std::string(src ? "reads" : "writes") + " chunks [" + std::to_string(off) + ", " +
             std::to_string(off + s.cnt) + ") of buffer " + bufLetter(b) + ", which has " +
             std::to_string(have) + " (chunk out of range)");
  }
  if (!src && b == MscclBuffer::Input && !p.inPlace) {
    fail(p, s.line, "writes the input buffer i of an out-of-place program");
  }
}

void checkStep(const MscclProgram& p, const MscclGpu& g, const MscclTb& t, const MscclStep& s) {
  if (s.type != MscclStepType::Nop && s.cnt < 1) {
    fail(p, s.line, "cnt must be at least 1");
  }
  if (stepSends(s.type) && t.send < 0) fail(p, s.line, "the step sends, but its tb has send=-1");
  if (stepRecvs(s.type) && t.recv < 0) fail(p, s.line, "the step receives, but its tb has recv=-1");
  if (stepReadsSrc(s.type)) checkRange(p, g, s, true);
  if (stepWritesDst(s.type)) checkRange(p, g, s, false);
  if (s.depid >= 0) {
    if (s.depid >= static_cast<int>(g.tbs.size())) {
      fail(p, s.line,
           "depends on tb " + std::to_string(s.depid) + ", which gpu " + std::to_string(g.id) +
               " does not have");
    }
    const MscclTb& d = g.tbs[static_cast<size_t>(s.depid)];
    if (s.deps >= static_cast<int>(d.steps.size())) {
      fail(p, s.line,
           "depends on step " + std::to_string(s.deps) + " of tb " + std::to_string(s.depid) +
               ", which has " + std::to_string(d.steps.size()) + " steps");
    }
  }
}

Graph makeNodes(const MscclProgram& p) {
  Graph gr;
  gr.first.resize(p.gpus.size());
  for (const MscclGpu& g : p.gpus) {
    for (const MscclTb& t : g.tbs) {
      gr.first[static_cast<size_t>(g.id)].push_back(static_cast<int>(gr.nodes.size()));
      for (size_t i = 0; i < t.steps.size(); ++i) {
        gr.nodes.push_back({g.id, t.id, static_cast<int>(i), &t.steps[i], -1, 0});
      }
    }
  }
  gr.succ.resize(gr.nodes.size());
  return gr;
}

// The one tb of gpu `g` that sends to (recv: receives from) `peer` on `chan`, or nullptr.
using TbKey = std::tuple<int, int, int>;  // gpu, peer, chan

void collectEnds(const MscclProgram& p, std::map<TbKey, const MscclTb*>& sends,
                 std::map<TbKey, const MscclTb*>& recvs) {
  for (const MscclGpu& g : p.gpus) {
    for (const MscclTb& t : g.tbs) {
      if (t.send >= 0 && !sends.emplace(TbKey{g.id, t.send, t.chan}, &t).second) {
        fail(p, t.line,
             "a second tb of gpu " + std::to_string(g.id) + " sends to gpu " +
                 std::to_string(t.send) + " on channel " + std::to_string(t.chan));
      }
      if (t.recv >= 0 && !recvs.emplace(TbKey{g.id, t.recv, t.chan}, &t).second) {
        fail(p, t.line,
             "a second tb of gpu " + std::to_string(g.id) + " receives from gpu " +
                 std::to_string(t.recv) + " on channel " + std::to_string(t.chan));
      }
    }
  }
}

std::vector<int> stepsThat(const Graph& gr, int gpu, const MscclTb& t, bool sends) {
  std::vector<int> out;
  for (size_t i = 0; i < t.steps.size(); ++i) {
    const MscclStepType ty = t.steps[i].type;
    if (sends ? stepSends(ty) : stepRecvs(ty)) out.push_back(gr.at(gpu, t.id, static_cast<int>(i)));
  }
  return out;
}

// MSCCL pairs the k-th send of a tb on a channel with the k-th receive of the peer's tb
// that receives from it on that channel.
void pairMessages(const MscclProgram& p, Graph& gr) {
  std::map<TbKey, const MscclTb*> sends;
  std::map<TbKey, const MscclTb*> recvs;
  collectEnds(p, sends, recvs);
  for (const auto& [key, t] : recvs) {
    const auto [b, a, chan] = key;
    if (!sends.contains(TbKey{a, b, chan}) && !stepsThat(gr, b, *t, false).empty()) {
      fail(p, t->line,
           "tb " + std::to_string(t->id) + " of gpu " + std::to_string(b) + " receives from gpu " +
               std::to_string(a) + " on channel " + std::to_string(chan) + ", but no tb of gpu " +
               std::to_string(a) + " sends to it there");
    }
  }
  for (const auto& [key, t] : sends) {
    const auto [a, b, chan] = key;
    const std::vector<int> out = stepsThat(gr, a, *t, true);
    const auto r = recvs.find(TbKey{b, a, chan});
    const std::vector<int> in =
        r == recvs.end() ? std::vector<int>{} : stepsThat(gr, b, *r->second, false);
    const std::string pair = " on channel " + std::to_string(chan);
    for (size_t k = 0; k < std::max(out.size(), in.size()); ++k) {
      if (k >= in.size()) {
        fail(p, gr.nodes[static_cast<size_t>(out[k])].st->line,
             "send " + std::to_string(k) + " to gpu " + std::to_string(b) + pair +
                 " has no matching receive (gpu " + std::to_string(b) + " receives " +
                 std::to_string(in.size()) + " from gpu " + std::to_string(a) + ")");
      }
      if (k >= out.size()) {
        fail(p, gr.nodes[static_cast<size_t>(in[k])].st->line,
             "receive " + std::to_string(k) + " from gpu " + std::to_string(a) + pair +
                 " has no matching send (gpu " + std::to_string(a) + " sends " +
                 std::to_string(out.size()) + " to gpu " + std::to_string(b) + ")");
      }
      Node& s = gr.nodes[static_cast<size_t>(out[k])];
      Node& rcv = gr.nodes[static_cast<size_t>(in[k])];
      if (s.st->cnt != rcv.st->cnt) {
        fail(p, rcv.st->line,
             "receives cnt=" + std::to_string(rcv.st->cnt) + " but its send, " + stepName(s) +
                 ", sends cnt=" + std::to_string(s.st->cnt));
      }
      s.match = in[k];
      rcv.match = out[k];
    }
  }
}

void addEdges(Graph& gr) {
  for (size_t i = 0; i < gr.nodes.size(); ++i) {
    const Node& n = gr.nodes[i];
    if (n.step > 0) gr.succ[i - 1].push_back(static_cast<int>(i));
    if (n.st->depid >= 0)
      gr.succ[static_cast<size_t>(gr.at(n.gpu, n.st->depid, n.st->deps))].push_back(
          static_cast<int>(i));
    if (n.match >= 0 && stepSends(n.st->type)) gr.succ[i].push_back(n.match);
  }
}

// Longest-path levels by Kahn's algorithm; refuses a cycle, naming one of its steps.
void computeLevels(const MscclProgram& p, Graph& gr) {
  std::vector<int> indeg(gr.nodes.size(), 0);
  for (const auto& out : gr.succ) {
    for (int j : out) ++indeg[static_cast<size_t>(j)];
  }
  std::vector<int> ready;
  for (size_t i = 0; i < gr.nodes.size(); ++i) {
    gr.nodes[i].level = 0;
    if (indeg[i] == 0) ready.push_back(static_cast<int>(i));
  }
  size_t done = 0;
  while (!ready.empty()) {
    const int i = ready.back();
    ready.pop_back();
    ++done;
    for (int j : gr.succ[static_cast<size_t>(i)]) {
      Node& nj = gr.nodes[static_cast<size_t>(j)];
      nj.level = std::max(nj.level, gr.nodes[static_cast<size_t>(i)].level + 1);
      if (--indeg[static_cast<size_t>(j)] == 0) ready.push_back(j);
    }
  }
  if (done == gr.nodes.size()) return;
  for (size_t i = 0; i < gr.nodes.size(); ++i) {
    if (indeg[i] > 0) {
      fail(p, gr.nodes[i].st->line,
           "steps wait for each other in a cycle (dependencies and messages); " +
               stepName(gr.nodes[i]) + " is one of them");
    }
  }
}

// The lab keeps one FIFO per ordered pair of ranks, so messages between two gpus on several
// channels must be sent and received in one order: the order of their levels, chained.
void chainChannels(const MscclProgram& p, Graph& gr) {
  std::map<std::pair<int, int>, std::vector<int>> sendsByPair;
  std::map<std::pair<int, int>, std::set<int>> chans;
  for (size_t i = 0; i < gr.nodes.size(); ++i) {
    const Node& n = gr.nodes[i];
    if (n.match < 0 || !stepSends(n.st->type)) continue;
    const int peer = gr.nodes[static_cast<size_t>(n.match)].gpu;
    sendsByPair[{n.gpu, peer}].push_back(static_cast<int>(i));
    chans[{n.gpu, peer}].insert(
        p.gpus[static_cast<size_t>(n.gpu)].tbs[static_cast<size_t>(n.tb)].chan);
  }
  bool added = false;
  for (auto& [pair, list] : sendsByPair) {
    if (chans[pair].size() < 2) continue;
    const auto key = [&](int i) {
      const Node& s = gr.nodes[static_cast<size_t>(i)];
      return std::tuple(s.level, gr.nodes[static_cast<size_t>(s.match)].level, s.tb, s.step);
    };
    std::sort(list.begin(), list.end(), [&](int x, int y) { return key(x) < key(y); });
    for (size_t k = 1; k < list.size(); ++k) {
      gr.succ[static_cast<size_t>(list[k - 1])].push_back(list[k]);
      const int r0 = gr.nodes[static_cast<size_t>(list[k - 1])].match;
      gr.succ[static_cast<size_t>(r0)].push_back(gr.nodes[static_cast<size_t>(list[k])].match);
      added = true;
    }
  }
  if (added) computeLevels(p, gr);
}

// Thread blocks run concurrently in MSCCL: two steps of one gpu that touch a chunk, one of
// them writing it, must be ordered by the happens-before of the file's own edges (tb order,
// dependencies, messages), or the result depends on timing. Vector clocks over every tb
// (clock[node][tb] = 1 + the last step of tb known to happen before it), and for each chunk
// the last write and the reads since, as FastTrack (Flanagan & Freund, PLDI 2009) checks a
// trace: a race is found whenever the file has one, whatever order the lab then runs.
struct Access {
  int node = -1;
  std::vector<int> reads;
};

class RaceCheck {
 public:
  RaceCheck(const MscclProgram& p, const Graph& gr) : p_(p), gr_(gr) {
    for (const MscclGpu& g : p.gpus) {
      tbBase_.push_back(tbs_);
      tbs_ += static_cast<int>(g.tbs.size());
    }
    const uint64_t cells = static_cast<uint64_t>(tbs_) * gr.nodes.size();
    if (cells > kMaxClockCells) {
      fail(p, p.line,
           std::to_string(gr.nodes.size()) + " steps on " + std::to_string(tbs_) +
               " thread blocks are too many to check for races (steps x thread "
               "blocks over " +
               std::to_string(kMaxClockCells) + ")");
    }
    clock_.assign(cells, 0);
  }

  void run() {
    std::vector<int> order(gr_.nodes.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return level(a) < level(b); });
    for (int i : order) {
      const Node& n = gr_.nodes[static_cast<size_t>(i)];
      at(i, tbOf(i)) = static_cast<uint16_t>(n.step + 1);
      for (int j : gr_.succ[static_cast<size_t>(i)]) {
        for (int t = 0; t < tbs_; ++t) at(j, t) = std::max(at(j, t), at(i, t));
      }
      if (stepReadsSrc(n.st->type)) touch(i, n.st->srcbuf, n.st->srcoff, false);
      if (stepWritesDst(n.st->type)) touch(i, n.st->dstbuf, n.st->dstoff, true);
    }
  }

 private:
  static constexpr uint64_t kMaxClockCells = uint64_t{16} << 20;

  int level(int i) const { return gr_.nodes[static_cast<size_t>(i)].level; }
  int tbOf(int i) const {
    const Node& n = gr_.nodes[static_cast<size_t>(i)];
    return tbBase_[static_cast<size_t>(n.gpu)] + n.tb;
  }
  uint16_t& at(int node, int tb) {
    return clock_[static_cast<size_t>(node) * static_cast<size_t>(tbs_) + static_cast<size_t>(tb)];
  }
  bool before(int a, int b) { return at(b, tbOf(a)) >= gr_.nodes[static_cast<size_t>(a)].step + 1; }

  void touch(int i, MscclBuffer b, int off, bool write) {
    const Node& n = gr_.nodes[static_cast<size_t>(i)];
    const int buf = b == MscclBuffer::Scratch ? 2 : (p_.inPlace ? 0 : static_cast<int>(b));
    for (int c = off; c < off + n.st->cnt; ++c) {
      Access& acc = chunks_[std::tuple(n.gpu, buf, c)];
      if (acc.node >= 0 && !before(acc.node, i)) race(acc.node, i, b, c);
      if (write) {
        for (int r : acc.reads) {
          if (!before(r, i)) race(r, i, b, c);
        }
        acc.node = i;
        acc.reads.clear();
      } else {
        acc.reads.push_back(i);
      }
    }
  }

  [[noreturn]] void race(int a, int b, MscclBuffer buf, int chunk) const {
    const Node& na = gr_.nodes[static_cast<size_t>(a)];
    const Node& nb = gr_.nodes[static_cast<size_t>(b)];
    fail(p_, nb.st->line,
         stepName(nb) + " and " + stepName(na) + " both use chunk " + std::to_string(chunk) +
             " of buffer " + bufLetter(buf) +
             ", one writing it, and neither waits for the "
             "other (a missing or wrong dependency: a race)");
  }

  const MscclProgram& p_;
  const Graph& gr_;
  std::vector<int> tbBase_;
  int tbs_ = 0;
  std::vector<uint16_t> clock_;
  std::map<std::tuple<int, int, int>, Access> chunks_;
};

Graph orderedGraph(const MscclProgram& p) {
  for (const MscclGpu& g : p.gpus) {
    checkChunks(p, g);
    for (const MscclTb& t : g.tbs) {
      for (const MscclStep& s : t.steps) checkStep(p, g, t, s);
    }
  }
  Graph gr = makeNodes(p);
  pairMessages(p, gr);
  addEdges(gr);
  computeLevels(p, gr);
  RaceCheck(p, gr).run();
  chainChannels(p, gr);
  return gr;
}

}  // namespace

void checkMscclProgram(const MscclProgram& p) {
  if (p.inPlace && p.collective != Collective::AllReduce) {
    fail(p, p.line,
         "in-place " + std::string(toString(p.collective)) +
             " programs are not supported (in-place allreduce and out-of-place "
             "programs are)");
  }
  orderedGraph(p);
}

namespace {

// MSCCL's loops over the buffer: loop l moves elements [l*S, l*S + len(l)) of every chunk,
// and a buffer of nb chunks holds loop l's pieces at nb*l*S, one after another.
struct Layout {
  uint64_t chunkElems = 0;
  uint64_t sliceElems = 0;
  uint64_t loops() const { return gen::sliceCount(chunkElems, sliceElems); }
  uint64_t len(uint64_t l) const { return std::min(sliceElems, chunkElems - l * sliceElems); }
  uint64_t offset(int nb, int k, uint64_t l) const {
    return static_cast<uint64_t>(nb) * l * sliceElems + static_cast<uint64_t>(k) * len(l);
  }
};

BufRef labRef(const MscclProgram& p, const MscclGpu& g, MscclBuffer b, int chunk, const Layout& lay,
              uint64_t l) {
  Buffer lb = Buffer::Input;
  if (b == MscclBuffer::Scratch) {
    lb = Buffer::Scratch;
  } else if (b == MscclBuffer::Output || p.inPlace) {
    lb = Buffer::Output;
  }
  return {lb, lay.offset(bufChunks(p, g, b), std::max(chunk, 0), l)};
}

Phase phaseOf(const Graph& gr, const Node& n) {
  const auto reduces = [](MscclStepType t) {
    return t == MscclStepType::RecvReduceCopy || t == MscclStepType::RecvReduceSend ||
           t == MscclStepType::RecvReduceCopySend;
  };
  switch (n.st->type) {
    case MscclStepType::Copy:
    case MscclStepType::Nop: return Phase::Local;
    case MscclStepType::Send:
      return reduces(gr.nodes[static_cast<size_t>(n.match)].st->type) ? Phase::ReduceScatter
                                                                      : Phase::AllGather;
    default: return reduces(n.st->type) ? Phase::ReduceScatter : Phase::AllGather;
  }
}

// The lab step of every node: a message's step is its sender's level (so a receive shows the
// step of what it receives), renumbered densely over the steps that become ops.
std::vector<uint32_t> labSteps(const Graph& gr) {
  std::vector<int> raw(gr.nodes.size(), -1);
  std::vector<int> used;
  for (size_t i = 0; i < gr.nodes.size(); ++i) {
    const Node& n = gr.nodes[i];
    if (n.st->type == MscclStepType::Nop) continue;
    const bool recvOnly = stepRecvs(n.st->type) && !stepSends(n.st->type);
    raw[i] = recvOnly ? gr.nodes[static_cast<size_t>(n.match)].level : n.level;
    used.push_back(raw[i]);
  }
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  std::vector<uint32_t> step(gr.nodes.size(), 0);
  for (size_t i = 0; i < gr.nodes.size(); ++i) {
    if (raw[i] >= 0) {
      step[i] =
          static_cast<uint32_t>(std::lower_bound(used.begin(), used.end(), raw[i]) - used.begin());
    }
  }
  return step;
}

// Each gpu's nodes in the order its rank runs them: by level, then tb, then step.
std::vector<std::vector<int>> rankOrder(const Graph& gr, int ngpus) {
  std::vector<std::vector<int>> order(static_cast<size_t>(ngpus));
  for (size_t i = 0; i < gr.nodes.size(); ++i) {
    if (gr.nodes[i].st->type != MscclStepType::Nop) {
      order[static_cast<size_t>(gr.nodes[i].gpu)].push_back(static_cast<int>(i));
    }
  }
  for (auto& o : order) {
    std::sort(o.begin(), o.end(), [&](int x, int y) {
      const Node& a = gr.nodes[static_cast<size_t>(x)];
      const Node& b = gr.nodes[static_cast<size_t>(y)];
      return std::tie(a.level, a.tb, a.step) < std::tie(b.level, b.tb, b.step);
    });
  }
  return order;
}

Op makeStepOp(const MscclProgram& p, const Graph& gr, const Node& n, const Layout& lay, uint64_t l,
              uint32_t step) {
  const MscclGpu& g = p.gpus[static_cast<size_t>(n.gpu)];
  const MscclTb& t = g.tbs[static_cast<size_t>(n.tb)];
  const MscclStep& s = *n.st;
  const OpKind kind = opKindOf(s.type);
  const int chunk = stepReadsSrc(s.type) ? s.srcoff : s.dstoff;
  return gen::makeOp(kind, phaseOf(gr, n), opSends(kind) ? t.send : -1, opRecvs(kind) ? t.recv : -1,
                     labRef(p, g, s.srcbuf, s.srcoff, lay, l),
                     labRef(p, g, s.dstbuf, s.dstoff, lay, l),
                     static_cast<uint64_t>(s.cnt) * lay.len(l), step,
                     static_cast<uint32_t>(std::max(chunk, 0)), static_cast<uint32_t>(l));
}

Layout layoutFor(const MscclProgram& p, uint64_t count, uint64_t sliceElems) {
  const MscclGpu& g0 = p.gpus.front();
  const int base = p.collective == Collective::ReduceScatter ? g0.oChunks : g0.iChunks;
  const char* which = p.collective == Collective::ReduceScatter ? "o_chunks" : "i_chunks";
  if (sliceElems == 0) fail(p, 0, "the slice must be at least one element");
  if (count % static_cast<uint64_t>(base) != 0) {
    fail(p, g0.line,
         "count " + std::to_string(count) + " elements is not a multiple of the " +
             std::to_string(base) + " chunks (" + which +
             ") the program cuts it into; use a multiple of " + std::to_string(base));
  }
  Layout lay{count / static_cast<uint64_t>(base), sliceElems};
  uint64_t steps = 0;
  for (const MscclGpu& g : p.gpus) {
    for (const MscclTb& t : g.tbs) steps += t.steps.size() + 1;
  }
  // A program without thread blocks has no steps (the verifier then says what it lacks).
  if (steps > 0 && lay.loops() > kMscclMaxOps / steps) {
    fail(p, 0,
         "count " + std::to_string(count) + " in slices of " + std::to_string(sliceElems) +
             " elements makes " + std::to_string(lay.loops()) + " loops of " +
             std::to_string(steps) + " steps, over the " + std::to_string(kMscclMaxOps) +
             " ops a schedule may hold; use larger slices");
  }
  return lay;
}

Schedule skeleton(const MscclProgram& p, uint64_t count, uint64_t sliceElems, const Layout& lay) {
  Schedule s;
  s.algorithm = mscclAlgorithmName(p);
  s.collective = p.collective;
  s.nranks = p.ngpus;
  s.count = count;
  s.sliceElems = sliceElems;
  s.inputElems = inputElemsFor(p.collective, p.ngpus, count);
  s.outputElems = outputElemsFor(p.collective, p.ngpus, count);
  int sChunks = 0;
  for (const MscclGpu& g : p.gpus) sChunks = std::max(sChunks, g.sChunks);
  s.scratchElems = static_cast<uint64_t>(sChunks) * lay.chunkElems;
  s.ranks.assign(static_cast<size_t>(p.ngpus), {});
  return s;
}

}  // namespace

Schedule mscclSchedule(const MscclProgram& p, uint64_t count, uint64_t sliceElems,
                       std::vector<std::vector<MscclOrigin>>* origins) {
  const Layout lay = layoutFor(p, count, sliceElems);
  const Graph gr = orderedGraph(p);
  const std::vector<uint32_t> steps = labSteps(gr);
  const std::vector<std::vector<int>> order = rankOrder(gr, p.ngpus);
  Schedule s = skeleton(p, count, sliceElems, lay);
  if (origins != nullptr) origins->assign(static_cast<size_t>(p.ngpus), {});
  for (uint64_t l = 0; l < lay.loops(); ++l) {
    for (int r = 0; r < p.ngpus; ++r) {
      auto& ops = s.ranks[static_cast<size_t>(r)];
      if (p.inPlace) {
        // In place, MSCCL's i is the output: the rank's contribution starts there.
        const uint64_t at = lay.offset(p.gpus.front().iChunks, 0, l);
        const uint64_t len = static_cast<uint64_t>(p.gpus.front().iChunks) * lay.len(l);
        ops.push_back(gen::makeOp(OpKind::Copy, Phase::Local, -1, -1, gen::in(at), gen::out(at),
                                  len, 0, 0, static_cast<uint32_t>(l)));
        if (origins != nullptr) (*origins)[static_cast<size_t>(r)].push_back({r, -1, -1, 0});
      }
      for (int i : order[static_cast<size_t>(r)]) {
        const Node& n = gr.nodes[static_cast<size_t>(i)];
        ops.push_back(makeStepOp(p, gr, n, lay, l, steps[static_cast<size_t>(i)]));
        if (origins != nullptr) {
          (*origins)[static_cast<size_t>(r)].push_back({n.gpu, n.tb, n.step, n.st->line});
        }
      }
    }
  }
  gen::finishSteps(s);
  return s;
}

std::string mscclAlgorithmName(const MscclProgram& p) { return "msccl:" + p.name; }

std::string withMscclOrigins(const std::string& message,
                             const std::vector<std::vector<MscclOrigin>>& origins) {
  // The verifier names ops as "rank R op I (step S, Kind)" (verifier.cpp's opWhere).
  std::string out;
  size_t pos = 0;
  for (;;) {
    const size_t at = message.find("rank ", pos);
    if (at == std::string::npos) break;
    size_t r = 0;
    size_t i = 0;
    size_t q = at + 5;
    const auto digits = [&](size_t& v) {
      const size_t b = q;
      while (q < message.size() && std::isdigit(static_cast<unsigned char>(message[q])) != 0) {
        v = v * 10 + static_cast<size_t>(message[q++] - '0');
      }
      return q > b && q - b < 10;
    };
    const bool isOp = digits(r) && message.compare(q, 4, " op ") == 0 && (q += 4, digits(i)) &&
                      r < origins.size() && i < origins[r].size();
    const size_t close = isOp ? message.find(')', q) : std::string::npos;
    if (close == std::string::npos) {
      out += message.substr(pos, q - pos);
      pos = q;
      continue;
    }
    const MscclOrigin& o = origins[r][i];
    out += message.substr(pos, close + 1 - pos);
    out += o.line == 0
               ? std::string(" [the in-place program's first copy]")
               : " [gpu " + std::to_string(o.gpu) + " tb " + std::to_string(o.tb) + " step " +
                     std::to_string(o.step) + ", line " + std::to_string(o.line) + "]";
    pos = close + 1;
  }
  return out + message.substr(pos);
}

}  // namespace arl
