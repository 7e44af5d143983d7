// The explanation beside the topology view: the run in one line, the phase and step, the rule
// the algorithm follows in that phase, the messages of the step, bytes per rank and, at small
// counts, every rank's values and a log of the arithmetic as reductions land. Once the run has
// its row: the bytes each rank sent as measured, busbw against the wire, and the cost model's
// formula with this session's parameters beside the measured time (explain_result.h).
#pragma once

#include <QWidget>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "topology/run_explanation.h"
#include "topology/run_model.h"

class QLabel;
class QPlainTextEdit;

namespace arl::ui {

class Arithmetic;

// The rule of `algorithm` in `phase` (arl::Phase), in words with the step's numbers:
// "rank at ring position i sends its partial sum of chunk (i − 1 − s) mod n to position i + 1"
// (stepInPhase s counts from 0 within the phase).
QString ruleFor(const std::string& algorithm, uint8_t phase, int stepInPhase, int nranks);

class ExplainPanel : public QWidget {
  Q_OBJECT

 public:
  explicit ExplainPanel(QWidget* parent = nullptr);
  ~ExplainPanel() override;

  void setRun(const RunModel& model);
  // Shows the step at `mark` (null before any) and the buffers as of `stripTime`.
  void showAt(const RunModel& model, const StepMark* mark, int64_t stripTime);
  void setTelemetryStatus(uint64_t held, uint64_t dropped, uint64_t bound);
  // The run's row has arrived (a finished run, live or replayed): the measured sections. They
  // stay while the same run is shown (setRun() of another run hides them).
  void setResult(const SweepRow& row, const ModelContext& model);

  // Projector mode: every text at least 1.8x (the step at least 36 px), the panel wider, the
  // message log (fine print) hidden.
  void setProjector(bool on);

  QString stepText() const;
  QString ruleText() const;
  QString logText() const;
  // The sections of setResult(), as shown ("" before a row).
  QString sentText() const;
  QString busbwText() const;
  QString modelText() const;

 private:
  QString messagesOfStep(const RunModel& model, const StepMark& m) const;
  void showValues(const RunModel& model, const StepMark* mark, int64_t stripTime);
  void showResult();

  QLabel* header_;
  QLabel* step_;
  QLabel* rule_;
  QLabel* messages_;
  QLabel* bytes_;
  QLabel* sent_;
  QLabel* busbw_;
  QLabel* model_;
  QLabel* values_;
  QPlainTextEdit* log_;
  QLabel* status_;
  std::unique_ptr<Arithmetic> arithmetic_;
  std::optional<RunExplanation> result_;
  uint64_t resultRun_ = 0;
  bool projector_ = false;
  std::vector<std::pair<QLabel*, int>> basePx_;  // each label and its normal pixel size
  std::tuple<uint32_t, uint32_t, size_t> messagesKey_{UINT32_MAX, UINT32_MAX, 0};
};

}  // namespace arl::ui
