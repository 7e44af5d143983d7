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

// The shared-memory model's per-message cost (ModelParams::shmAlpha) and work scale
// (shmWorkScale) fitted to unshaped runs over shared memory on one host, through that model
// itself (predictSharedMemory()): the scale makes the median of measured / predicted over the
// runs of 1 MiB and more 1, the per-message cost that median over the smaller runs (found by
// bisection between 10 ns and 10 ms: the prediction grows with it, though not strictly, since
// the cores' list schedule can change order as it moves); each again after the other until
// neither moves by more than 0.01% (at most ten times). Without runs below 1 MiB the
// per-message cost is `base`'s (shmAlpha, else alpha); without runs of 1 MiB and more the
// scale is 1. The closed forms' alpha, fitted where every rank has a core, says little of a
// machine whose ranks take turns on a few: there a message waits for its receiver to be woken
// and run.
struct SharedMemoryFit {
  double alpha = 0;
  double workScale = 1;
};

// Requires base.shmCopy; throws ConfigError on a sample whose time is not positive and finite
// or that is not an unshaped shared-memory run.
SharedMemoryFit fitSharedMemory(const std::vector<FitSample>& samples, const ModelParams& base);

}  // namespace arl
