#include "topology/topology_pane.h"

namespace arl::ui {

TopologyPane::TopologyPane(QWidget* parent) : QWidget(parent) {}
TopologyPane::~TopologyPane() = default;

void TopologyPane::beginRun(const TopologyRun&) {}
void TopologyPane::appendEvents(int, const std::vector<TelemetryEvent>&) {}
void TopologyPane::endRun() {}
void TopologyPane::showRun(const TopologyRun&, const std::vector<TelemetryEvent>&) {}
uint64_t TopologyPane::eventsHeld() const { return 0; }
uint64_t TopologyPane::eventsDropped() const { return 0; }

}  // namespace arl::ui
