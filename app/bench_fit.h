// `bench --fit`: the cost model's alpha and beta fitted from the session's own measured rows
// (fitModel() over every completed row whose algorithm has a closed form, gamma held at the
// session's model), and the table that sets the session's predictions beside the fitted ones.
#pragma once

#include <string>

#include "export/export.h"

namespace arl::app {

// The fit over r.rows; SessionFit::error says why there is none (too few sizes, a fit the
// model cannot explain with positive parameters).
SessionFit fitSession(const BenchReport& r);

// Comment lines ('#') for the text output: the fitted parameters and, per completed row, the
// measured time, the session's prediction, the fitted one and each one's ratio
// measured / predicted; no newline after the last line.
std::string fitText(const BenchReport& r);

}  // namespace arl::app
