// Writing and reading a recording (export.h) of a bench session with 1M telemetry events: the
// cost a replay pays to open a shared recording. Not a test: it prints figures.
//
// The session is synthetic but shaped like a real one: eight runs of different algorithms on
// 4 to 8 ranks, each cut at 125,000 events as `--max-events` would cut it, with the events
// the executor emits for every op of a generated schedule (sends, receives, reductions, step
// and iteration ends) and provenance masks from the schedule. The Perfetto trace of the same
// session is timed too (its MB/s counts the trace's bytes).
//   recording_bench                  # 1M events, 5 repetitions
//   recording_bench --events 200000 --reps 9 --trace no
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "export/export.h"
#include "schedule/generators.h"

namespace {

using namespace arl;

struct Options {
  uint64_t events = 1'000'000;
  int reps = 5;
  bool trace = true;
};

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--events") == 0) {
      o.events = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--trace") == 0) {
      o.trace = std::strcmp(argv[i + 1], "no") != 0;
    } else if (std::strcmp(argv[i], "--reps") == 0) {
      o.reps = std::max(1, std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr, "usage: recording_bench [--events N] [--reps N] [--trace yes|no]\n");
      std::exit(2);
    }
  }
  return o;
}

TelemetryEvent event(EventKind k, const Op& op, uint32_t it, int rank, int peer, int64_t t) {
  TelemetryEvent e;
  e.iteration = it;
  e.rank = rank;
  e.step = op.step;
  e.kind = k;
  e.phase = static_cast<uint8_t>(op.phase);
  e.peer = peer;
  e.chunk = op.chunk;
  e.offset = op.src.offset;
  e.bytes = op.count * 4;
  e.tNs = t;
  e.provenance = op.provenance;
  return e;
}

