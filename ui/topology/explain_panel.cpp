#include "topology/explain_panel.h"

#include <QLabel>
#include <QLocale>
#include <QPlainTextEdit>
#include <QSizePolicy>
#include <QStringList>
#include <QVBoxLayout>
#include <bit>
#include <cstdlib>
#include <map>
#include <vector>

#include "exec/collective_library.h"
#include "runtime/sweep.h"
#include "schedule/generators.h"
#include "style/palette.h"
#include "topology/arithmetic.h"
#include "topology/explain_result.h"

namespace arl::ui {

namespace {

QString phaseName(uint8_t phase) {
  return QString::fromUtf8(toString(static_cast<Phase>(phase)).data());
}

// The log's prefix: "RS 2" is step 2 of the reduce-scatter, as the caption counts it.
QString phaseShort(uint8_t phase) {
  switch (static_cast<Phase>(phase)) {
    case Phase::ReduceScatter: return QStringLiteral("RS ");
    case Phase::AllGather: return QStringLiteral("AG ");
    case Phase::Reduce: return QStringLiteral("up ");
    case Phase::Broadcast: return QStringLiteral("down ");
    case Phase::Local: break;
  }
  return QStringLiteral("step ");
}

// Which clock timed the step's ends: the GPU's (a device backend's, mapped to the worker's
// clock), the host's when the executor saw the step end, or both among its ranks.
QString clockNote(const StepMark& m) {
  if (m.deviceTimed == 0) return QStringLiteral("timed by the host clock");
  if (m.deviceTimed == m.ranksEnded) return QStringLiteral("timed by the GPU clock");
  return QStringLiteral("timed by the GPU clock on %1 of %2 ranks, the host clock on the rest")
      .arg(m.deviceTimed)
      .arg(m.ranksEnded);
}

QString ringRule(Phase p, int s) {
  if (p == Phase::ReduceScatter) {
    return QStringLiteral(
               "The rank at ring position i sends its partial sum of chunk (i − 1 − s) mod n to "
               "position i + 1, which adds its own input to it (here s = %1). After n − 1 steps "
               "each rank holds the full sum of one chunk.")
        .arg(s);
  }
  if (p == Phase::AllGather) {
    return QStringLiteral(
               "The finished chunks go once more around the ring: position i forwards chunk "
               "(i − s) mod n to position i + 1, which keeps a copy (here s = %1). No "
               "arithmetic: after n − 1 steps every rank has every sum.")
        .arg(s);
  }
  return QStringLiteral("A chain along the ring: each rank passes the chunk to the next.");
}

QString treeRule(Phase p) {
  if (p == Phase::Reduce) {
    return QStringLiteral(
        "Up the tree: a rank adds its children's partial sums to its own and sends the result "
        "to its parent. Two trees each carry half the vector; a rank that is a leaf in one is "
        "inside the other, so the work is shared. Depth log₂ n, not n.");
  }
  return QStringLiteral(
      "Down the tree: the root's full sum flows to the leaves; each rank keeps a copy of what "
      "its parent sends and forwards it to its children.");
}

// ceil(log2 n): the steps of one half of bruck, pat and swing.
int halfSteps(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return std::max(l, 1);
}

// Bruck's all-gather doubles the distance (1, 2, 4, …), PAT's halves it; each one's
// reduce-scatter is its all-gather backwards. `s` counts the all-reduce's steps, its
// all-gather after the reduce-scatter's L.
QString shiftRule(bool pat, Phase p, int s, int n) {
  const int L = halfSteps(n);
  const int k = s % L;
  const bool gather = p == Phase::AllGather;
  const int d = 1 << ((gather != pat) ? k : L - 1 - k);
  if (gather) {
    return QStringLiteral(
               "%1 all-gather, distance %2: rank i sends the blocks it holds to rank i − %2 and "
               "receives as many from rank i + %2. %3")
        .arg(pat ? QStringLiteral("PAT") : QStringLiteral("Bruck"))
        .arg(d)
        .arg(pat ? QStringLiteral("Long hops first, with one block; the largest transfers go "
                                  "to the nearest neighbours last.")
                 : QStringLiteral("What each rank holds doubles every step: ⌈log₂ n⌉ steps "
                                  "for any n, the largest transfers over the longest hop last."));
  }
  return QStringLiteral(
             "%1 reduce-scatter, distance %2: rank i sends its partial sums of the blocks rank "
             "i + %2 gathers for to rank i + %2, which adds them to its own. The all-gather "
             "backwards: each block's sums meet at its owner.")
      .arg(pat ? QStringLiteral("PAT") : QStringLiteral("Bruck"))
      .arg(d);
}

// rho(t) = 1, −1, 3, −5, 11, … (De Sensi et al., NSDI 2024).
int swingRho(int t) {
  int rho = 0;
  for (int i = 0, term = 1; i <= t; ++i, term *= -2) rho += term;
  return rho;
}

// A fold or unfold step of swing off a power of two (gen_swing.cpp).
QString swingFoldRule(bool latency, Phase p, SwingStep::Role role, int exchanging, int n) {
  const bool fold = role == SwingStep::Role::Fold;
  if (latency) {
    return fold ? QStringLiteral(
                      "%1 ranks is not a power of two: the last %2 pair up with a neighbour, and "
                      "the second of each pair sends its whole vector to the first, which adds it "
                      "and stands for both in the %3 exchanging ranks.")
                      .arg(n)
                      .arg(2 * (n - exchanging))
                      .arg(exchanging)
                : QStringLiteral(
                      "The first of each folded pair sends the sum back to its neighbour: "
                      "2 steps more than on a power of two, the whole vector each.");
  }
  if (p == Phase::ReduceScatter) {
    return fold ? QStringLiteral(
                      "%1 ranks is odd, so no rule pairs them all: rank %2 hands its partial sums "
                      "of the other blocks to its neighbour, rank %3, which stands for it.")
                      .arg(n)
                      .arg(n - 1)
                      .arg(n - 2)
                : QStringLiteral(
                      "Rank %1 gets the partial sum of its own block back from rank %2 "
                      "and adds its own.")
                      .arg(n - 1)
                      .arg(n - 2);
  }
  return fold ? QStringLiteral("Rank %1 hands its finished block to rank %2.").arg(n - 1).arg(n - 2)
              : QStringLiteral("Rank %1 gets every other finished block from rank %2.")
                    .arg(n - 1)
                    .arg(n - 2);
}

QString swingRule(bool latency, Phase p, int s, int n, const std::vector<int>& torus) {
  const SwingStep step = swingStep(latency, torus, n, s);
  if (step.role == SwingStep::Role::Fold || step.role == SwingStep::Role::Unfold) {
    return swingFoldRule(latency, p, step.role, step.ranks, n);
  }
  QString pair = QStringLiteral(
                     "An even rank i talks to i + ρ, an odd one to i − ρ, ρ = %1: the peers swing "
                     "from side to side and stay nearer than recursive doubling's. ")
                     .arg(swingRho(step.k));
  if (torus.size() > 1) {
    pair = QStringLiteral(
               "On the torus the steps take its dimensions in turn; this one moves %1. A "
               "rank whose coordinate there is even talks to the one ρ = %2 further, an odd one "
               "to the one ρ nearer: every peer is %3 hop%4 away, fewer than the flat form's. ")
               .arg(torus.size() != 2 ? QStringLiteral("along dimension %1").arg(step.dimension + 1)
                    : step.dimension == 0 ? QStringLiteral("between rows, its column kept")
                                          : QStringLiteral("along its row"))
               .arg(swingRho(step.k))
               .arg(std::abs(swingRho(step.k)))
               .arg(std::abs(swingRho(step.k)) == 1 ? QString() : QStringLiteral("s"));
  }
  if (step.ranks < n) {
    // gen_swing.cpp numbers the ranks that did not fold in by rank order, 0 .. ranks - 1.
    pair += QStringLiteral(
                "Here %1 ranks exchange, the ones that did not fold in, numbered 0 … %2 in rank "
                "order; i and ρ count in those numbers, mod %1. ")
                .arg(step.ranks)
                .arg(step.ranks - 1);
  }
  const bool pow2 = std::has_single_bit(static_cast<unsigned>(step.ranks));
  if (latency) {
    return pair + QStringLiteral(
                      "Each pair swaps its whole partial sum and adds: log₂ %1 steps, the whole "
                      "vector every step.")
                      .arg(step.ranks < n ? QString::number(step.ranks) : QStringLiteral("n"));
  }
  if (!pow2) {
    return pair +
           (p == Phase::ReduceScatter
                ? QStringLiteral(
                      "Off a power of two the peers' sides overlap: a partial sum goes "
                      "only at the last step that reaches its block's owner, so each rank "
                      "still sends each block once.")
                : QStringLiteral("Off a power of two each sends only the finished blocks its peer "
                                 "lacks, so each rank still receives each block once."));
  }
  if (p == Phase::ReduceScatter) {
    return pair + QStringLiteral(
                      "Each sends the partial sums its peer's side needs and keeps its own half: "
                      "the blocks halve every step.");
  }
  return pair + QStringLiteral(
                    "The reduce-scatter backwards: each sends every finished block it holds; "
                    "the blocks double every step.");
}

QString knomialRule(Phase p) {
  if (p == Phase::Reduce) {
    return QStringLiteral(
        "Up a k-nomial tree: in each round a parent takes the partial sums of up to k − 1 "
        "children, one after the other, and adds them; ⌈log_k n⌉ rounds. A larger k means "
        "fewer rounds but more messages into one parent per round.");
  }
  return QStringLiteral(
      "Down the k-nomial tree: the root's sum goes to its children, the farthest subtree "
      "first; each rank forwards it to its own children.");
}

}  // namespace

QString ruleFor(const std::string& algorithm, uint8_t phase, int s, int n,
                const std::vector<int>& torus) {
  const auto p = static_cast<Phase>(phase);
  if (algorithm == "ring") return ringRule(p, s);
  if (algorithm == "tree") return treeRule(p);
  if (algorithm == "halving-doubling") {
    if (p == Phase::ReduceScatter) {
      return QStringLiteral(
                 "Recursive halving: rank i exchanges with rank i XOR 2^%1. Each keeps half of "
                 "its range, sends the other half and adds what it receives. The range halves "
                 "every step; after log₂ n steps each rank owns the sum of 1/n of the vector.")
          .arg(s);
    }
    if (p == Phase::AllGather) {
      return QStringLiteral(
          "Recursive doubling: the same pairs in reverse order; each rank sends everything it "
          "holds and receives its partner's part. The range doubles every step.");
    }
    return QStringLiteral(
        "Fold or unfold: ranks beyond the largest power of two hand their vector to a partner "
        "and get the result back at the end.");
  }
  if (algorithm == "recursive-doubling") {
    return QStringLiteral(
               "Rank i swaps its whole vector with rank i XOR 2^%1 and adds what it receives. "
               "After log₂ n steps every rank has the sum: few steps, but the whole vector "
               "every step.")
        .arg(s);
  }
  if (algorithm == "parameter-server") {
    return p == Phase::Reduce
               ? QStringLiteral(
                     "Push: every worker sends its whole vector to the server (rank 0), which adds "
                     "each arrival into its sum. The server's port carries n − 1 vectors: it is "
                     "the bottleneck.")
               : QStringLiteral("Pull: the server sends the sum back to every worker.");
  }
  if (algorithm == "reduce-broadcast") {
    return p == Phase::Reduce
               ? QStringLiteral("Reduce: every rank sends its vector to the root, which sums them.")
               : QStringLiteral("Broadcast: the root sends the sum to every rank.");
  }
  if (algorithm == "bruck" || algorithm == "pat") return shiftRule(algorithm == "pat", p, s, n);
  if (algorithm == "swing" || algorithm == "swing-latency") {
    return swingRule(algorithm == "swing-latency", p, s, n, torus);
  }
  if (algorithm == "knomial") return knomialRule(p);
  if (algorithm == "hierarchical") {
    if (p == Phase::ReduceScatter) {
      return QStringLiteral(
          "Inside each host a ring reduce-scatter; then the ranks that own the same shard "
          "reduce it across hosts: only 1/K of the vector crosses the slow links.");
    }
    return QStringLiteral(
        "Across hosts the shard owners share their sums; inside each host a ring all-gather "
        "hands every shard to every rank.");
  }
  (void)n;
  return {};
}

void ExplainPanel::setProjector(bool on) {
  for (auto& [label, px] : basePx_) {
    QFont f = label->font();
    f.setPixelSize(on ? std::max(static_cast<int>(px * 1.8), label == step_ ? 36 : 22) : px);
    label->setFont(f);
  }
  log_->setVisible(!on);
  // Fewer words from the back of a room: the caption and the canvas name the step's messages.
  messages_->setVisible(!on);
  projector_ = on;
  showResult();
  setMinimumWidth(on ? 480 : 340);
  setMaximumWidth(on ? 640 : 440);
}

ExplainPanel::ExplainPanel(QWidget* parent) : QWidget(parent) {
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(14, 14, 14, 14);
  lay->setSpacing(10);
  auto label = [&](int px, bool bold) {
    auto* l = new QLabel(this);
    QFont f = l->font();
    f.setPixelSize(px);
    f.setBold(bold);
    l->setFont(f);
    l->setWordWrap(true);
    l->setTextFormat(Qt::RichText);
    l->setTextInteractionFlags(Qt::TextSelectableByMouse);
    // Never shorter than the wrapped text: the stretch below takes the spare height.
    l->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Minimum);
    lay->addWidget(l);
    basePx_.emplace_back(l, px);
    return l;
  };
  header_ = label(13, false);
  step_ = label(20, true);
  rule_ = label(14, false);
  messages_ = label(12, false);
  bytes_ = label(13, false);
  sent_ = label(13, false);
  busbw_ = label(13, false);
  model_ = label(13, false);
  for (QLabel* l : {sent_, busbw_, model_}) {
    // A rule above each: they are about the whole run, not the step shown.
    l->setStyleSheet(QStringLiteral("QLabel { border-top: 1px solid #d5d9df; padding-top: 8px; }"));
    l->setIndent(0);  // a frame would indent the text by half an x otherwise
  }
  values_ = label(13, false);
  log_ = new QPlainTextEdit(this);
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(400);
  QFont mono(QStringLiteral("DejaVu Sans Mono"));
  mono.setPixelSize(11);
  log_->setFont(mono);
  lay->addWidget(log_, 1);
  lay->addStretch(1);
  status_ = label(11, false);
  setMinimumWidth(340);
  setMaximumWidth(440);
  showResult();
}

