#include "charts/crossover_view.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "base/topology.h"
#include "charts/paint_util.h"
#include "style/palette.h"

namespace arl::ui {
namespace {

// A winner's colour shaded by its margin: a near tie (margin 0) is faded toward the
// background, a clear win (50% or more) is the algorithm's full colour.
QColor shaded(const QColor& c, double margin, const FigureStyle& s) {
  const double k = 0.3 + 0.7 * std::clamp(margin / 0.5, 0.0, 1.0);
  const QColor b = s.background;
  return QColor::fromRgbF(static_cast<float>(b.redF() + (c.redF() - b.redF()) * k),
                          static_cast<float>(b.greenF() + (c.greenF() - b.greenF()) * k),
                          static_cast<float>(b.blueF() + (c.blueF() - b.blueF()) * k));
}

// Where a value falls on a log axis over `values` (one band per value): the band's centre,
// interpolated between bands for a value between two.
double bandPosition(const std::vector<double>& values, double v, double start, double band) {
  const double lv = std::log2(v);
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const double a = std::log2(values[i]), b = std::log2(values[i + 1]);
    if (lv <= b) {
      const double t = std::clamp((lv - a) / (b - a), -0.5, 1.0);
      return start + (static_cast<double>(i) + 0.5 + t) * band;
    }
  }
  return start + (static_cast<double>(values.size()) - 0.5) * band;
}

// The cell of row r and column c: rows grow upward, the most ranks at the top.
QRectF cellBox(const QRectF& plot, const CrossoverMap& m, size_t r, size_t c) {
  const double cw = plot.width() / static_cast<double>(m.sizes.size());
  const double ch = plot.height() / static_cast<double>(m.ranks.size());
  return {plot.left() + static_cast<double>(c) * cw,
          plot.bottom() - static_cast<double>(r + 1) * ch, cw, ch};
}

void drawCells(QPainter& p, const QRectF& plot, const CrossoverMap& m, const FigureStyle& s) {
  for (size_t r = 0; r < m.ranks.size(); ++r) {
    for (size_t c = 0; c < m.sizes.size(); ++c) {
      const MapCell& cell = m.at(r, c);
      const QRectF box = cellBox(plot, m, r, c);
      if (cell.ranked.empty()) {
        p.fillRect(box, s.grid);
        continue;
      }
      p.fillRect(box, shaded(algorithmColor(qs(cell.ranked.front().algorithm)), cell.margin(), s));
    }
  }
  p.setPen(QPen(s.muted, 1));
  p.setBrush(Qt::NoBrush);
  p.drawRect(plot);
}

void drawAxes(QPainter& p, const QRectF& plot, const CrossoverMap& m, const FigureStyle& s) {
  const QFontMetricsF fm(s.font);
  p.setFont(s.font);
  p.setPen(s.text);
  const double cw = plot.width() / static_cast<double>(m.sizes.size());
  const double ch = plot.height() / static_cast<double>(m.ranks.size());
  const int every =
      std::max(1, static_cast<int>(std::ceil(fm.horizontalAdvance(QStringLiteral("256M ")) / cw)));
  for (size_t c = 0; c < m.sizes.size(); c += static_cast<size_t>(every)) {
    p.drawText(
        QRectF(plot.left() + static_cast<double>(c) * cw, plot.bottom() + 4, cw, fm.height()),
        Qt::AlignHCenter | Qt::AlignTop, qs(sizeLabel(static_cast<double>(m.sizes[c]))));
  }
  const int rowEvery = std::max(1, static_cast<int>(std::ceil(fm.height() / ch)));
  for (size_t r = 0; r < m.ranks.size(); r += static_cast<size_t>(rowEvery)) {
    p.drawText(QRectF(plot.left() - 52, plot.bottom() - static_cast<double>(r + 1) * ch, 46, ch),
               Qt::AlignRight | Qt::AlignVCenter, QString::number(m.ranks[r]));
  }
  p.drawText(QRectF(plot.left(), plot.bottom() + 4 + fm.height(), plot.width(), fm.height()),
             Qt::AlignHCenter | Qt::AlignTop, QStringLiteral("message size (bytes, log scale)"));
  p.save();
  p.translate(plot.left() - 60, plot.center().y());
  p.rotate(-90);
  p.drawText(QRectF(-plot.height() / 2, -fm.height(), plot.height(), fm.height()), Qt::AlignCenter,
             QStringLiteral("ranks (log scale)"));
  p.restore();
}

// Where a measured winner's ring sits: at its ranks and size on the map's log axes, between
// bands for a point between the grid's values.
QPointF markCentre(const QRectF& plot, const CrossoverMap& m, const MeasuredWinner& w) {
  std::vector<double> sizes, ranks;
  for (uint64_t b : m.sizes) sizes.push_back(static_cast<double>(b));
  for (int n : m.ranks) ranks.push_back(n);
  const double cw = plot.width() / static_cast<double>(sizes.size());
  const double ch = plot.height() / static_cast<double>(ranks.size());
  return {bandPosition(sizes, static_cast<double>(w.bytes), plot.left(), cw),
          plot.bottom() - bandPosition(ranks, w.nranks, 0, ch)};
}

double markRadius(const QRectF& plot, const CrossoverMap& m) {
  const double cw = plot.width() / static_cast<double>(m.sizes.size());
  const double ch = plot.height() / static_cast<double>(m.ranks.size());
  return std::clamp(std::min(cw, ch) * 0.3, 5.0, 14.0);
}

// The measured winners as rings in their algorithm's colour at their ranks and size.
void drawMeasured(QPainter& p, const QRectF& plot, const CrossoverView& v, const FigureStyle& s) {
  const double radius = markRadius(plot, v.map);
  for (const MeasuredWinner& w : v.measured) {
    const QPointF c = markCentre(plot, v.map, w);
    p.setPen(QPen(s.text, 3));
    p.setBrush(algorithmColor(qs(w.algorithm)));
    p.drawEllipse(c, radius, radius);
    p.setPen(QPen(algorithmColor(qs(w.algorithm)), 1.5));
    p.drawEllipse(c, radius - 1.5, radius - 1.5);
  }
}

// Each cell's winner and margin, where they fit: centred, or beside a measured mark in the
// cell (to its right, else its left), so that neither hides the other.
void drawCellLabels(QPainter& p, const QRectF& plot, const CrossoverView& v, const FigureStyle& s) {
  const CrossoverMap& m = v.map;
  const QRectF first = cellBox(plot, m, 0, 0);
  const QFont f = withSize(s.font, 0.85);
  const QFontMetricsF fm(f);
  if (fm.horizontalAdvance(QStringLiteral("ring 99%")) >= first.width() - 4 ||
      fm.height() >= first.height()) {
    return;
  }
  p.setFont(f);
  const double radius = markRadius(plot, m);
  for (size_t r = 0; r < m.ranks.size(); ++r) {
    for (size_t c = 0; c < m.sizes.size(); ++c) {
      const MapCell& cell = m.at(r, c);
      if (cell.ranked.empty()) continue;
      const MapEntry& w = cell.ranked.front();
      const QString text = qs(shortAlgorithmName(w.algorithm)) + QStringLiteral(" ") +
                           QString::number(std::lround(cell.margin() * 100)) + QStringLiteral("%") +
                           (w.method == MapMethod::Simulation ? QStringLiteral("*") : QString());
      const QRectF box = cellBox(plot, m, r, c);
      const double width = fm.horizontalAdvance(text) + 4;
      QRectF patch(box.center().x() - width / 2, box.center().y() - fm.height() / 2, width,
                   fm.height());
      for (const MeasuredWinner& mw : v.measured) {
        const QPointF at = markCentre(plot, m, mw);
        if (!box.contains(at)) continue;
        patch.moveLeft(at.x() + radius + 2);
        if (patch.right() > box.right()) patch.moveRight(at.x() - radius - 2);
      }
      p.setPen(s.text);
      p.drawText(patch, Qt::AlignCenter, text);
    }
  }
}

// The legend at the right: each algorithm that wins somewhere, the shading, the marks.
void drawLegend(QPainter& p, const QRectF& area, const CrossoverView& v, const FigureStyle& s) {
  std::set<std::string> winners;
  for (const MapCell& c : v.map.cells) {
    if (!c.ranked.empty()) winners.insert(c.ranked.front().algorithm);
  }
  for (const MeasuredWinner& w : v.measured) winners.insert(w.algorithm);
  const QFontMetricsF fm(s.font);
  p.setFont(s.font);
  double y = area.top();
  for (const std::string& a : winners) {
    p.fillRect(QRectF(area.left(), y + 2, 14, fm.height() - 4), algorithmColor(qs(a)));
    p.setPen(s.text);
    p.drawText(QRectF(area.left() + 20, y, area.width() - 20, fm.height()),
               Qt::AlignLeft | Qt::AlignVCenter,
               qs(a + (shortAlgorithmName(a) != a ? " (" + shortAlgorithmName(a) + ")" : "")));
    y += fm.height() + 2;
  }
  y += fm.height() / 2;
  p.setPen(s.muted);
  const QString lines[] = {QStringLiteral("model: fill, faded where"),
                           QStringLiteral("the runner-up is close"),
                           QStringLiteral("* simulated, else"), QStringLiteral("closed form"),
                           QStringLiteral("\u25CF measured winner")};
  for (const QString& line : lines) {
    p.drawText(QRectF(area.left(), y, area.width(), fm.height()), Qt::AlignLeft, line);
    y += fm.height();
  }
}

}  // namespace