// The events one rank emits for one op, at plausible times (a few microseconds apart).
void emitOp(std::vector<TelemetryEvent>& out, const Op& op, uint32_t it, int rank, int64_t& t) {
  if (opSends(op.kind)) {
    out.push_back(event(EventKind::SendStart, op, it, rank, op.sendPeer, t += 1'200));
    out.push_back(event(EventKind::SendEnd, op, it, rank, op.sendPeer, t += 9'800));
  }
  if (opRecvs(op.kind)) {
    out.push_back(event(EventKind::RecvEnd, op, it, rank, op.recvPeer, t += 7'300));
    if (opReduces(op.kind)) {
      out.push_back(event(EventKind::ReduceEnd, op, it, rank, op.recvPeer, t += 2'100));
    }
  }
}

// One run: whole iterations of `algo` on `n` ranks until `budget` events, then cut there.
BenchRow syntheticRun(const std::string& algo, int n, uint64_t budget, uint64_t runId, int64_t t0) {
  GenParams p;
  p.nranks = n;
  p.count = uint64_t{1} << 20;
  p.sliceElems = uint64_t{1} << 14;
  const Schedule s = generate(algo, p);
  BenchRow row;
  RunResult& res = row.result;
  res.runId = runId;
  res.request.algorithm = algo;
  res.request.count = p.count;
  res.request.sliceBytes = p.sliceElems * 4;
  res.nranks = n;
  res.state = RunState::Done;
  for (uint32_t it = 0; res.events.size() < budget; ++it) {
    const int64_t base = t0 + static_cast<int64_t>(it) * 50'000'000;
    for (int r = 0; r < n; ++r) {
      int64_t t = base + r * 331;
      const auto& ops = s.ranks[static_cast<size_t>(r)];
      for (size_t i = 0; i < ops.size(); ++i) {
        emitOp(res.events, ops[i], it, r, t);
        if (i + 1 == ops.size() || ops[i + 1].step != ops[i].step) {
          TelemetryEvent se = event(EventKind::StepEnd, ops[i], it, r, -1, t += 500);
          se.chunk = 0;
          res.events.push_back(se);
        }
      }
      TelemetryEvent ie = event(EventKind::IterationEnd, ops.back(), it, r, -1, t += 900);
      ie.step = s.nsteps;
      res.events.push_back(ie);
      res.perRank.push_back({r, it, t - base, 0});
    }
    res.iterationUs.push_back(1234.5 + it);
  }
  res.eventsDropped = res.events.size() - budget;
  res.events.resize(budget);
  for (TelemetryEvent& e : res.events) e.runId = runId;
  std::stable_sort(res.events.begin(), res.events.end(),
                   [](const TelemetryEvent& a, const TelemetryEvent& b) { return a.tNs < b.tNs; });
  res.timeUs = 1234.5;
  row.sizeBytes = p.count * 4;
  row.count = p.count;
  row.startNs = t0;
  row.endNs = res.events.back().tNs + 1;
  return row;
}

BenchReport syntheticSession(uint64_t events) {
  const char* algos[] = {"ring", "tree",         "halving-doubling", "recursive-doubling",
                         "ring", "hierarchical", "reduce-broadcast", "parameter-server"};
  const int ranks[] = {4, 8, 8, 4, 6, 8, 5, 7};
  BenchReport r;
  r.config.workers = 8;
  constexpr int kRuns = 8;
  for (int i = 0; i < kRuns; ++i) {
    const uint64_t budget = events / kRuns + (static_cast<uint64_t>(i) < events % kRuns ? 1 : 0);
    r.rows.push_back(syntheticRun(algos[i], ranks[i], budget, static_cast<uint64_t>(i + 1),
                                  int64_t{1'000'000'000} * (i + 1)));
  }
  for (int rank = 0; rank < 8; ++rank) {
    WorkerInfo w;
    w.rank = rank;
    w.name = "worker-" + std::to_string(rank);
    w.host = "lab-host";
    w.pid = 4000 + rank;
    w.local = true;
    w.backend = "cpu";
    r.workers.push_back(w);
  }
  return r;
}

struct Figures {
  double minS = 0, medianS = 0;
};

template <typename F>
Figures timeIt(int reps, F&& f) {
  std::vector<double> s;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(s.begin(), s.end());
  return {s.front(), s[s.size() / 2]};
}

void print(const char* what, const Figures& f, double mb, double events) {
  std::printf("%-6s min %8.1f ms  median %8.1f ms  %8.1f MB/s  %6.2f M events/s\n", what,
              f.minS * 1e3, f.medianS * 1e3, mb / f.minS, events / f.minS / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parseOptions(argc, argv);
  const BenchReport session = syntheticSession(o.events);
  uint64_t events = 0;
  for (const BenchRow& row : session.rows) events += row.result.events.size();

  std::string text;
  const Figures write = timeIt(o.reps, [&] { text = recordingJson(session); });
  uint64_t readBack = 0;
  const Figures read = timeIt(o.reps, [&] {
    const BenchReport back = parseRecording(text);
    readBack = 0;
    for (const BenchRow& row : back.rows) readBack += row.result.events.size();
  });
  std::string trace;
  const Figures traceWrite =
      o.trace ? timeIt(o.reps, [&] { trace = chromeTraceJson(session); }) : Figures{};
  if (readBack != events) {
    std::fprintf(stderr, "read %llu events, wrote %llu\n",
                 static_cast<unsigned long long>(readBack),
                 static_cast<unsigned long long>(events));
    return 1;
  }
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("recording: %zu runs, %llu events, %.1f MB of JSON, %d repetitions\n",
              session.rows.size(), static_cast<unsigned long long>(events), mb, o.reps);
  print("write", write, mb, static_cast<double>(events));
  print("read", read, mb, static_cast<double>(events));
  if (!o.trace) return 0;
  std::printf("trace: %.1f MB of Chrome trace JSON\n", static_cast<double>(trace.size()) / 1e6);
  print("trace", traceWrite, static_cast<double>(trace.size()) / 1e6, static_cast<double>(events));
  return 0;
}
