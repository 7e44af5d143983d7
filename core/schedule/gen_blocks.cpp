#include "gen_blocks.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace arl::gen {

namespace {

int wrap(int a, int n) { return ((a % n) + n) % n; }

bool continues(BufRef prev, uint64_t len, BufRef next) {
  return prev.buf == next.buf && prev.offset + len == next.offset;
}

}  // namespace

BlockPlan::BlockPlan(Schedule& s, uint64_t sliceElems, std::vector<int> piece)
    : s_(s),
      sliceElems_(sliceElems),
      piece_(std::move(piece)),
      touched_(static_cast<size_t>(s.nranks), std::vector<bool>(static_cast<size_t>(s.nranks))) {
  ARL_ENFORCE(piece_.size() == static_cast<size_t>(s.nranks),
              "piece order of " << piece_.size() << " for " << s.nranks << " ranks");
  if (s.collective == Collective::ReduceScatter) {
    s.scratchElems = static_cast<uint64_t>(s.nranks) * s.count;
  }
}

Range BlockPlan::range(int block) const {
  if (s_.collective == Collective::AllReduce) {
    const auto pos = static_cast<uint64_t>(piece_[static_cast<size_t>(block)]);
    return part(s_.count, static_cast<uint64_t>(s_.nranks), pos);
  }
  return {static_cast<uint64_t>(block) * s_.count, s_.count};
}

BufRef BlockPlan::accumulator(int rank, int block) const {
  const Range r = range(block);
  if (s_.collective == Collective::AllReduce) return out(r.begin);
  return rank == block ? out(0) : scratch(r.begin);
}

BlockPlan::Message BlockPlan::messageOf(const BlockMove& m, Phase phase) const {
  const Range r = range(m.block);
  Message msg{m.from, m.to, m.block, {}, {}, {}, r.len};
  auto held = [&](int rank) {
    return touched_[static_cast<size_t>(rank)][static_cast<size_t>(m.block)];
  };
  if (phase == Phase::ReduceScatter) {
    msg.src = held(m.from) ? accumulator(m.from, m.block) : in(r.begin);
    msg.own = held(m.to) ? accumulator(m.to, m.block) : in(r.begin);
    msg.dst = accumulator(m.to, m.block);
  } else {
    ARL_ENFORCE(held(m.from),
                "rank " << m.from << " sends block " << m.block << " before it holds it");
    msg.src = out(r.begin);
    msg.dst = out(r.begin);
  }
  return msg;
}

std::vector<BlockPlan::Message> BlockPlan::messages(const BlockStep& step, Phase phase) const {
  std::vector<Message> single;
  for (const BlockMove& m : step) {
    if (range(m.block).len > 0) single.push_back(messageOf(m, phase));
  }
  std::stable_sort(single.begin(), single.end(), [](const Message& a, const Message& b) {
    return std::tie(a.from, a.to, a.dst.offset) < std::tie(b.from, b.to, b.dst.offset);
  });
  std::vector<Message> merged;
  for (const Message& m : single) {
    if (!merged.empty()) {
      Message& last = merged.back();
      if (last.from == m.from && last.to == m.to && continues(last.src, last.len, m.src) &&
          continues(last.dst, last.len, m.dst) &&
          (phase != Phase::ReduceScatter || continues(last.own, last.len, m.own))) {
        last.len += m.len;
        continue;
      }
    }
    merged.push_back(m);
  }
  return merged;
}

// Alternates "send message i, receive message i" as halving-doubling's exchanges do: every
// rank's i-th message out is its receiver's i-th message in, so one message per channel
// suffices and the ranks advance in lockstep.
void BlockPlan::emitRank(int rank, const std::vector<Message>& msgs, Phase phase, uint32_t step) {
  struct SliceOf {
    const Message* msg;
    Range slice;
    uint32_t index;
  };
  std::vector<SliceOf> sends;
  std::vector<SliceOf> recvs;
  for (const Message& m : msgs) {
    if (m.from != rank && m.to != rank) continue;
    for (uint64_t j = 0; j < sliceCount(m.len, sliceElems_); ++j) {
      const SliceOf pc{&m, slice({0, m.len}, sliceElems_, j), static_cast<uint32_t>(j)};
      (m.from == rank ? sends : recvs).push_back(pc);
    }
  }
  auto at = [](BufRef b, const Range& r) { return BufRef{b.buf, b.offset + r.begin}; };
  auto& prog = s_.ranks[static_cast<size_t>(rank)];
  const bool reduce = phase == Phase::ReduceScatter;
  for (size_t i = 0; i < std::max(sends.size(), recvs.size()); ++i) {
    if (i < sends.size()) {
      const SliceOf& p = sends[i];
      prog.push_back(makeOp(OpKind::Send, phase, p.msg->to, -1, at(p.msg->src, p.slice), {},
                            p.slice.len, step, static_cast<uint32_t>(p.msg->chunk), p.index));
    }
    if (i < recvs.size()) {
      const SliceOf& p = recvs[i];
      const OpKind kind = reduce ? OpKind::RecvReduceCopy : OpKind::Recv;
      prog.push_back(makeOp(kind, phase, -1, p.msg->from,
                            reduce ? at(p.msg->own, p.slice) : BufRef{}, at(p.msg->dst, p.slice),
                            p.slice.len, step, static_cast<uint32_t>(p.msg->chunk), p.index));
    }
  }
}

