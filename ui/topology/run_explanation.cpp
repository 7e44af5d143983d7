#include "topology/run_explanation.h"

#include <algorithm>
#include <limits>

#include "exec/collective_library.h"
#include "export/export.h"
#include "runtime/sweep.h"
#include "train/replica.h"

namespace arl::ui {

namespace {

// The rate busbw is held against, and what it is: the one that sets beta when the network is
// shaped (the model costs by ports then), else the machine's own as the parameters give it.
void chooseWire(RunExplanation& x, const CostQuery& q, const ModelParams& p) {
  if (x.used.beta > p.beta) {
    // Only the ring's closed form says a slow rank or link: its slowest link sets beta.
    x.wire = !x.shaping.uniform() && closedFormCovers(q) ? WireKind::ShapedRingLink
                                                         : WireKind::ShapedPort;
    x.wireGBps = 1e-9 / x.used.beta;
  } else if (x.shaping.empty() && q.sharedMemory && p.shmSend) {
    x.wire = WireKind::ShmSend;
    x.wireGBps = 1e-9 / *p.shmSend;
  } else if (x.shaping.empty() && q.sharedMemory && p.shmCopy) {
    x.wire = WireKind::ShmCopy;
    x.wireGBps = 1e-9 / *p.shmCopy;
  } else {
    x.wire = WireKind::Port;
    x.wireGBps = 1e-9 / x.used.beta;
  }
}

// The slowest directed link of a non-uniform shaping: what a flat fabric's busbw is to be held
// against when one rank or link is slow, and an algorithm may route most bytes around it.
void findSlowestLink(RunExplanation& x) {
  if (x.shaping.uniform()) return;
  for (int a = 0; a < x.nranks; ++a) {
    for (int b = 0; b < x.nranks; ++b) {
      const double r = a == b ? 0 : x.shaping.pathRate(a, b);
      if (r > 0 && (x.slowestGBps == 0 || r * 1e-9 < x.slowestGBps)) {
        x.slowestGBps = r * 1e-9;
        x.slowestFrom = a;
        x.slowestTo = b;
      }
    }
  }
}

void explainModel(RunExplanation& x, const CostQuery& q, const ModelParams& p) {
  x.used = shapedParams(q, p);
  x.closedFormPerIteration = closedFormIsPerIteration(q);
  // closedFormText() is empty exactly where closedForm() has no form (a library's algorithm,
  // a collective the algorithm does not implement); closedForm() also refuses no ranks, and
  // swing off a power of two (hasClosedForm).
  if (q.nranks < 1 || !hasClosedForm(q)) return;
  x.formText = closedFormText(q.algorithm, q.collective, q.window);
  if (x.formText.empty()) return;
  x.terms = closedForm(q);
  x.closedFormUs = x.terms.seconds(x.used) * 1e6;
}

// "A, B, C" -> its parts.
std::vector<std::string> commaParts(const std::string& text) {
  std::vector<std::string> parts;
  for (size_t from = 0;;) {
    const size_t at = text.find(", ", from);
    parts.push_back(text.substr(from, at - from));
    if (at == std::string::npos) return parts;
    from = at + 2;
  }
}

// Whether `line` is `head` + " (" + something + ")"; the something into `inside`.
bool opensWith(const std::string& line, const std::string& head, std::string& inside) {
  const std::string open = head + " (";
  if (line.size() <= open.size() || line.rfind(open, 0) != 0 || line.back() != ')') return false;
  inside = line.substr(open.size(), line.size() - open.size() - 1);
  return true;
}

}  // namespace

ModelSource readModelSource(const std::string& line) {
  ModelSource m;
  m.line = line;
  if (line.empty() || line == kDefaultModelSource) return m;
  if (opensWith(line, "default parameters", m.detail)) return m;
  // "calibration FILE (MACHINE, DATE, ...)": the file's name may hold " (", the rest does not.
  const std::string calibration = "calibration ";
  const size_t open = line.rfind(" (");
  if (line.rfind(calibration, 0) == 0 && open != std::string::npos && open > calibration.size() &&
      line.back() == ')') {
    m.kind = ModelSource::Kind::Calibration;
    m.file = line.substr(calibration.size(), open - calibration.size());
    const std::vector<std::string> about =
        commaParts(line.substr(open + 2, line.size() - open - 3));
    m.machine = about[0];
    if (about.size() > 1) m.date = about[1];
    for (size_t i = 2; i < about.size(); ++i) m.detail += (i > 2 ? ", " : "") + about[i];
    return m;
  }
  m.kind = ModelSource::Kind::Other;
  return m;
}

RunExplanation explainRun(const SweepRow& row, const ModelContext& model) {
  const RunResult& res = row.result;
  const RunRequest& req = res.request;
  RunExplanation x;
  x.algorithm = req.algorithm;
  x.collective = req.collective;
  x.nranks = res.effective.nranks > 0 ? res.effective.nranks : res.nranks;
  x.bytes = row.sizeBytes;
  x.sliceBytes = req.sliceBytes;
  x.ranksPerHost = res.effective.ranksPerHost > 0 ? res.effective.ranksPerHost : x.nranks;
  x.radix = res.effective.radix > 0 ? res.effective.radix : resolveRadix(req.radix, x.nranks);
  x.shaping = req.shaping;
  x.dataPlane = model.dataPlane;
  if (const LibraryAlgorithm* lib = findLibraryAlgorithm(req.algorithm)) {
    x.library = std::string(lib->library);
  }
  if (req.train) x.trainingBuckets = planBuckets(req.train->layers, req.train->bucketBytes).size();
  x.defaults = model.params == ModelParams{};
  x.source = model.source;
  CostQuery q = costQueryOf(row, req.shaping);
  q.nranks = x.nranks;
  q.sharedMemory = model.sharedMemory;
  explainModel(x, q, model.params);
  if (row.predictedUs > 0) x.predictedUs = row.predictedUs;
  x.method = row.predictedBy;
  if (row.metrics.timeUs > 0) x.measuredUs = row.metrics.timeUs;
  x.iterations = res.iterationUs.size();
  x.algbwGBps = row.metrics.algbwGBps;
  x.busbwGBps = row.metrics.busbwGBps;
  chooseWire(x, q, model.params);
  findSlowestLink(x);
  x.sent = res.sent;
  x.scheduled = res.effective.bytesSent;
  x.formula = sentFormula(x.algorithm, x.collective, x.nranks, x.bytes);
  x.level = req.telemetry;
  x.eventsDropped = res.eventsDropped;
  return x;
}

SentSummary summarize(const std::vector<RankSent>& sent) {
  SentSummary s;
  s.lowest = std::numeric_limits<uint64_t>::max();
  for (size_t r = 0; r < sent.size(); ++r) {
    if (sent[r].iterations == 0) continue;
    ++s.measuredRanks;
    s.varies |= sent[r].varies;
    s.lowest = std::min(s.lowest, sent[r].bytes);
    if (s.busiest < 0 || sent[r].bytes > s.highest) {
      s.highest = sent[r].bytes;
      s.busiest = static_cast<int>(r);
    }
  }
  if (s.measuredRanks == 0) s.lowest = 0;
  return s;
}

}  // namespace arl::ui
