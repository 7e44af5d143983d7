// A failed run's flight record in the window (exec/flight_recorder.h): the same analysis bench
// prints after a failure, as a headline (the collective and step where the run failed, the
// ranks that never reached that step) over a table with a row per rank. Opened from the error
// banner's "Flight record" button.
#pragma once

#include <QAbstractTableModel>
#include <QDialog>
#include <vector>

#include "exec/flight_recorder.h"

class QLabel;

namespace arl::ui {

// One row per rank of a failed run: its state in the failing collective, the last step it
// completed, the ranks it waited on, and when it has no record, why.
class FlightRecordModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Rank, State, LastStep, WaitedOn, Reached, Note, ColumnCount };

  explicit FlightRecordModel(QObject* parent = nullptr);

  void setAnalysis(FlightAnalysis a);
  const FlightAnalysis& analysis() const { return a_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  QVariant text(const FlightRankLine& l, int column) const;
  FlightAnalysis a_;
};

// "Failed in iteration 3 (timed) at step 2 of 6" and "Ranks that never reached step 2: 3".
QString flightHeadline(const FlightAnalysis& a);
QString flightNeverReachedText(const FlightAnalysis& a);

class FlightRecordDialog : public QDialog {
  Q_OBJECT

 public:
  explicit FlightRecordDialog(QWidget* parent = nullptr);
  // The flight record of run `runId` (RunResult::flight).
  void setFlightRecord(const std::vector<RankFlight>& flight, uint64_t runId);
  const FlightRecordModel& model() const { return *model_; }

 private:
  QLabel* headline_;
  QLabel* neverReached_;
  FlightRecordModel* model_;
};

}  // namespace arl::ui
