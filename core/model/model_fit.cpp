#include "model/model_fit.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "base/errors.h"

namespace arl {

namespace {

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

}  // namespace

ModelFit fitModel(const std::vector<FitSample>& samples, const ModelParams& base) {
  std::vector<CostTerms> terms, unscaled;
  std::vector<double> ones;
  for (const FitSample& s : samples) {
    if (!(s.seconds > 0) || !std::isfinite(s.seconds)) {
      throw ConfigError("fit: a measured time of " + number(s.seconds) + " s (" +
                        std::string(s.query.algorithm) + ", " + std::to_string(s.query.bytes) +
                        " bytes) is not a positive time");
    }
    CostQuery q = s.query;
    q.shaping = {};
    unscaled.push_back(closedForm(q));
    // Weighted least squares with weight 1/t: the row (terms / t) should sum to 1.
    terms.push_back(unscaled.back().scaled(1.0 / s.seconds));
    ones.push_back(1.0);
  }
  const AlphaBetaFit f = fitAlphaBeta(terms, ones, base.gamma);
  if (!(f.alpha > 0) || !(f.beta > 0)) {
    throw ConfigError("fit: the measurements give alpha " + number(f.alpha) + " s and beta " +
                      number(f.beta) +
                      " s/byte; both must be positive (too few sizes, or times too noisy: "
                      "measure more sizes or iterations)");
  }
  ModelFit out;
  out.params = base;
  out.params.alpha = f.alpha;
  out.params.beta = f.beta;
  out.params.intraHostAlpha.reset();
  out.params.intraHostBeta.reset();
  out.points = f.points;
  out.rmsRelativeResidual = f.rmsResidual;  // of the scaled rows: relative
  for (const CostTerms& t : unscaled) out.fittedSeconds.push_back(t.seconds(out.params));
  return out;
}

}  // namespace arl
