#include "charts/charts_panel.h"

namespace arl::ui {

ChartsPanel::ChartsPanel(QWidget* parent) : QTabWidget(parent) {}
ChartsPanel::~ChartsPanel() = default;

void ChartsPanel::beginSession(const BenchConfig&, const std::vector<WorkerInfo>&) {}
void ChartsPanel::addRow(const SweepRow&) {}
void ChartsPanel::setReport(const BenchReport&) {}
void ChartsPanel::showRun(const SweepRow&) {}

}  // namespace arl::ui
