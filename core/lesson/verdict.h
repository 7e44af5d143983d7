// What a lesson's measurements say: which option they pick, by what margin, and whether that is
// the article's answer; and whether the machine was steady enough to trust it. Pure: the
// runner (the lesson command, or the window) runs the experiments and fills the results.
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "lesson/lesson.h"

namespace arl {

// One experiment's run, as far as a verdict needs it.
struct ExperimentResult {
  std::string optionId;      // Fastest: the option it ran for; Value: ""
  std::string args;          // the command line (bench's or train's), for the output
  bool ran = false;          // the run ended Done
  std::string error;         // why not (refused, failed), else ""
  double value = NAN;        // Fastest: the measure; Value: the quantity
  double predictedUs = NAN;  // the cost model's prediction of bench's time (NaN: none)
  double timeUs = NAN;       // bench's time, or train's mean step; for the prediction's ratio
  // What to compare the value with ("8 ranks; 2(N-1)/N gives 1.75"; "12 of 12 steps
  // identical, largest spread 0").
  std::string note;
};

// The machine's speed, sampled before and after a lesson: a fixed piece of work timed again
// and again (as tests/bench/machine_steadiness does). max/min over the samples.
struct Steadiness {
  double spreadBefore = NAN;
  double spreadAfter = NAN;
  double loadBefore = NAN;  // the 1-minute load average before the lesson started
  int cores = 0;
  // A spread wider than this means separate runs cannot resolve the lessons' 1.3x margins.
  static constexpr double kMaxSpread = 1.25;
  bool steady() const;
  std::string describe() const;  // one line
};

struct Verdict {
  std::string winner;    // the option the measurement picked ("" when none: a run failed, or
                         // a quantity in no option's range)
  std::string runnerUp;  // Fastest: the second best
  // Fastest: the winner's advantage over the runner-up as a ratio (>= 1; infinite when the
  // winner's exposed communication is 0); none for a fact (isFact()).
  std::optional<double> margin;
  bool agrees = false;  // winner == the lesson's answer
  // Fastest: agrees, and by at least kMinMargin: a lesson that wins by a coin flip teaches
  // nothing. A fact: agrees.
  bool clear = false;
  // A fact measure (identical_share): the winner's and the runner-up's notes, which say what
  // decided it ("allreduce: 12 of 12 steps identical, ...; ps-async: 0 of 12 ..."); else "".
  std::string detail;
  std::string reason;  // when it does not agree or is not clear: why, in a sentence
  static constexpr double kMinMargin = 1.3;
};

// Measured over predicted time; NaN without a prediction.
double predictionRatio(const ExperimentResult& r);
// Whether the model's prediction lies within +-35% of the measurement.
bool predictionWithin(const ExperimentResult& r);

Verdict decide(const Lesson& l, const std::vector<ExperimentResult>& results);

// Times `samples` runs of a fixed piece of work (about 40 ms each, after one not counted, which
// wakes the core up); max/min.
double sampleSpread(int samples);
// The 1-minute load average, NaN when unknown.
double loadAverage();

}  // namespace arl