void BlockPlan::emit(const std::vector<BlockStep>& steps, Phase phase, uint32_t firstStep) {
  // An all-gather starts over: a rank holds its own block, whatever a reduce-scatter left.
  if (phase == Phase::AllGather) {
    for (int r = 0; r < s_.nranks; ++r) {
      auto& held = touched_[static_cast<size_t>(r)];
      std::fill(held.begin(), held.end(), false);
      held[static_cast<size_t>(r)] = true;
    }
  }
  for (size_t k = 0; k < steps.size(); ++k) {
    const auto step = firstStep + static_cast<uint32_t>(k);
    const std::vector<Message> msgs = messages(steps[k], phase);
    for (int r = 0; r < s_.nranks; ++r) emitRank(r, msgs, phase, step);
    // Marked after the whole step: a block received in a step is sent on only in a later one.
    for (const BlockMove& m : steps[k]) {
      touched_[static_cast<size_t>(m.to)][static_cast<size_t>(m.block)] = true;
    }
  }
}

void BlockPlan::copyOwnBlocks() {
  ARL_ENFORCE(s_.collective == Collective::AllGather, "own-block copy outside an all-gather");
  for (int r = 0; r < s_.nranks; ++r) {
    const Range own = range(r);
    for (uint64_t j = 0; j < sliceCount(own.len, sliceElems_); ++j) {
      const Range sl = slice({0, own.len}, sliceElems_, j);
      s_.ranks[static_cast<size_t>(r)].push_back(
          makeOp(OpKind::Copy, Phase::Local, -1, -1, in(sl.begin), out(own.begin + sl.begin),
                 sl.len, 0, static_cast<uint32_t>(r), static_cast<uint32_t>(j)));
    }
  }
}

std::vector<BlockStep> shiftAllGather(int n, const std::vector<int>& distances) {
  std::set<int> held{0};  // offsets x: rank r holds block r + x
  std::vector<BlockStep> steps;
  for (int d : distances) {
    BlockStep step;
    for (int r = 0; r < n; ++r) {
      for (int x : held) {
        if (x + d < n) step.push_back({r, wrap(r - d, n), wrap(r + x, n)});
      }
    }
    std::set<int> next = held;
    for (int x : held) {
      if (x + d < n) next.insert(x + d);
    }
    held = std::move(next);
    steps.push_back(std::move(step));
  }
  ARL_ENFORCE(static_cast<int>(held.size()) == n,
              "distances reach " << held.size() << " of " << n << " blocks");
  return steps;
}

std::vector<BlockStep> transpose(const std::vector<BlockStep>& allGather) {
  std::vector<BlockStep> steps;
  for (auto it = allGather.rbegin(); it != allGather.rend(); ++it) {
    BlockStep step;
    for (const BlockMove& m : *it) step.push_back({m.to, m.from, m.block});
    steps.push_back(std::move(step));
  }
  return steps;
}

Schedule blockCollective(std::string_view algo, const GenParams& p,
                         const std::function<std::vector<BlockStep>(int)>& allGatherOf,
                         const std::function<std::vector<int>(int)>& piece) {
  Schedule s = makeSkeleton(algo, p);
  if (p.nranks == 1) {
    singleRankCopy(s);
    finishSteps(s);
    return s;
  }
  const std::vector<BlockStep> allGather = allGatherOf(p.nranks);
  BlockPlan plan(s, p.sliceElems, piece(p.nranks));
  const auto half = static_cast<uint32_t>(allGather.size());
  switch (p.collective) {
    case Collective::AllGather:
      plan.copyOwnBlocks();
      plan.emit(allGather, Phase::AllGather, 0);
      break;
    case Collective::ReduceScatter: plan.emit(transpose(allGather), Phase::ReduceScatter, 0); break;
    case Collective::AllReduce:
      plan.emit(transpose(allGather), Phase::ReduceScatter, 0);
      plan.emit(allGather, Phase::AllGather, half);
      break;
    default: ARL_ENFORCE(false, "collective " << toString(p.collective) << " passed makeSkeleton");
  }
  finishSteps(s);
  return s;
}

std::vector<int> powersOfTwoBelow(int n) {
  std::vector<int> d;
  for (int k = 1; k < n; k *= 2) d.push_back(k);
  return d;
}

std::vector<int> identityOrder(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

}  // namespace arl::gen
