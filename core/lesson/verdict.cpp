#include "lesson/verdict.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <thread>

namespace arl {

namespace {

std::string fmt(const char* f, double x) {
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}

// Whether `x` is a measurement of `m`: exposed communication may be all hidden (0) and a share
// of identical steps may be none; a time or a bandwidth of 0 is no measurement.
bool measured(SpeedMeasure m, double x) {
  if (!std::isfinite(x)) return false;
  if (m == SpeedMeasure::IdenticalShare) return x >= 0 && x <= 1;
  return m == SpeedMeasure::ExposedUs ? x >= 0 : x > 0;
}

// A fact measure (identical_share) decides by which option holds more of it: no margin, since a
// count of identical steps is not noisy, and a ratio against none (0 of 12) says nothing.
void decideFact(const Lesson& l, const ExperimentResult& best, const ExperimentResult& next,
                Verdict& v) {
  v.detail = best.optionId + ": " + best.note + "; " + next.optionId + ": " + next.note;
  if (best.value == next.value) {
    v.winner.clear();
    v.runnerUp.clear();
    v.reason = "the options tie (" + v.detail + "). " + l.ifDisagree;
    return;
  }
  v.agrees = v.winner == l.answer;
  v.clear = v.agrees;
  if (!v.agrees) v.reason = "'" + v.winner + "' won here, not '" + l.answer + "'. " + l.ifDisagree;
}

Verdict decideFastest(const Lesson& l, const std::vector<ExperimentResult>& results) {
  Verdict v;
  std::vector<const ExperimentResult*> ok;
  for (const ExperimentResult& r : results) {
    if (!r.ran || !measured(l.measure, r.value)) {
      v.reason =
          "option '" + r.optionId + "' did not run: " + (r.error.empty() ? "no result" : r.error);
      return v;
    }
    ok.push_back(&r);
  }
  if (ok.size() < 2) {
    v.reason = "fewer than two options ran";
    return v;
  }
  const bool lower = lowerIsBetter(l.measure);
  std::sort(ok.begin(), ok.end(),
            [&](auto* a, auto* b) { return lower ? a->value < b->value : a->value > b->value; });
  v.winner = ok[0]->optionId;
  v.runnerUp = ok[1]->optionId;
  if (isFact(l)) {
    decideFact(l, *ok[0], *ok[1], v);
    return v;
  }
  // Exposed communication all hidden (0) beats any that is not, by more than any margin.
  const double best = ok[0]->value, next = ok[1]->value;
  v.margin =
      lower ? (best > 0 ? next / best : std::numeric_limits<double>::infinity()) : best / next;
  v.agrees = v.winner == l.answer;
  v.clear = v.agrees && *v.margin >= Verdict::kMinMargin;
  if (!v.agrees) {
    v.reason = "'" + v.winner + "' won here, not '" + l.answer + "'. " + l.ifDisagree;
  } else if (!v.clear) {
    v.reason = "the answer won by " + fmt("%.2fx", *v.margin) + ", less than the " +
               fmt("%.1fx", Verdict::kMinMargin) + " a lesson needs to be clear. " + l.ifDisagree;
  }
  return v;
}

Verdict decideValue(const Lesson& l, const std::vector<ExperimentResult>& results) {
  Verdict v;
  for (const ExperimentResult& r : results) {
    if (!r.ran || !std::isfinite(r.value)) {
      v.reason = "the experiment '" + r.args +
                 "' did not run: " + (r.error.empty() ? "no result" : r.error);
      return v;
    }
  }
  for (const LessonOption& o : l.options) {
    const bool holds = std::all_of(results.begin(), results.end(), [&](const ExperimentResult& r) {
      return r.value >= o.lo && r.value <= o.hi;
    });
    if (holds) v.winner = o.id;
  }
  v.agrees = !v.winner.empty() && v.winner == l.answer;
  v.clear = v.agrees;
  if (v.winner.empty()) {
    v.reason = "the measured values fall in no option's range. " + l.ifDisagree;
  } else if (!v.agrees) {
    v.reason = "the run shows '" + v.winner + "', not '" + l.answer + "'. " + l.ifDisagree;
  }
  return v;
}

}  // namespace

bool Steadiness::steady() const {
  return std::isfinite(spreadBefore) && std::isfinite(spreadAfter) && spreadBefore <= kMaxSpread &&
         spreadAfter <= kMaxSpread;
}

std::string Steadiness::describe() const {
  std::string s = "machine speed spread (max/min of a fixed piece of work) " +
                  fmt("%.2f", spreadBefore) + " before, " + fmt("%.2f", spreadAfter) +
                  " after; load average " + fmt("%.2f", loadBefore) + " on " +
                  std::to_string(cores) + " cores before";
  s += steady() ? ": steady"
                : ": NOT steady (over " + fmt("%.2f", kMaxSpread) +
                      "): the verdict cannot be trusted; run it on a quiet machine";
  return s;
}

double predictionRatio(const ExperimentResult& r) {
  if (!std::isfinite(r.predictedUs) || r.predictedUs <= 0 || !std::isfinite(r.timeUs)) return NAN;
  return r.timeUs / r.predictedUs;
}

bool predictionWithin(const ExperimentResult& r) {
  const double q = predictionRatio(r);
  return std::isfinite(q) && q >= 1 / 1.35 && q <= 1.35;
}

Verdict decide(const Lesson& l, const std::vector<ExperimentResult>& results) {
  return l.by == DecideBy::Fastest ? decideFastest(l, results) : decideValue(l, results);
}

double sampleSpread(int samples) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> ms;
  for (int s = -1; s < samples; ++s) {
    const auto t0 = Clock::now();
    volatile uint64_t x = 1;
    // A chain of dependent multiply-adds (Knuth's MMIX LCG constants): the core's own speed.
    for (int i = 0; i < 20'000'000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    if (s >= 0) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (ms.empty()) return NAN;
  const auto [lo, hi] = std::minmax_element(ms.begin(), ms.end());
  return *lo > 0 ? *hi / *lo : NAN;
}

double loadAverage() {
  std::ifstream in("/proc/loadavg");
  double x = NAN;
  if (!(in >> x)) return NAN;
  return x;
}

}  // namespace arl
