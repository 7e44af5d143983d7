// The explanation panel's sections for a run that has its row (run_explanation.h), as rich
// text: the model's closed form with this session's numbers in it beside the measured time,
// busbw against the wire's rate, and the bytes each rank sent as measured against the
// formula and the schedule. In projector mode each is one line in few words.
#pragma once

#include <QString>
#include <cstdint>

#include "topology/run_explanation.h"

namespace arl::ui {

QString modelHtml(const RunExplanation& x, bool projector);
QString busbwHtml(const RunExplanation& x, bool projector);
QString sentHtml(const RunExplanation& x, bool projector);

// "6M", "256K", or "1,000 bytes" where the count is no whole K or M.
QString sizeText(uint64_t bytes);

}  // namespace arl::ui
