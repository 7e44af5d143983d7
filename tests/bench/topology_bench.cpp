// The topology pane under load: feeds the real TopologyPane, offscreen, with telemetry at a
// controlled rate (default 100,000 events per second) taken from a real run, and prints the
// frames per second the view painted and the memory the process held. A benchmark: it reports
// figures and asserts nothing.
//
//   topology_bench [--recording FILE.arlrec]... [--rate EVENTS_PER_S] [--seconds S]
//                  [--shots DIR]
//
// Sources of telemetry: each recording's first run with telemetry (real worker processes;
// without any, an in-process 4-rank ring), then in-process runs of 16 and 64 ranks
// (exec/local_run.h: one thread per rank, loopback transport, real buffers: measured, not
// synthetic). Past the end
// of its events a source starts over, shifted in time and numbered as later iterations, so
// the pane sees one long run. --shots DIR saves a 1280x800 picture of the pane per layout.
#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include "exec/local_run.h"
#include "exec/run_request.h"
#include "export/export.h"
#include "runtime/run_types.h"
#include "runtime/telemetry_collector.h"
#include "topology/run_model.h"
#include "topology/topology_pane.h"
#include "topology/topology_view.h"

namespace {

using arl::TelemetryEvent;
using arl::ui::TopologyPane;
using arl::ui::TopologyRun;

struct Source {
  std::string name;
  TopologyRun run;
  std::vector<TelemetryEvent> events;  // sorted by time
};

long statusKb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::strlen(field)));
  }
  return -1;
}

Source fromRecording(const std::string& path) {
  const arl::BenchReport report = arl::readRecording(path);
  for (const arl::BenchRow& row : report.rows) {
    if (row.result.events.empty()) continue;
    Source s;
    s.name = "recording " + QFileInfo(QString::fromStdString(path)).fileName().toStdString();
    s.run.runId = row.result.runId;
    s.run.request = row.result.request;
    s.run.nranks = row.result.nranks;
    for (const auto& w : report.workers) s.run.hosts.push_back(w.host);
    s.events = row.result.events;
    arl::sortByTime(s.events);
    return s;
  }
  throw std::runtime_error(path + ": no run with telemetry");
}

Source fromLocalRun(const std::string& algorithm, int n, uint64_t count, uint64_t sliceBytes,
                    int ranksPerHost = 0, int iterations = 2) {
  Source s;
  s.name = "in-process " + algorithm + " " + std::to_string(n) + " ranks";
  s.run.runId = 1;
  s.run.nranks = n;
  s.run.request.algorithm = algorithm;
  s.run.request.count = count;
  s.run.request.sliceBytes = sliceBytes;
  s.run.request.ranksPerHost = ranksPerHost;
  s.run.request.warmup = 0;
  s.run.request.iterations = iterations;
  arl::Schedule sched;
  arl::resolveRunRequest(s.run.request,
                         std::vector<std::string>(static_cast<size_t>(n), "localhost"), &sched);
  arl::BoundedSink sink(uint64_t{1} << 23);
  arl::LocalRunOptions lo;
  lo.iterations = iterations;
  lo.telemetry = arl::TelemetryLevel::Chunks;
  lo.sink = &sink;
  lo.runId = s.run.runId;
  arl::runLocal(sched, lo);
  s.events = sink.take();
  arl::sortByTime(s.events);
  return s;
}

struct Figures {
  double fps = 0;
  double replayFps = 0;
  uint64_t fed = 0;
  uint64_t held = 0;
  uint64_t dropped = 0;
  uint64_t paneBytes = 0;
  double rebuildMs = 0;  // one rebuild of the timeline from every event held
  long rssKb = 0;
  long peakKb = 0;
};

