#include "topology/explain_result.h"

#include <QLocale>
#include <QStringList>
#include <algorithm>
#include <cmath>

#include "base/types.h"
#include "model/metrics.h"
#include "style/units.h"

namespace arl::ui {

namespace {

QString quiet(const QString& html) {
  return QStringLiteral("<span style='color:#6b7280'>%1</span>").arg(html);
}

// A section's title; each line under it starts with a break.
QString heading(const QString& text) { return QStringLiteral("<b>%1</b>").arg(text); }

// Text kept on one line: its spaces do not break.
QString nb(QString text) { return text.replace(QLatin1Char(' '), QStringLiteral("&nbsp;")); }

// The window's time and rate formatters (style/units.h), for rich text.
QString timeText(double us) { return QString::fromStdString(timeLabel(us)); }
QString rateText(double gbps) { return QString::fromStdString(rateLabel(gbps * 1e9)); }

QString perByteRate(double secondsPerByte) {
  return QString::fromStdString(rateLabel(1 / secondsPerByte));
}

QString escaped(const std::string& text) { return QString::fromStdString(text).toHtmlEscaped(); }

// Decimal units, so that "6.29 MB ÷ 1.5 GB/s = 4.19 ms" can be checked by hand.
QString decimalBytes(double b) {
  if (b >= 1e9) return QStringLiteral("%1 GB").arg(b / 1e9, 0, 'f', 2);
  if (b >= 1e6) return QStringLiteral("%1 MB").arg(b / 1e6, 0, 'f', 2);
  if (b >= 1e3) return QStringLiteral("%1 kB").arg(b / 1e3, 0, 'f', 1);
  return QStringLiteral("%1 B").arg(b, 0, 'f', 0);
}

QString count(double k) {
  if (std::fabs(k - std::round(k)) < 1e-9) return QString::number(std::llround(k));
  return QString::number(k, 'g', 4);
}

// No line break after a slash: "2(n−1)/n" stays whole.
QString joinSlashes(QString text) {
  return text.replace(QLatin1Char('/'), QStringLiteral("/\u2060"));
}

// The notation as rich text: subscripts (α_h, Σ_{d=2,4,…,p}), fractions kept whole.
QString notation(const std::string& text) {
  QString s = joinSlashes(QString::fromStdString(text).toHtmlEscaped());
  for (qsizetype at = s.indexOf(QStringLiteral("_{")); at >= 0;
       at = s.indexOf(QStringLiteral("_{"))) {
    const qsizetype close = s.indexOf(QLatin1Char('}'), at);
    if (close < 0) break;
    s = s.left(at) + QStringLiteral("<sub>") + s.mid(at + 2, close - at - 2) +
        QStringLiteral("</sub>") + s.mid(close + 1);
  }
  return s.replace(QStringLiteral("_h"), QStringLiteral("<sub>h</sub>"));
}

// Splits `text` where `sep` stands outside parentheses.
QStringList splitOutside(const QString& text, const QString& sep) {
  QStringList parts;
  int depth = 0;
  qsizetype from = 0;
  for (qsizetype i = 0; i < text.size(); ++i) {
    if (text[i] == QLatin1Char('(')) ++depth;
    if (text[i] == QLatin1Char(')')) --depth;
    if (depth == 0 && text.mid(i, sep.size()) == sep) {
      parts << text.mid(from, i - from);
      from = i + sep.size();
      i = from - 1;
    }
  }
  return parts << text.mid(from);
}

// The closed form one term a line, so that no term breaks inside; what qualifies it after.
QString formLines(const std::string& form) {
  const QString text = QString::fromStdString(form);
  const qsizetype semi = text.indexOf(QStringLiteral("; "));
  const QStringList terms = splitOutside(semi < 0 ? text : text.left(semi), QStringLiteral(" + "));
  QString html;
  for (qsizetype i = 0; i < terms.size(); ++i) {
    html += (i == 0 ? QStringLiteral("<br/><i>T</i> = ")
                    : QStringLiteral("<br/>&nbsp;&nbsp;&nbsp;&nbsp;+ ")) +
            nb(notation(terms[i].toStdString()));
  }
  if (semi >= 0)
    html += QStringLiteral("<br/>") + quiet(notation(text.mid(semi + 2).toStdString()));
  return html;
}

// One line of the substitution: the parameter, its coefficient and value, the time it adds.
QString termLine(const QString& symbol, const QString& product, double seconds) {
  return QStringLiteral("<br/>%1&nbsp;&nbsp;%2 = %3")
      .arg(symbol, nb(product), nb(timeText(seconds * 1e6)));
}

// The substitution: each parameter, its coefficient times its value, the time it adds.
QString termLines(const RunExplanation& x) {
  const CostTerms& t = x.terms;
  const ModelParams& p = x.used;
  const auto times = [](double k, double s) {
    return QStringLiteral("%1 × %2").arg(count(k), timeText(s * 1e6));
  };
  const auto over = [](double b, double s) {
    return QStringLiteral("%1 ÷ %2").arg(decimalBytes(b), perByteRate(s));
  };
  const QString h = QStringLiteral("<sub>h</sub>");
  QString lines;
  if (t.alphaCount > 0) {
    lines += termLine(QStringLiteral("α"), times(t.alphaCount, p.alpha), t.alphaCount * p.alpha);
  }
  if (t.betaBytes > 0) {
    lines += termLine(QStringLiteral("β"), over(t.betaBytes, p.beta), t.betaBytes * p.beta);
  }
  if (t.gammaBytes > 0) {
    lines += termLine(QStringLiteral("γ"), over(t.gammaBytes, p.gamma), t.gammaBytes * p.gamma);
  }
  if (t.hostAlphaCount > 0) {
    lines += termLine(QStringLiteral("α") + h, times(t.hostAlphaCount, p.hostAlpha()),
                      t.hostAlphaCount * p.hostAlpha());
  }
  if (t.hostBetaBytes > 0) {
    lines += termLine(QStringLiteral("β") + h, over(t.hostBetaBytes, p.hostBeta()),
                      t.hostBetaBytes * p.hostBeta());
  }
  return lines;
}

bool predictedOtherwise(const RunExplanation& x) {
  return x.method && *x.method != PredictionMethod::ClosedForm && std::isfinite(x.predictedUs);
}

// The time the measurement is held against: the prediction bench and the charts show.
double modelUs(const RunExplanation& x) {
  return std::isfinite(x.predictedUs) ? x.predictedUs : x.closedFormUs;
}

QString methodName(PredictionMethod m) {
  switch (m) {
    case PredictionMethod::ClosedForm: return QStringLiteral("closed form");
    case PredictionMethod::Simulation: return QStringLiteral("simulation");
    case PredictionMethod::SharedMemory: return QStringLiteral("shared-memory simulation");
    case PredictionMethod::SharedMemoryCached: return QStringLiteral("shm simulation, cached");
  }
  return {};
}

// Why the model's prediction for this run is not the closed form.
QString methodNote(const RunExplanation& x) {
  if (!predictedOtherwise(x)) return {};
  if (*x.method == PredictionMethod::Simulation) {
    QString why = QStringLiteral("a slow rank or link off the ring");
    if (!x.closedFormPerIteration) {
      why = QStringLiteral("back to back, a rooted collective's ranks run ahead");
    } else if (x.ranksPerHost < x.nranks && x.algorithm != "hierarchical") {
      why = QStringLiteral("ranks on several hosts");
    }
    return QStringLiteral(
               "The closed form cannot say this run (%1): the model simulates the "
               "schedule over the ports.")
        .arg(why);
  }
  const QString cores = x.used.cores > 0 ? QStringLiteral("%1 cores").arg(x.used.cores)
                                         : QStringLiteral("a core per rank");
  return QStringLiteral(
             "Over shared memory a send is its sender's copy, with no port: the model "
             "simulates the schedule on %1. The closed form costs ports.")
      .arg(cores);
}

// The shaping the model costs by, and the rate that sets beta.
QString shapingNote(const RunExplanation& x) {
  if (x.shaping.empty()) return {};
  QStringList parts;
  if (x.wire == WireKind::ShapedPort) {
    parts << QStringLiteral("β = 1 / %1, the shaped port rate").arg(rateText(x.wireGBps));
  } else if (x.wire == WireKind::ShapedRingLink) {
    parts << QStringLiteral("β = 1 / %1, the ring's slowest shaped link").arg(rateText(x.wireGBps));
  } else if (!x.shaping.uniform() || x.shaping.portBytesPerSecond > 0) {
    parts << QStringLiteral("no shaped rate is below 1/β");
  }
  if (x.shaping.addedLatencySeconds > 0) {
    parts << QStringLiteral("α includes the added %1")
                 .arg(timeText(x.shaping.addedLatencySeconds * 1e6));
  }
  return QStringLiteral("Shaped network: the model costs by ports; %1.")
      .arg(parts.join(QStringLiteral("; ")));
}

// Where the parameters came from, composed from the parts of the session's line.
QString sourceLine(const RunExplanation& x) {
  const ModelSource& m = x.source;
  QString named;  // what the line names besides the defaults
  if (m.kind == ModelSource::Kind::Calibration) {
    QStringList about{escaped(m.machine)};
    for (const std::string* part : {&m.date, &m.detail}) {
      if (!part->empty()) about << escaped(*part);
    }
    named = QStringLiteral("calibration %1 (%2)")
                .arg(escaped(m.file), about.join(QStringLiteral(", ")));
  } else if (m.kind == ModelSource::Kind::Other) {
    named = escaped(m.line);
  }
  if (!x.defaults) {
    return quiet(named.isEmpty()
                     ? QStringLiteral("Parameters: not the defaults; the session names no source.")
                     : QStringLiteral("Parameters: %1.").arg(named));
  }
  if (m.kind == ModelSource::Kind::Defaults) named = escaped(m.detail);  // why, when it says
  return quiet(named.isEmpty()
                   ? QStringLiteral("Parameters: default, not calibrated.")
                   : QStringLiteral("Parameters: default, not calibrated (%1).").arg(named));
}

QString runLine(const RunExplanation& x) {
  QStringList parts{nb(QStringLiteral("n = %1").arg(x.nranks)),
                    nb(QStringLiteral("S = %1").arg(sizeText(x.bytes)))};
  if (x.sliceBytes > 0) parts << nb(QStringLiteral("s = %1").arg(sizeText(x.sliceBytes)));
  if (x.ranksPerHost < x.nranks) parts << nb(QStringLiteral("K = %1").arg(x.ranksPerHost));
  if (x.algorithm == "knomial") parts << nb(QStringLiteral("k = %1").arg(x.radix));
  return parts.join(QStringLiteral(", "));
}

// The closed form's total, the model's prediction where it is made otherwise, the measurement.
QString resultLines(const RunExplanation& x) {
  QString lines;
  if (!x.formText.empty()) {
    lines += QStringLiteral("<br/>closed form <b>%1</b>").arg(nb(timeText(x.closedFormUs)));
  }
  if (predictedOtherwise(x)) {
    lines += QStringLiteral("<br/>model (%1) <b>%2</b>")
                 .arg(methodName(*x.method), nb(timeText(x.predictedUs)));
  }
  lines += QStringLiteral("<br/><b>measured %1</b> (mean of %2)")
               .arg(nb(timeText(x.measuredUs)))
               .arg(x.iterations);
  const double m = modelUs(x);
  if (m > 0 && x.measuredUs > 0) {
    lines += QStringLiteral(", %1× the model").arg(x.measuredUs / m, 0, 'f', 2);
  }
  return lines;
}

QString factorText(Collective c) {
  switch (c) {
    case Collective::AllReduce: return joinSlashes(QStringLiteral("2(n−1)/n"));
    case Collective::ReduceScatter:
    case Collective::AllGather: return joinSlashes(QStringLiteral("(n−1)/n"));
    case Collective::Reduce:
    case Collective::Broadcast: return QStringLiteral("1");
  }
  return {};
}

QString wireName(const RunExplanation& x) {
  switch (x.wire) {
    case WireKind::ShapedPort: return QStringLiteral("the shaped port rate (sets β)");
    case WireKind::ShapedRingLink: return QStringLiteral("the ring's slowest shaped link (sets β)");
    case WireKind::ShmSend: return QStringLiteral("the calibrated shared-memory send rate");
    case WireKind::ShmCopy: return QStringLiteral("the calibrated shared-memory copy rate");
    case WireKind::Port: break;
  }
  return x.defaults ? QStringLiteral("the default port rate 1/β, not measured here")
                    : QStringLiteral("the calibrated port rate 1/β");
}

// What busbw means (nccl-tests, doc/PERFORMANCE.md, "Bus bandwidth"): with every rank reaching
// the others at a bandwidth B, an all-reduce takes at best t = (S/B)·2(n−1)/n, so busbw =
// algbw·2(n−1)/n is that B, to compare with "the speed of the hardware bottleneck"
// independently of n; the charts call it the bandwidth of an equivalent flat fabric. Then
// where this run stands against the wire.
QString flatFabricNote(const RunExplanation& x, double ratio) {
  QString note = QStringLiteral(
      "busbw is nccl-tests' equivalent flat fabric: the bandwidth per rank an optimal algorithm "
      "would need to take the measured time.");
  if (x.algorithm == "parameter-server") {
    return note + QStringLiteral(
                      " A parameter server's busbw overstates nothing, but its port is the "
                      "bottleneck: it carries (n−1)·S each way, where the ring puts 2(n−1)/n·S on "
                      "every port.");
  }
  if (x.algorithm == "switch") {
    return note + QStringLiteral(
                      " busbw is nccl-tests' ring formula with n = %1 ranks; through the switch "
                      "each rank sent S and received S, and the switch (rank %1, a worker) "
                      "took n·S in and sent n·S out, n copies where SHARP and NVLS multicast "
                      "one: its port is the bottleneck.")
                      .arg(x.nranks);
  }
  // Where the algorithm's own bytes are not busbw's factor (swing-latency and recursive
  // doubling send log₂n·S, a tree's root more), busbw undercounts what crossed the ports.
  const double assumed = busBwFactor(x.collective, x.nranks) * static_cast<double>(x.bytes);
  if (x.formula && assumed > 0 && x.formula->bytes > assumed * 1.05) {
    note += QStringLiteral(
                " Each rank of %1 sends %2 = %3, %4× what busbw's factor assumes: the ports "
                "carried more than busbw says.")
                .arg(QString::fromStdString(x.algorithm), QString::fromStdString(x.formula->text),
                     sizeText(static_cast<uint64_t>(std::llround(x.formula->bytes))))
                .arg(x.formula->bytes / assumed, 0, 'f', 2);
  }
  if (x.algorithm == "hierarchical" && x.ranksPerHost < x.nranks) {
    note += QStringLiteral(
        " A two-level algorithm can beat it: only 1/K of the vector crosses "
        "between hosts.");
  }
  if (ratio > 1.05 && !x.shaping.uniform()) {
    return note + QStringLiteral(
                      " Above the wire: the algorithm keeps most bytes off the slow "
                      "rank or link.");
  }
  if (ratio > 1.05 && x.wire == WireKind::Port && x.defaults) {
    return note + QStringLiteral(" Above the wire: the default rate is not this machine's.");
  }
  if (ratio > 1.05) {
    return note + QStringLiteral(
                      " Above the wire: this run did not push every byte through "
                      "ports of that rate.");
  }
  // Below the ports' rate with a slower link in the network: the slow link's note says why.
  const bool slowLink = x.slowestGBps > 0 && x.slowestGBps < x.wireGBps * 0.999;
  if (ratio > 0 && !slowLink)
    note += QStringLiteral(" Below the wire: the rest is latency, reductions, waiting.");
  return note;
}

QString rangeText(uint64_t lo, uint64_t hi) {
  return lo == hi ? sizeText(hi) : sizeText(lo) + QStringLiteral("–") + sizeText(hi);
}

// The measured bytes: one figure when every rank said the same, each rank's at small counts,
// else the range and the busiest.
QString perRank(const RunExplanation& x, const SentSummary& m) {
  if (m.measuredRanks == x.nranks && m.lowest == m.highest) {
    return QStringLiteral("<b>%1</b> every rank").arg(sizeText(m.highest));
  }
  if (x.nranks <= 8) {
    QStringList parts;
    for (size_t r = 0; r < x.sent.size(); ++r) {
      const RankSent& s = x.sent[r];
      parts << QStringLiteral("%1: %2").arg(r).arg(s.iterations > 0 ? sizeText(s.bytes)
                                                                    : QString::fromUtf8(kNoValue));
    }
    return parts.join(QStringLiteral(", "));
  }
  QString text = QStringLiteral("<b>%1</b>, rank %2 the busiest")
                     .arg(rangeText(m.lowest, m.highest))
                     .arg(m.busiest);
  if (m.measuredRanks < x.nranks) {
    text += QStringLiteral(" (%1 of %2 ranks said)").arg(m.measuredRanks).arg(x.nranks);
  }
  return text;
}

// The first rank whose measurement is not its schedule's count (-1: none).
int scheduleMismatch(const RunExplanation& x) {
  for (size_t r = 0; r < x.sent.size() && r < x.scheduled.size(); ++r) {
    if (x.sent[r].iterations > 0 && x.sent[r].bytes != x.scheduled[r]) return static_cast<int>(r);
  }
  return -1;
}

uint64_t formulaBytes(const RunExplanation& x) {
  return x.formula ? static_cast<uint64_t>(std::llround(x.formula->bytes)) : 0;
}

QString verdict(const RunExplanation& x, const SentSummary& m) {
  const int r = scheduleMismatch(x);
  const bool formulaHolds = x.formula && m.highest == formulaBytes(x);
  QString said;
  if (x.formula && !formulaHolds) {
    said = QStringLiteral("The busiest rank sent %1× the formula. ")
               .arg(static_cast<double>(m.highest) / x.formula->bytes, 0, 'f', 3);
  }
  if (r >= 0) {
    const auto k = static_cast<size_t>(r);
    return said + QStringLiteral("Rank %1 sent %2 where its schedule says %3: they differ.")
                      .arg(r)
                      .arg(sizeText(x.sent[k].bytes), sizeText(x.scheduled[k]));
  }
  if (x.scheduled.empty()) return formulaHolds ? QStringLiteral("Measured = formula.") : said;
  return said + (formulaHolds ? QStringLiteral("Measured = formula = schedule.")
                              : QStringLiteral("Measured = schedule, rank by rank."));
}

// At `chunks`, the same bytes counted send by send (SendEnd) rather than by the iteration.
QString sendEndNote(const RunExplanation& x) {
  int mismatch = -1;
  uint64_t sends = 0;
  for (size_t r = 0; r < x.sent.size(); ++r) {
    const RankSent& s = x.sent[r];
    if (s.iterations == 0 || s.sendEnds == 0) continue;
    if (s.sendEndBytes != s.bytes * s.iterations && mismatch < 0) mismatch = static_cast<int>(r);
    sends = std::max<uint64_t>(sends, s.sendEnds / s.iterations);
  }
  if (sends == 0) return {};
  if (mismatch < 0) {
    return QStringLiteral("Counted send by send (SendEnd, up to %1 a rank), the same.").arg(sends);
  }
  if (x.eventsDropped > 0) {
    return QStringLiteral(
               "Counted send by send (SendEnd) the sum is short: %1 events were "
               "dropped.")
        .arg(x.eventsDropped);
  }
  const RankSent& s = x.sent[static_cast<size_t>(mismatch)];
  return QStringLiteral(
             "Rank %1's SendEnd events add up to %2 an iteration, not what its "
             "IterationEnd says.")
      .arg(mismatch)
      .arg(sizeText(s.sendEndBytes / s.iterations));
}

// The formula and the schedule's count, a line under the measurement.
QString expectedLine(const RunExplanation& x) {
  QStringList parts;
  if (x.formula) {
    parts << QStringLiteral("formula %1 = <b>%2</b>")
                 .arg(nb(notation(x.formula->text)), sizeText(formulaBytes(x)));
  }
  if (!x.scheduled.empty()) {
    const auto [lo, hi] = std::minmax_element(x.scheduled.begin(), x.scheduled.end());
    parts << QStringLiteral("schedule <b>%1</b>").arg(rangeText(*lo, *hi));
  }
  return parts.isEmpty() ? QString() : QStringLiteral("<br/>") + parts.join(QStringLiteral(" · "));
}

// busbw against a slow link: a flat fabric of links that slow would need busbw per rank, so a
// run above it kept bytes off the slow link, one below it pushed the whole 2(n-1)/n S through.
QString slowLinkNote(double busbwOverSlowest) {
  if (busbwOverSlowest > 1.05) {
    return QStringLiteral(
        "Faster than a flat fabric of links this slow: the algorithm sends less than "
        "2(n−1)/n·S through the slow link.");
  }
  return QStringLiteral(
      "No faster than a flat fabric of links this slow: the slow link carries a full share "
      "and holds the run back.");
}

// Why a run has no bytes per rank to show.
QString nothingMeasured(const RunExplanation& x) {
  if (!x.library.empty()) {
    return QStringLiteral("nothing: %1 runs the collective whole and reports no bytes per rank")
        .arg(escaped(x.library));
  }
  if (x.level == TelemetryLevel::Off) return QStringLiteral("nothing: telemetry was off");
  return QStringLiteral("nothing: no IterationEnd arrived (telemetry dropped)");
}

}  // namespace

QString sizeText(uint64_t bytes) {
  const QString text = QString::fromStdString(formatSize(bytes));
  bool plain = false;
  text.toULongLong(&plain);
  return plain ? QLocale::c().toString(static_cast<qulonglong>(bytes)) + QStringLiteral(" bytes")
               : text;
}

QString modelHtml(const RunExplanation& x, bool projector) {
  if (x.trainingBuckets > 0) return {};  // no model of a training step
  if (projector) {
    return QStringLiteral("<b>Model</b> %1 · <b>measured</b> %2")
        .arg(timeText(modelUs(x)), timeText(x.measuredUs));
  }
  QString html = heading(QStringLiteral("The model against the measurement"));
  const QString what = QStringLiteral("%1 %2").arg(
      escaped(x.algorithm), QString::fromUtf8(toString(x.collective).data()));
  if (x.formText.empty()) {
    html += QStringLiteral("<br/>%1: the cost model has no closed form for it.").arg(what);
  } else {
    html += QStringLiteral("<br/>%1, closed form with %2:").arg(what, runLine(x)) +
            formLines(x.formText) + termLines(x);
  }
  html += resultLines(x);
  for (const QString& note : {shapingNote(x), methodNote(x)}) {
    if (!note.isEmpty()) html += QStringLiteral("<br/>") + note;
  }
  return html + QStringLiteral("<br/>") + sourceLine(x);
}

QString busbwHtml(const RunExplanation& x, bool projector) {
  if (x.trainingBuckets > 0) return {};  // a step is no one collective of the whole gradient
  const double ratio = x.wireGBps > 0 ? x.busbwGBps / x.wireGBps : 0;
  if (projector) {
    return QStringLiteral("<b>busbw</b> %1 · <b>wire</b> %2")
        .arg(rateText(x.busbwGBps), rateText(x.wireGBps));
  }
  QString html = heading(QStringLiteral("busbw against the wire"));
  html += QStringLiteral("<br/>busbw <b>%1</b> = algbw %2 × %3, measured")
              .arg(nb(rateText(x.busbwGBps)), nb(rateText(x.algbwGBps)), factorText(x.collective));
  html += QStringLiteral("<br/>wire <b>%1</b>: %2").arg(nb(rateText(x.wireGBps)), wireName(x));
  html += QStringLiteral("<br/>busbw / wire <b>%1</b>").arg(ratio, 0, 'f', 2);
  // On several hosts the pairs cross two kinds of wire: say which plane carried which.
  if (!x.dataPlane.empty()) html += QStringLiteral("<br/>data plane: %1").arg(escaped(x.dataPlane));
  if (x.slowestGBps > 0 && x.slowestGBps < x.wireGBps * 0.999) {
    const double slow = x.busbwGBps / x.slowestGBps;
    html += QStringLiteral("<br/>slowest link %1→%2 <b>%3</b>: busbw / slowest <b>%4</b>")
                .arg(x.slowestFrom)
                .arg(x.slowestTo)
                .arg(nb(rateText(x.slowestGBps)))
                .arg(slow, 0, 'f', 2);
    html += QStringLiteral("<br/>") + quiet(slowLinkNote(slow));
  }
  return html + QStringLiteral("<br/>") + quiet(flatFabricNote(x, ratio));
}

QString sentHtml(const RunExplanation& x, bool projector) {
  if (x.trainingBuckets > 0) {
    return QStringLiteral(
               "<b>A training step</b> reduces its gradient in %1 bucket(s), an all-reduce "
               "each, while the backward pass goes on: the bytes, busbw and model of one "
               "all-reduce of the whole gradient do not describe it. The per-step timeline "
               "shows each rank's compute and its buckets' messages.")
        .arg(x.trainingBuckets);
  }
  const SentSummary m = summarize(x.sent);
  if (projector) {
    if (m.measuredRanks == 0 && !x.library.empty()) {
      return QStringLiteral("<b>Bytes sent</b>: %1 reports none per rank").arg(escaped(x.library));
    }
    if (m.measuredRanks == 0) return QStringLiteral("<b>Bytes sent</b>: nothing measured");
    QString line = QStringLiteral("<b>Each rank sent</b> %1").arg(rangeText(m.lowest, m.highest));
    if (x.formula) line += QStringLiteral(" · formula %1").arg(sizeText(formulaBytes(x)));
    return line;
  }
  QString html = heading(QStringLiteral("Bytes each rank sent, one timed iteration"));
  const QString measured = m.measuredRanks == 0
                               ? nothingMeasured(x)
                               : perRank(x, m) + quiet(QStringLiteral(" (telemetry)"));
  html += QStringLiteral("<br/>measured %1").arg(measured) + expectedLine(x);
  if (m.measuredRanks == 0) return html;
  html += QStringLiteral("<br/>") + verdict(x, m);
  if (m.varies) html += QStringLiteral(" A rank's iterations did not all send the same.");
  const QString sends = sendEndNote(x);
  return sends.isEmpty() ? html : html + QStringLiteral("<br/>") + quiet(sends);
}

}  // namespace arl::ui
