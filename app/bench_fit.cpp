#include "bench_fit.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "cli_util.h"
#include "model/model_fit.h"
#include "model_choice.h"

namespace arl::app {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string ratio(double measured, double predicted) {
  if (!std::isfinite(predicted) || !(predicted > 0)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", measured / predicted);
  return buf;
}

std::string us(double v) { return std::isfinite(v) ? formatTimeUs(v) : std::string("-"); }

}  // namespace

SessionFit fitSession(const BenchReport& r) {
  SessionFit out;
  out.fittedUs.assign(r.rows.size(), kNaN);
  std::vector<FitSample> samples;
  std::vector<size_t> rowOf;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const BenchRow& row = r.rows[i];
    if (row.result.state != RunState::Done || row.result.effective.nranks <= 0) continue;
    const CostQuery q = costQueryOf(row, {});
    try {
      (void)closedForm(q);
    } catch (const std::exception&) {
      continue;  // no closed form for this algorithm and collective
    }
    samples.push_back({q, row.metrics.timeUs * 1e-6});
    rowOf.push_back(i);
  }
  try {
    const ModelFit f = fitModel(samples, r.model);
    out.params = f.params;
    out.rmsRelativeResidual = f.rmsRelativeResidual;
    out.points = f.points;
    for (size_t k = 0; k < rowOf.size(); ++k) out.fittedUs[rowOf[k]] = f.fittedSeconds[k] * 1e6;
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

std::string fitText(const BenchReport& r) {
  if (!r.fit) return "";
  const SessionFit& f = *r.fit;
  if (!f.error.empty()) return "# Fitted from this run  : none: " + f.error + "\n#";
  std::string s =
      printfString(
          "# Fitted from this run  : %s\n"
          "#   (alpha and beta of the closed forms over %zu rows, reduce rate held; rms relative "
          "residual %.0f%%)\n#",
          paramsText(f.params).c_str(), f.points, f.rmsRelativeResidual * 100) +
      "\n";
  s += printfString("#%11s  %-18s  %9s  %10s  %-11s  %5s  %10s  %5s", "size", "algorithm", "time",
                    "predicted", "method", "ratio", "fitted", "ratio") +
       "\n";
  s += printfString("#%11s  %-18s  %9s  %10s  %-11s  %5s  %10s  %5s", "(B)", "", "(us)", "(us)", "",
                    "", "(us)", "") +
       "\n";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const BenchRow& row = r.rows[i];
    if (row.result.state != RunState::Done) continue;
    const double t = row.metrics.timeUs;
    const double fit = i < f.fittedUs.size() ? f.fittedUs[i] : kNaN;
    const std::string method = row.predictedBy ? std::string(toString(*row.predictedBy)) : "-";
    s += printfString("#%11" PRIu64 "  %-18s  %9s  %10s  %-11s  %5s  %10s  %5s", row.sizeBytes,
                      row.result.request.algorithm.c_str(), us(t).c_str(),
                      us(row.predictedUs).c_str(), method.c_str(),
                      ratio(t, row.predictedUs).c_str(), us(fit).c_str(), ratio(t, fit).c_str()) +
         "\n";
  }
  return s + "#";
}

}  // namespace arl::app