// Feeds `src` at `rate` events/s for `seconds` (live), then replays it for 2 s.
Figures feed(const Source& src, double rate, double seconds) {
  TopologyPane pane;
  pane.resize(1280, 800);
  pane.show();
  pane.beginRun(src.run);
  const int64_t span = src.events.back().tNs - src.events.front().tNs + 1000;
  uint32_t iterSpan = 0;
  for (const auto& e : src.events) iterSpan = std::max(iterSpan, e.iteration + 1);
  Figures f;
  QElapsedTimer clock;
  clock.start();
  uint64_t next = 0;
  QTimer feeder;
  feeder.setInterval(5);
  QObject::connect(&feeder, &QTimer::timeout, [&] {
    const auto due = static_cast<uint64_t>(rate * static_cast<double>(clock.nsecsElapsed()) / 1e9);
    std::vector<std::vector<TelemetryEvent>> byRank(static_cast<size_t>(src.run.nranks));
    for (; next < due; ++next) {
      const uint64_t lap = next / src.events.size();
      TelemetryEvent e = src.events[next % src.events.size()];
      e.tNs += static_cast<int64_t>(lap) * span;
      e.iteration += static_cast<uint32_t>(lap) * iterSpan;
      byRank[static_cast<size_t>(e.rank)].push_back(e);
    }
    for (size_t r = 0; r < byRank.size(); ++r) {
      if (!byRank[r].empty()) pane.appendEvents(static_cast<int>(r), byRank[r]);
    }
  });
  feeder.start();
  const uint64_t frames0 = pane.framesPainted();
  QEventLoop loop;
  QTimer::singleShot(static_cast<int>(seconds * 1000), &loop, &QEventLoop::quit);
  loop.exec();
  feeder.stop();
  f.fps = static_cast<double>(pane.framesPainted() - frames0) /
          (static_cast<double>(clock.nsecsElapsed()) / 1e9);
  f.fed = next;
  pane.endRun();
  f.held = pane.eventsHeld();
  f.dropped = pane.eventsDropped();
  f.paneBytes = pane.model().bytesHeld();
  QElapsedTimer rebuild;
  rebuild.start();
  pane.flushEvents();
  f.rebuildMs = static_cast<double>(rebuild.nsecsElapsed()) / 1e6;
  const uint64_t frames1 = pane.framesPainted();
  QElapsedTimer replay;
  replay.start();
  QTimer::singleShot(2000, &loop, &QEventLoop::quit);
  loop.exec();
  f.replayFps = static_cast<double>(pane.framesPainted() - frames1) /
                (static_cast<double>(replay.nsecsElapsed()) / 1e9);
  f.rssKb = statusKb("VmRSS:");
  f.peakKb = statusKb("VmHWM:");
  return f;
}

void report(const Source& src, double rate, double seconds) {
  const Figures f = feed(src, rate, seconds);
  std::printf(
      "%-34s %2d ranks  live %5.1f fps  replay %5.1f fps  fed %7llu  held %7llu  dropped %7llu  "
      "pane holds %5.1f MB  rebuild %4.0f ms  process RSS %4.0f MB (peak %4.0f MB)\n",
      src.name.c_str(), src.run.nranks, f.fps, f.replayFps, static_cast<unsigned long long>(f.fed),
      static_cast<unsigned long long>(f.held), static_cast<unsigned long long>(f.dropped),
      static_cast<double>(f.paneBytes) / 1e6, f.rebuildMs, static_cast<double>(f.rssKb) / 1024,
      static_cast<double>(f.peakKb) / 1024);
  std::fflush(stdout);
}

// The time in the last iteration, past its first step, with the most ranks sending at once: a
// frame that shows the algorithm at work in steady state.
int64_t busyMoment(const TopologyPane& pane) {
  const auto& tl = pane.model().timeline();
  int64_t best = pane.model().startNs();
  size_t most = 0;
  const auto& steps = pane.model().steps();
  const uint32_t last = steps.empty() ? 0 : steps.back().iteration;
  int64_t from = pane.model().startNs();
  for (const auto& m : steps) {
    if (m.iteration == last) {
      from = m.endNs;
      break;
    }
  }
  for (const auto& x : tl.transfers()) {
    const int64_t t = x.sendStartNs + (x.recvEndNs - x.sendStartNs) / 3;
    if (t < from || x.iteration != last) continue;
    // Links busy at once, not messages queued on one link: the frame shows the whole ring.
    std::set<int> senders;
    for (size_t i : tl.inFlightAt(t)) senders.insert(tl.transfers()[i].sender);
    const size_t k = senders.size();
    if (k > most) {
      most = k;
      best = t;
    }
  }
  return best;
}

