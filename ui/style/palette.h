// Colours shared by every view, so that a rank has the same hue in the topology, its buffer
// strip, its timeline lanes and the heat map's axes, and an algorithm the same hue in every
// chart (its prediction dashed in that hue).
#pragma once

#include <QColor>
#include <QString>

namespace arl::ui {

// Rank `rank` of `nranks`: a qualitative palette up to 12 ranks, beyond that hues spaced
// evenly around the colour wheel at a lightness that stays readable on white and on dark.
QColor rankColor(int rank, int nranks);

// The colour of an algorithm's series (by its name as the generators spell it); names the
// palette does not know get a stable colour from their hash.
QColor algorithmColor(const QString& algorithm);

// The accent that marks a completely reduced chunk (every rank's contribution in it).
QColor completeColor();

}  // namespace arl::ui
