// The Map tab: the cost model's crossover map (model/crossover.h) as a heat map, ranks x size
// on log axes, one colour per algorithm (the charts' colours), shaded by the winner's margin
// over the runner-up; the session's measured runs are marked on it ("measured"), each with the
// algorithm that ran fastest at its ranks and size. The model's cells and the measured marks
// never mix: the title says "model", every mark says "measured".
#pragma once

#include <QPainter>
#include <QRectF>
#include <string>
#include <vector>

#include "charts/chart_adapter.h"
#include "charts/chart_data.h"
#include "model/crossover.h"

namespace arl::ui {

// The fastest measured run at one rank count and size, and by how much (the runner-up's time
// over it, 0 with one algorithm measured).
struct MeasuredWinner {
  int nranks = 0;
  uint64_t bytes = 0;
  std::string algorithm;
  double margin = 0;
};

struct CrossoverView {
  CrossoverMap map;
  std::string modelText;  // "alpha 5.0 us per message, ... (source)"
  std::vector<MeasuredWinner> measured;
};

// The grid of the window's map: 2..4096 ranks doubling, 4K..4G bytes times 4, over the
// session's ports and added latency. With a named topology (its name as topologyName() spells
// it, `network` expanded over it), the rows are the rank counts the topology fits up to
// kMapSimulatedRanks, each cell priced over its links as `model map --topology` prices it.
MapQuery windowMapQuery(const ModelParams& p, const LinkShaping& network,
                        const std::string& topology = {});

// The fastest algorithm at each (ranks, size) of the finished rows (failed rows left out).
std::vector<MeasuredWinner> measuredWinners(const std::vector<ChartRow>& rows);

void paintCrossoverMap(QPainter& p, const QRectF& r, const CrossoverView& v, const FigureStyle& s);

}  // namespace arl::ui
