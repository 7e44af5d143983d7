// The lab's centre: the topology view (ranks laid out to suit the algorithm, links drawn with
// their shaping, chunk tokens moving at the times the telemetry recorded, each rank's buffer
// strip filling as reductions land), the explanation beside it (phase, step, the rule at work,
// the arithmetic at small counts) and the playback bar under it (live, pause, step, speed,
// scrubbable timeline). Everything drawn comes from measured telemetry events.
#pragma once

#include <QWidget>
#include <cstdint>
#include <string>
#include <vector>

#include "base/shaping.h"
#include "exec/run_request.h"
#include "exec/telemetry.h"

namespace arl::ui {

// What the pane draws a run from (its events arrive separately).
struct TopologyRun {
  uint64_t runId = 0;
  RunRequest request;  // algorithm, collective, count, dtype, ring order, ...
  int nranks = 0;
  std::vector<std::string> hosts;  // host name per rank (for hierarchical), may be empty
  LinkShaping shaping;
};

class TopologyPane : public QWidget {
  Q_OBJECT

 public:
  explicit TopologyPane(QWidget* parent = nullptr);
  ~TopologyPane() override;

  // A new run: the layout follows its algorithm; no events yet. Playback goes live.
  void beginRun(const TopologyRun& run);
  // Live telemetry of the current run, as the coordinator hands it over (one rank's batch,
  // in time order within the batch). Batches of another run are ignored.
  void appendEvents(int rank, const std::vector<TelemetryEvent>& events);
  // The run ended (its result has arrived); playback may now replay it.
  void endRun();
  // A finished run at once (a recording), ready to play from its start.
  void showRun(const TopologyRun& run, const std::vector<TelemetryEvent>& events);

  // Telemetry events the pane holds for the current run (after any decimation), and how many
  // it dropped past its bound.
  uint64_t eventsHeld() const;
  uint64_t eventsDropped() const;
};

}  // namespace arl::ui