ExplainPanel::~ExplainPanel() = default;

void ExplainPanel::setRun(const RunModel& model) {
  const TopologyRun& run = model.run();
  const RunRequest& req = run.request;
  const size_t es = dtypeSize(req.dtype);
  const QString collective = QString::fromUtf8(toString(req.collective).data());
  // The collective's ranks: a helper worker (switch's in-network reducer) is none of them.
  const int helpers = helperWorkers(req.algorithm);
  const QString ranks = helpers > 0
                            ? QStringLiteral("%1 ranks + the switch").arg(run.nranks - helpers)
                            : QStringLiteral("%1 ranks").arg(run.nranks);
  header_->setText(QStringLiteral("<b>%1</b> %2 · %3<br/>%4 message: %5 × %6 · %7")
                       .arg(QString::fromStdString(req.algorithm), collective, ranks)
                       .arg(QString::fromStdString(formatSize(req.count * es)),
                            QLocale::c().toString(static_cast<qulonglong>(req.count)),
                            QString::fromUtf8(toString(req.dtype).data()),
                            QString::fromUtf8(toString(req.op).data())));
  arithmetic_ = std::make_unique<Arithmetic>(run);
  messagesKey_ = {UINT32_MAX, UINT32_MAX, 0};
  QString bytes;
  if (const LibraryAlgorithm* lib = findLibraryAlgorithm(req.algorithm)) {
    // A library's collective has an empty schedule: what it sends is its own.
    bytes = QStringLiteral("%1 moves the bytes its own way: what each rank sends is not known.")
                .arg(QString::fromStdString(std::string(lib->library)));
  } else if (const Schedule* s = model.schedule()) {
    uint64_t lo = UINT64_MAX;
    uint64_t hi = 0;
    for (int r = 0; r < run.nranks; ++r) {
      const uint64_t b = bytesSent(*s, r, req.dtype);
      lo = std::min(lo, b);
      hi = std::max(hi, b);
    }
    const double msg = static_cast<double>(req.count * es);
    // formatSize leaves a count that is no whole K or M as a plain number: say its unit.
    const auto size = [](uint64_t b) {
      const QString text = QString::fromStdString(formatSize(b));
      bool plain = false;
      text.toULongLong(&plain);
      return plain ? QLocale::c().toString(static_cast<qulonglong>(b)) + QStringLiteral(" bytes")
                   : text;
    };
    const QString range = lo == hi ? size(hi) : size(lo) + QStringLiteral("–") + size(hi);
    bytes = QStringLiteral("Each rank sends <b>%1</b> per %2 (%3× the message).")
                .arg(range, collective)
                .arg(msg > 0 ? static_cast<double>(hi) / msg : 0, 0, 'g', 3);
  } else {
    bytes = QStringLiteral("No schedule: ") +
            QString::fromStdString(model.scheduleError()).toHtmlEscaped();
  }
  bytes_->setText(bytes);
  values_->setVisible(arithmetic_->enabled());
  log_->setVisible(arithmetic_->enabled() && !projector_);
  log_->clear();
  step_->setText(QStringLiteral("waiting for telemetry"));
  rule_->clear();
  messages_->clear();
  if (run.runId != resultRun_) result_.reset();
  showResult();
}