void shoot(const Source& src, const QString& path) {
  TopologyPane pane;
  pane.resize(1280, 800);
  pane.show();
  pane.showRun(src.run, src.events);
  pane.seek(busyMoment(pane));
  QApplication::processEvents();  // lets the explanation's labels lay out their new text
  pane.grab().save(path);
  std::printf("saved %s (%s)\n", path.toUtf8().constData(), src.name.c_str());
}

int shots(const QString& dir, const Source& ring4) {
  QDir().mkpath(dir);
  shoot(ring4, dir + QStringLiteral("/ring-4.png"));
  // One slice per chunk (the slice is the whole message), so that steps follow one another
  // instead of overlapping slice by slice: the picture a class is shown first.
  shoot(fromLocalRun("tree", 16, 16 * 256, 16 * 256 * 4), dir + QStringLiteral("/tree-16.png"));
  Source ps = fromLocalRun("parameter-server", 4, 4 * 256, 4 * 256 * 4);
  ps.run.shaping.portBytesPerSecond = 1e9;
  ps.run.shaping.linkBytesPerSecond[{2, 0}] = 50e6;
  ps.name += " (slow link 2->0 drawn from the shaping; the in-process run is unshaped)";
  shoot(ps, dir + QStringLiteral("/parameter-server-4-slow-link.png"));
  shoot(fromLocalRun("ring", 64, 64 * 64, 64 * 64 * 4), dir + QStringLiteral("/ring-64.png"));
  shoot(fromLocalRun("hierarchical", 16, 16 * 64, 16 * 64 * 4, 4),
        dir + QStringLiteral("/hierarchical-16.png"));
  Source small = fromLocalRun("ring", 4, 8, 8, 0, 1);
  small.name += " (8 elements: values shown)";
  shoot(small, dir + QStringLiteral("/ring-4-values.png"));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("QT_QPA_PLATFORM") == nullptr) setenv("QT_QPA_PLATFORM", "offscreen", 1);
  QApplication app(argc, argv);
  std::vector<std::string> recordings;
  QString shotDir;
  double rate = 100000;
  double seconds = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--recording" && more) {
      recordings.emplace_back(argv[++i]);
    } else if (a == "--rate" && more) {
      rate = std::stod(argv[++i]);
    } else if (a == "--seconds" && more) {
      seconds = std::stod(argv[++i]);
    } else if (a == "--shots" && more) {
      shotDir = QString::fromLocal8Bit(argv[++i]);
    } else {
      std::fprintf(stderr, "topology_bench: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  try {
    const Source first = recordings.empty() ? fromLocalRun("ring", 4, 256 * 1024, 64 * 1024)
                                            : fromRecording(recordings[0]);
    if (!shotDir.isEmpty()) return shots(shotDir, first);
    std::printf(
        "topology pane, offscreen 1280x800, %.0f events/s for %.0f s each; bound %llu events per "
        "run\n",
        rate, seconds, static_cast<unsigned long long>(TopologyPane().maxEventsHeld()));
    report(first, rate, seconds);
    for (size_t i = 1; i < recordings.size(); ++i)
      report(fromRecording(recordings[i]), rate, seconds);
    report(fromLocalRun("ring", 16, 16 * 16 * 1024, 16 * 1024), rate, seconds);
    report(fromLocalRun("ring", 64, 64 * 4 * 1024, 4 * 1024), rate, seconds);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "topology_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
