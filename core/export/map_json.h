// The crossover map (model/crossover.h) as JSON, for `allreduce-lab model map --json`. Every
// figure is the model's; the object says so in its "label" and "measured": false.
#pragma once

#include <string>

#include "export/json.h"
#include "model/crossover.h"

namespace arl {

// { "label": "model, not measured", "measured": false, "model": {...}, "network": "...",
//   "topology": "torus:4x4" | null, "ranks": [...], "sizes": [...],
//   "cells": [{"ranks", "bytes", "winner", "margin", "method", "algorithms": [{"algorithm",
//   "seconds", "method"}]}], "notes": [...] }. `source` says where the parameters came from.
Json crossoverMapJson(const CrossoverMap& m, const MapQuery& q, const std::string& source);

}  // namespace arl
