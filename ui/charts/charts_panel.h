// The charts of a session, in tabs: busbw and algbw against size (one series per algorithm, the
// model's prediction dashed beside each), busbw against slice size, the per-step timeline of
// one run, the per-link throughput heat map of one run, and the spread of iteration times.
// Fed whole (a recording) or row by row (a live sweep; redrawn at most 30 times a second).
#pragma once

#include <QTabWidget>

#include "export/export.h"

namespace arl::ui {

class ChartsPanel : public QTabWidget {
  Q_OBJECT

 public:
  explicit ChartsPanel(QWidget* parent = nullptr);
  ~ChartsPanel() override;

  // Starts a new session: every chart empties and takes this configuration.
  void beginSession(const BenchConfig& config, const std::vector<WorkerInfo>& workers);
  // One finished run of the live session.
  void addRow(const SweepRow& row);
  // A whole session at once (a recording, or a finished sweep).
  void setReport(const BenchReport& report);
  // The run whose per-step timeline and link heat map are shown (its telemetry events are
  // read; the row need not outlive the call).
  void showRun(const SweepRow& row);
};

}  // namespace arl::ui