void ExplainPanel::setResult(const SweepRow& row, const ModelContext& model) {
  result_ = explainRun(row, model);
  resultRun_ = row.result.runId;
  showResult();
}

void ExplainPanel::showResult() {
  const std::pair<QLabel*, QString> sections[] = {
      {sent_, result_ ? sentHtml(*result_, projector_) : QString()},
      {busbw_, result_ ? busbwHtml(*result_, projector_) : QString()},
      {model_, result_ ? modelHtml(*result_, projector_) : QString()}};
  for (const auto& [label, html] : sections) {
    label->setText(html);
    label->setVisible(!html.isEmpty());
  }
}

void ExplainPanel::showAt(const RunModel& model, const StepMark* m, int64_t stripTime) {
  if (m == nullptr) {
    step_->setText(model.held() == 0 ? QStringLiteral("waiting for telemetry") : QString());
    rule_->clear();
    messages_->clear();
  } else {
    // The clock below the headline, small and quiet: it qualifies the times, it is not the step.
    step_->setText(QStringLiteral("%1 · step %2 of %3<br/><span style=\"font-size:12px; "
                                  "font-weight:normal; color:#6b7280\">%4</span>")
                       .arg(phaseName(m->phase))
                       .arg(m->phaseIndex)
                       .arg(m->phaseSteps)
                       .arg(model.planned()
                                ? QStringLiteral("the plan: from the schedule, not measured")
                                : clockNote(*m)));
    rule_->setText(ruleFor(model.run().request.algorithm, m->phase, m->phaseIndex - 1,
                           model.nranks(), model.run().request.torusDims));
    // The step's messages change only with the step (a scan of every transfer).
    const auto key = std::make_tuple(m->iteration, m->step, model.timeline().transfers().size());
    if (key != messagesKey_) {
      messagesKey_ = key;
      messages_->setText(messagesOfStep(model, *m));
    }
  }
  showValues(model, m, stripTime);
}