MapQuery windowMapQuery(const ModelParams& p, const LinkShaping& network,
                        const std::string& topology) {
  MapQuery q;
  for (uint64_t b = 4096; b <= (uint64_t{4} << 30); b *= 4) q.sizes.push_back(b);
  q.params = p;
  // A shaping that differs per link has no one map over every rank count: the window's map
  // takes the session's ports and added latency, and the topology by name.
  q.network.portBytesPerSecond = network.portBytesPerSecond;
  q.network.addedLatencySeconds = network.addedLatencySeconds;
  if (!topology.empty()) {
    try {
      q.topology = parseTopology(topology);
    } catch (const TopologyError&) {
      q.topology.reset();  // the setup panel names the problem; the map stays uniform
    }
  }
  if (!q.topology) {
    for (int n = 2; n <= 4096; n *= 2) q.ranks.push_back(n);
    return q;
  }
  // The session's shaping is the topology expanded with each link's latency at hops x the
  // per-hop latency; one link gives that latency back.
  if (const auto it = network.linkLatencySeconds.find({0, 1});
      it != network.linkLatencySeconds.end()) {
    q.hopLatencySeconds = it->second / topologyHops(*q.topology, 0, 1);
  } else {
    // Not expanded yet (the setup before a run): --link-latency is the per-hop latency.
    q.hopLatencySeconds = network.addedLatencySeconds;
  }
  q.network.addedLatencySeconds = 0;
  for (int n = 2; n <= kMapSimulatedRanks; ++n) {
    try {
      checkTopology(*q.topology, n);
      q.ranks.push_back(n);
    } catch (const TopologyError&) {
    }
  }
  return q;
}

