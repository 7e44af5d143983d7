#include "model/model_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "base/errors.h"
#include "model/metrics.h"

namespace arl {

namespace {

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

// The median of measured / predicted over the samples `pick` keeps; 0 when it keeps none.
template <class Pick>
double medianRatio(const std::vector<FitSample>& samples, const ModelParams& p, Pick pick) {
  std::vector<double> ratios;
  for (const FitSample& s : samples) {
    if (pick(s)) ratios.push_back(s.seconds / predictSharedMemory(s.query, p));
  }
  return median(std::move(ratios));
}

}  // namespace

SharedMemoryFit fitSharedMemory(const std::vector<FitSample>& samples, const ModelParams& base) {
  ARL_ENFORCE(base.shmCopy && *base.shmCopy > 0, "the shared-memory fit needs a copy rate");
  for (const FitSample& s : samples) {
    if (!(s.seconds > 0) || !std::isfinite(s.seconds)) {
      throw ConfigError("fit: a measured time of " + number(s.seconds) + " s (" +
                        std::string(s.query.algorithm) + ", " + std::to_string(s.query.bytes) +
                        " bytes) is not a positive time");
    }
    if (!sharedMemoryCovers(s.query, base)) {
      throw ConfigError("fit: the run of " + std::string(s.query.algorithm) + ", " +
                        std::to_string(s.query.bytes) +
                        " bytes, is not an unshaped run over shared memory");
    }
  }
  constexpr uint64_t kLarge = uint64_t{1} << 20;
  const auto large = [](const FitSample& s) { return s.query.bytes >= kLarge; };
  const auto small = [](const FitSample& s) { return s.query.bytes < kLarge; };
  const bool anySmall = std::any_of(samples.begin(), samples.end(), small);
  ModelParams p = base;
  p.shmAlpha = base.shmAlpha.value_or(base.alpha);
  p.shmWorkScale = 1.0;
  for (int round = 0; round < 10; ++round) {
    const double alphaBefore = *p.shmAlpha, scaleBefore = p.shmWorkScale;
    if (anySmall) {
      // Bisection on log(alpha): above 1, the runs are slower than predicted, alpha too small.
      double lo = std::log(1e-8), hi = std::log(1e-2);
      for (int i = 0; i < 40; ++i) {
        const double mid = 0.5 * (lo + hi);
        p.shmAlpha = std::exp(mid);
        (medianRatio(samples, p, small) > 1 ? lo : hi) = mid;
      }
      p.shmAlpha = std::exp(0.5 * (lo + hi));
    }
    // Twice: the prediction is nearly, not exactly, proportional to the scale.
    for (int i = 0; i < 2; ++i) {
      const double r = medianRatio(samples, p, large);
      if (r > 0) p.shmWorkScale *= r;
    }
    const auto moved = [](double now, double before) { return std::abs(now / before - 1) > 1e-4; };
    if (!moved(*p.shmAlpha, alphaBefore) && !moved(p.shmWorkScale, scaleBefore)) break;
  }
  return {*p.shmAlpha, p.shmWorkScale};
}

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