QString ExplainPanel::messagesOfStep(const RunModel& model, const StepMark& m) const {
  // Distinct sender -> receiver (chunk) of the step, from the measured transfers.
  std::map<std::tuple<int, int, uint32_t>, int> seen;
  for (const Transfer& x : model.timeline().transfers()) {
    if (x.iteration == m.iteration && x.step == m.step) seen[{x.sender, x.receiver, x.chunk}]++;
  }
  if (seen.empty()) return {};
  QStringList parts;
  for (const auto& [key, slices] : seen) {
    const auto& [from, to, chunk] = key;
    const QColor c = rankColor(from, model.nranks());
    parts << QStringLiteral("<span style='color:%1'>■</span>%2→%3 chunk %4")
                 .arg(c.name())
                 .arg(from)
                 .arg(to)
                 .arg(chunk);
    if (parts.size() >= 16 && seen.size() > 16) {
      parts << QStringLiteral("… %1 more").arg(seen.size() - 16);
      break;
    }
  }
  return QStringLiteral("This step: ") + parts.join(QStringLiteral(", "));
}

void ExplainPanel::showValues(const RunModel& model, const StepMark* m, int64_t stripTime) {
  if (!arithmetic_ || !arithmetic_->enabled()) return;
  // Replays the strip updates of the step's iteration up to stripTime: each rank's values and
  // one log line per reduction or copy.
  const int n = model.nranks();
  const uint32_t iteration = m ? m->iteration : 0;
  StripState state;
  state.reset(n, model.cells(), startsWithOwnInput(model.run().request.collective));
  QStringList lines;
  std::vector<CellUpdate> ofIteration;
  for (const CellUpdate& u : model.updates()) {
    if (u.tNs > stripTime) break;
    if (u.iteration != iteration || u.reset) continue;
    const uint64_t before = state.mask(u.rank, u.first);
    ofIteration.push_back(u);
    state.applyUntil(ofIteration, u.tNs);
    lines << phaseShort(u.phase) + QString::number(model.phaseIndex(u.phase, u.step)) +
                 QStringLiteral(" · ") + arithmetic_->logLine(u, before);
  }
  const QString text = lines.join(QChar('\n'));
  if (log_->toPlainText() != text) {
    log_->setPlainText(text);
    log_->moveCursor(QTextCursor::End);
  }
  QString html = QStringLiteral("<table cellspacing='0' cellpadding='2'><tr><td></td>");
  for (uint64_t e = 0; e < model.bufferElems(); ++e) {
    html += QStringLiteral("<td align='right' style='color:#8a93a0'>%1</td>").arg(e);
  }
  html += QStringLiteral("</tr>");
  const uint64_t all = allRanksMask(n);
  for (int r = 0; r < n; ++r) {
    html += QStringLiteral("<tr><td><span style='color:%1'>■</span> <b>%2</b></td>")
                .arg(rankColor(r, n).name())
                .arg(r);
    for (uint64_t e = 0; e < model.bufferElems(); ++e) {
      int cell = 0;
      int last = 0;
      model.cellRange(e, 1, cell, last);
      const uint64_t mask = state.mask(r, cell);
      const bool done = mask == all;
      html += QStringLiteral("<td align='right' style='%1'>%2</td>")
                  .arg(done ? QStringLiteral("background:#ffe38a;font-weight:bold") : QString(),
                       arithmetic_->values(mask, e, 1));
    }
    html += QStringLiteral("</tr>");
  }
  values_->setText(html + QStringLiteral("</table>"));
}

void ExplainPanel::setTelemetryStatus(uint64_t held, uint64_t dropped, uint64_t bound) {
  const QLocale c = QLocale::c();
  QString s =
      QStringLiteral("Telemetry: %1 events held").arg(c.toString(static_cast<qulonglong>(held)));
  if (dropped > 0) {
    s += QStringLiteral(
             ", <b style='color:#c0392b'>%1 dropped</b> past the bound of %2 (the view shows the "
             "run's start)")
             .arg(c.toString(static_cast<qulonglong>(dropped)),
                  c.toString(static_cast<qulonglong>(bound)));
  }
  status_->setText(s);
}

QString ExplainPanel::stepText() const { return step_->text(); }
QString ExplainPanel::ruleText() const { return rule_->text(); }
QString ExplainPanel::logText() const { return log_->toPlainText(); }
QString ExplainPanel::sentText() const { return sent_->text(); }
QString ExplainPanel::busbwText() const { return busbw_->text(); }
QString ExplainPanel::modelText() const { return model_->text(); }

}  // namespace arl::ui
