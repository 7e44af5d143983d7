// The numbers the explanation panel teaches with once a run has its row: the cost model's
// closed form for the run with this session's parameters in it, the model's prediction and
// how it was made, the measured time; busbw against the rate of the wire; and the bytes each
// rank's telemetry says it sent, against the formula and the schedule. Every model number
// comes from core/model's own functions (closedForm, shapedParams, the row's predict()); no
// Qt, so the numbers are tested apart from their wording (explain_result.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "exec/sent_bytes.h"
#include "model/model.h"

namespace arl {
struct SweepRow;
}

namespace arl::ui {

// Where a session's model parameters came from, as the line that names them says
// (BenchReport::modelSource: app/model_choice.cpp writes "calibration FILE (MACHINE, DATE,
// data plane P, N workers)" or "default parameters (WHY)", export.h's kDefaultModelSource
// stands when nobody said), read into its parts once so that the explanation composes its own
// sentence from them.
struct ModelSource {
  enum class Kind : uint8_t {
    Calibration,  // a calibration file
    Defaults,     // the built-in parameters
    Other,        // a line of neither form: said as it is
  };
  Kind kind = Kind::Defaults;
  std::string file;     // Calibration: its file
  std::string machine;  // Calibration: where it was measured
  std::string date;     // Calibration: when
  // Calibration: what else it says ("data plane shm, 4 workers"); Defaults: why they are used
  // ("--model default", "no calibration at /x/calibration.json"); empty when it says nothing.
  std::string detail;
  std::string line;  // the line itself
};
ModelSource readModelSource(const std::string& line);

// The model a session predicts with (BenchReport::model, modelSource) and the data plane its
// runs used.
struct ModelContext {
  ModelParams params;
  ModelSource source;
  bool sharedMemory = false;  // runsOverSharedMemory() of the session's plane and workers
  // On several hosts, which plane the pairs used (DataPlaneUse::text); empty on one host.
  std::string dataPlane;
};

// What sets the rate busbw is held against.
enum class WireKind : uint8_t {
  ShapedPort,      // every port shaped (--nic-bw, --slow-rank): the rate that sets beta
  ShapedRingLink,  // the ring's slowest shaped link sets beta
  ShmSend,         // unshaped over shared memory: the calibrated send rate (ModelParams::shmSend)
  ShmCopy,         // ... a calibration without it: the copy rate (ModelParams::shmCopy)
  Port,            // the model's port rate, 1 / beta
};

struct RunExplanation {
  // The run.
  std::string algorithm;
  Collective collective = Collective::AllReduce;
  int nranks = 0;
  uint64_t bytes = 0;  // S
  uint64_t sliceBytes = 0;
  int ranksPerHost = 0;  // ranks per host the run resolved to (n: one host)
  int radix = 0;         // knomial's k the run resolved to
  LinkShaping shaping;
  std::string dataPlane;  // ModelContext::dataPlane

  // The collective library that ran the algorithm ("nccl": findLibraryAlgorithm()); empty for
  // the lab's own, whose executor reports the bytes each rank sent.
  std::string library;
  // A training run (allreduce-lab train --record): each step reduces its gradient in buckets,
  // a collective each, so one all-reduce's bytes, busbw and model do not describe it.
  size_t trainingBuckets = 0;  // 0: not a training run

  // The model.
  bool defaults = true;  // the parameters are the built-in ones (nothing calibrated)
  ModelSource source;
  std::string formText;       // closedFormText(); empty when there is none
  CostTerms terms;            // closedForm() of the run
  ModelParams used;           // shapedParams(): what the closed form is evaluated with
  double closedFormUs = NAN;  // terms.seconds(used) in µs; NaN without a closed form
  bool closedFormPerIteration = true;
  double predictedUs = NAN;  // the row's prediction (predict()); NaN without one
  std::optional<PredictionMethod> method;
  // The lab's time: mean over timed iterations of the slowest rank; NaN when not measured.
  double measuredUs = NAN;
  size_t iterations = 0;

  // busbw against the wire.
  double algbwGBps = 0;
  double busbwGBps = 0;
  double wireGBps = 0;
  WireKind wire = WireKind::Port;
  // A slow rank or link: the slowest directed link of the shaping (pathRate), whatever the
  // model's beta says; 0 when every link runs at the ports' rate.
  double slowestGBps = 0;
  int slowestFrom = -1;
  int slowestTo = -1;

  // Bytes sent.
  std::vector<RankSent> sent;          // per rank, from telemetry
  std::vector<uint64_t> scheduled;     // per rank, the schedule's count (ResolvedRun::bytesSent)
  std::optional<SentFormula> formula;  // sentFormula()
  TelemetryLevel level = TelemetryLevel::Chunks;
  uint64_t eventsDropped = 0;
};

RunExplanation explainRun(const SweepRow& row, const ModelContext& model);

// The busiest rank's bytes per iteration as its telemetry says, and how many ranks said it;
// 0 ranks: nothing was measured.
struct SentSummary {
  uint64_t lowest = 0;
  uint64_t highest = 0;
  int busiest = -1;
  int measuredRanks = 0;
  bool varies = false;  // a rank's iterations did not all say the same
};
SentSummary summarize(const std::vector<RankSent>& sent);

}  // namespace arl::ui