std::vector<MeasuredWinner> measuredWinners(const std::vector<ChartRow>& rows) {
  // (ranks, size) -> algorithm -> its fastest time there.
  std::map<std::pair<int, uint64_t>, std::map<std::string, double>> best;
  for (const ChartRow& r : rows) {
    if (!r.ok || r.timeUs <= 0) continue;
    auto& times = best[{r.nranks, r.sizeBytes}];
    auto [it, fresh] = times.try_emplace(r.algorithm, r.timeUs);
    if (!fresh) it->second = std::min(it->second, r.timeUs);
  }
  std::vector<MeasuredWinner> out;
  for (const auto& [cell, times] : best) {
    std::vector<std::pair<double, std::string>> ranked;
    for (const auto& [a, t] : times) ranked.emplace_back(t, a);
    std::sort(ranked.begin(), ranked.end());
    const double margin = ranked.size() > 1 ? ranked[1].first / ranked[0].first - 1 : 0;
    out.push_back({cell.first, cell.second, ranked.front().second, margin});
  }
  return out;
}

void paintCrossoverMap(QPainter& p, const QRectF& r, const CrossoverView& v, const FigureStyle& s) {
  p.fillRect(r, s.background);
  const std::string subtitle =
      v.modelText + (v.measured.empty() ? "" : " · rings: this session's measured winners");
  QRectF body =
      drawHeading(p, r, "Crossover map (model, not measured): the fastest all-reduce", subtitle, s);
  std::string note = "Cell: the model's fastest algorithm, its margin over the runner-up.";
  for (const std::string& n : v.map.notes) note += " " + n + ".";
  body = drawNote(p, body, note, s);
  if (v.map.cells.empty()) return;
  const double legendWidth = 190;
  const QRectF plot(body.left() + 72, body.top() + 4, body.width() - 72 - legendWidth - 16,
                    body.height() - 2 * QFontMetricsF(s.font).height() - 12);
  if (plot.width() < 40 || plot.height() < 40) return;
  drawCells(p, plot, v.map, s);
  drawAxes(p, plot, v.map, s);
  drawMeasured(p, plot, v, s);
  drawCellLabels(p, plot, v, s);
  drawLegend(p, QRectF(plot.right() + 16, plot.top(), legendWidth, plot.height()), v, s);
}

}  // namespace arl::ui
