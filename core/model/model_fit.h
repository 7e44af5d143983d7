// Fitting the cost model's alpha and beta to measured runs of any algorithms, through their
// closed forms (model.h), so that the parameters are the ones the predictions use. The fit
// minimises relative residuals: runs of 4 KiB and of 16 MiB differ in time by a factor of a
// thousand, and an absolute fit would let the largest runs decide alpha as well as beta.
#pragma once

#include <vector>

#include "model/model.h"

namespace arl {

// One measured run: what ran (its closed form's query; shaping is ignored) and its time.
struct FitSample {
  CostQuery query;
  double seconds = 0;
};

struct ModelFit {
  ModelParams params;                 // alpha and beta fitted, gamma as given
  double rmsRelativeResidual = 0;     // root mean square of (measured - fitted) / measured
  std::vector<double> fittedSeconds;  // the closed form with `params`, per sample
  size_t points = 0;
};

// Fits alpha and beta with gamma held at `base`'s value: each sample's closed-form terms and
// time are divided by its time, and fitAlphaBeta() solves the weighted least squares. As in
// fitAlphaBeta(), messages inside a host count as the network's: the result has no separate
// host parameters. Throws ConfigError when a sample's time is not positive and finite,
// when the samples cannot separate alpha from beta, or when the fitted alpha or beta is not
// positive (measurements the model cannot explain with a positive latency and bandwidth); a
// GenError when a sample's algorithm has no closed form.
ModelFit fitModel(const std::vector<FitSample>& samples, const ModelParams& base);

}  // namespace arl
