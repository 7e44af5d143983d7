// A banner across the top of the window for a run that failed: a bold headline naming the rank
// (and the step, when the error names one) and the runtime's message under it. Dismissible;
// the window stays usable while it shows. When the run left a flight record, a "Flight record"
// button opens it (flightRecordRequested).
#pragma once

#include <QFrame>

class QLabel;
class QToolButton;

namespace arl::ui {

class ErrorBanner : public QFrame {
  Q_OBJECT

 public:
  explicit ErrorBanner(QWidget* parent = nullptr);

  // Shows `error` (as the runtime said it); `rank` >= 0 names the failed rank in the headline,
  // `lastStep` >= 0 the last step it reported when the error names none.
  void showError(const QString& error, int rank = -1, int lastStep = -1);
  // Shows a problem that is not a run's failure (a recording that cannot be read, ...).
  void showProblem(const QString& headline, const QString& details);
  QString headline() const;
  QString details() const;
  // Whether the failure shown has a flight record to open (the button shows then); cleared by
  // each showError and showProblem.
  void setFlightRecordAvailable(bool available);
  bool flightRecordAvailable() const;
  QToolButton* flightRecordButton() const { return flight_; }

 signals:
  void dismissed();
  void flightRecordRequested();

 private:
  QLabel* icon_;
  QLabel* headline_;
  QLabel* details_;
  QToolButton* flight_;
  QToolButton* close_;
};

// "Rank 2 failed at step 5": the rank and step the error names, else `rank` and the last step
// the rank reported (`lastStep`); either is left out when unknown.
QString failureHeadline(const QString& error, int rank, int lastStep = -1);

}  // namespace arl::ui
