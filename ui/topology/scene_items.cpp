#include "topology/scene_items.h"

#include <QGraphicsSceneHoverEvent>
#include <QPainter>
#include <QPainterPath>
#include <QTransform>
#include <algorithm>
#include <bit>
#include <cmath>
#include <numbers>

#include "style/palette.h"
#include "style/units.h"
#include "topology/run_model.h"

namespace arl::ui {

namespace {

constexpr double kPi = std::numbers::pi;

int contributors(uint64_t mask, int n) { return std::popcount(mask & allRanksMask(n)); }

double angleOf(QPointF v) { return std::atan2(v.y(), v.x()) * 180.0 / kPi; }

}  // namespace

// ---- SceneStyle ----

// A font size in scene units that is at least `screenPx` pixels on screen under the painter's
// transform (the view scales the scene to fit): what projector mode guarantees.
int projectorPx(double scale, int scenePx, double screenPx) {
  scale = std::max(1e-3, std::abs(scale));
  return std::max(scenePx, static_cast<int>(std::ceil(screenPx / scale)));
}
int projectorPx(const QPainter& p, int scenePx, double screenPx) {
  return projectorPx(p.worldTransform().m11(), scenePx, screenPx);
}

SceneStyle::SceneStyle(int n, bool proj) : nranks(n), projector(proj) {
  for (int r = 0; r < n; ++r) {
    rankColors.push_back(rankColor(r, n));
    rankBrushes.emplace_back(rankColors.back());
  }
  ink = QColor(0x26, 0x2b, 0x33);
  faint = QColor(0xd5, 0xda, 0xe1);
  const double w = (n <= 8 ? 4.0 : (n <= 16 ? 3.0 : 1.4)) * (projector ? 2.0 : 1.0);
  linkPen = QPen(projector ? QColor(0x3a, 0x42, 0x4e) : QColor(0x9a, 0xa4, 0xb0), w, Qt::SolidLine,
                 Qt::RoundCap);
  slowLinkPen = QPen(QColor(0xd6, 0x3c, 0x3c), std::max(1.2, w * 0.6), Qt::DashLine, Qt::RoundCap);
  if (projector) ink = QColor(Qt::black);
  outlinePen = QPen(ink, (n <= 16 ? 2.0 : 1.0) * (projector ? 1.5 : 1.0));
  completePen = QPen(QColor(0x7a, 0x4a, 0x00), n <= 16 ? 2.5 : 1.2);
  completeBrush = QBrush(completeColor());
  emptyBrush = QBrush(QColor(0xf3, 0xf5, 0xf8));
  labelFont = QFont(QStringLiteral("DejaVu Sans"));
  labelFont.setBold(true);
  smallFont = QFont(QStringLiteral("DejaVu Sans"));
}

QColor SceneStyle::gaugeColor(int rank, double fraction) const {
  const QColor base = rank >= 0 && rank < nranks ? rankColors[static_cast<size_t>(rank)] : ink;
  const double f = std::clamp(0.25 + 0.75 * fraction, 0.0, 1.0);
  return QColor::fromRgbF(static_cast<float>(1 - f + f * base.redF()),
                          static_cast<float>(1 - f + f * base.greenF()),
                          static_cast<float>(1 - f + f * base.blueF()));
}

// ---- LinkItem ----

LinkItem::LinkItem(const Layout& layout, const LayoutLink& link, const SceneStyle& style)
    : a_(layout.nodes[static_cast<size_t>(link.a)].pos),
      b_(layout.nodes[static_cast<size_t>(link.b)].pos),
      link_(link),
      style_(style),
      radius_(layout.nodeRadius) {
  setZValue(0);
  setCacheMode(QGraphicsItem::DeviceCoordinateCache);
}

QRectF LinkItem::boundingRect() const {
  return QRectF(a_, b_).normalized().adjusted(-80, -30, 80, 30);
}

QRectF LinkItem::contentRect() const {
  QRectF r = QRectF(a_, b_).normalized();
  if (!link_.label.isEmpty()) {
    const QPointF mid = a_ + (b_ - a_) * 0.62;  // where paint() puts the label
    r |= QRectF(mid.x() - 70, mid.y() - 18, 140, 36);
  }
  return r;
}

void LinkItem::paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) {
  p->setRenderHint(QPainter::Antialiasing);
  p->setPen(link_.slow ? style_.slowLinkPen : style_.linkPen);
  p->drawLine(a_, b_);
  if (link_.from >= 0) paintArrow(p);
  if (link_.label.isEmpty() || (style_.projector && !link_.slow)) return;
  QFont f = style_.smallFont;
  f.setPixelSize(static_cast<int>(std::max(11.0, radius_ * 0.55)));
  if (style_.projector) f.setPixelSize(projectorPx(*p, f.pixelSize(), 22));
  f.setBold(true);
  p->setFont(f);
  // Past the middle, away from the first node (a star's centre), clear of its strip.
  const QPointF mid = a_ + (b_ - a_) * 0.62;
  const QRectF text = p->fontMetrics().boundingRect(link_.label).toRectF();
  const QRectF box(mid.x() - text.width() / 2 - 6, mid.y() - text.height() / 2 - 3,
                   text.width() + 12, text.height() + 6);
  p->setPen(QPen(style_.slowLinkPen.color(), 1.5));
  p->setBrush(QColor(0xff, 0xf1, 0xf0));
  p->drawRoundedRect(box, 5, 5);
  p->setPen(style_.slowLinkPen.color().darker(130));
  p->drawText(box, Qt::AlignCenter, link_.label);
}

// A chevron at the link's middle pointing the way its messages go.
void LinkItem::paintArrow(QPainter* p) const {
  const QPointF from = link_.from == link_.a ? a_ : b_;
  const QPointF to = link_.from == link_.a ? b_ : a_;
  const QPointF d = to - from;
  const double len = std::hypot(d.x(), d.y());
  if (len < 1e-6) return;
  const QPointF u = d / len;
  const QPointF n(-u.y(), u.x());
  const double s = std::clamp(radius_ * 0.4, 5.0, 14.0);
  const QPointF tip = (a_ + b_) / 2 + u * s;
  const QPolygonF head({tip, tip - u * 2 * s + n * s, tip - u * 2 * s - n * s});
  p->setPen(Qt::NoPen);
  p->setBrush(link_.slow ? style_.slowLinkPen.color() : style_.linkPen.color().darker(115));
  p->drawPolygon(head);
}

// ---- BoxItem ----

BoxItem::BoxItem(const LayoutBox& box, const SceneStyle& style) : box_(box), style_(style) {
  setZValue(-1);
  setCacheMode(QGraphicsItem::DeviceCoordinateCache);
}

QRectF BoxItem::boundingRect() const { return box_.rect.adjusted(-4, -40, 4, 4); }

QRectF BoxItem::contentRect() const { return box_.rect.adjusted(-2, box_.framed ? -2 : 0, 2, 2); }

void BoxItem::paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) {
  p->setRenderHint(QPainter::Antialiasing);
  if (box_.framed) {
    p->setPen(QPen(style_.faint.darker(115), 2, Qt::SolidLine));
    p->setBrush(QColor(0xf6, 0xf8, 0xfb));
    p->drawRoundedRect(box_.rect, 18, 18);
  }
  QFont f = style_.labelFont;
  f.setPixelSize(20);
  p->setFont(f);
  p->setPen(style_.ink.lighter(160));
  const QRectF title =
      box_.framed ? box_.rect.adjusted(16, 8, -16, 0) : box_.rect.adjusted(0, 0, 0, 0);
  // Frames (hosts) name themselves at their top left; unframed panels (trees) centred over
  // their drawing.
  p->drawText(title, Qt::AlignTop | (box_.framed ? Qt::AlignLeft : Qt::AlignHCenter), box_.title);
}

// ---- RankItem ----

RankItem::RankItem(const Layout& layout, const LayoutNode& node, const SceneStyle& style,
                   const StripState& strips)
    : node_(node),
      style_(style),
      strips_(strips),
      // Larger nodes in projector mode, so that the larger numbers fit inside them.
      radius_(layout.nodeRadius * (style.projector ? 1.35 : 1.0)),
      rings_(layout.stripsAsRings),
      labelled_(style.nranks <= 16),
      tree_(layout.kind == QStringLiteral("tree")) {
  setPos(node.pos);
  setZValue(2);
  // Strips change only as data lands: between changes the item is drawn from its pixmap.
  setCacheMode(QGraphicsItem::DeviceCoordinateCache);
  setAcceptHoverEvents(true);
  if (const auto it = layout.slowRanks.find(node.rank); it != layout.slowRanks.end())
    slowRate_ = it->second;
  setToolTip(node.label.isEmpty() ? QStringLiteral("rank %1").arg(node.rank)
                                  : QStringLiteral("rank %1 (%2)").arg(node.rank).arg(node.label));
}

double RankItem::labelScreenPx(double scale) const {
  int px = static_cast<int>(std::max(10.0, radius_ * 0.95));
  if (style_.projector) px = projectorPx(scale, px, SceneStyle::kProjectorLabelPx);
  return px * std::abs(scale);
}

QRectF RankItem::boundingRect() const {
  const double ext = rings_ ? radius_ + 14 : std::max(radius_ + 160, 2.0 * radius_ + 30);
  return QRectF(-ext, -ext, 2 * ext, 2 * ext);
}

void RankItem::paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) {
  p->setRenderHint(QPainter::Antialiasing);
  if (rings_) {
    paintFillRing(p);
  } else {
    paintStrip(p);
  }
  const QColor c =
      node_.rank < style_.nranks ? style_.rankColors[static_cast<size_t>(node_.rank)] : style_.ink;
  if (slowRate_ > 0) {
    p->setPen(QPen(style_.slowLinkPen.color(), std::max(2.0, radius_ * 0.12), Qt::DashLine));
    p->setBrush(Qt::NoBrush);
    p->drawEllipse(QPointF(0, 0), radius_ * 1.3, radius_ * 1.3);
  }
  p->setPen(QPen(c.darker(140), std::max(1.0, radius_ * 0.08)));
  p->setBrush(c);
  p->drawEllipse(QPointF(0, 0), radius_, radius_);
  if (labelled_ || hovered_) {
    QFont f = style_.labelFont;
    f.setPixelSize(
        static_cast<int>(std::max(10.0, radius_ * (hovered_ && !labelled_ ? 1.6 : 0.95))));
    if (style_.projector) {
      f.setPixelSize(projectorPx(*p, f.pixelSize(), SceneStyle::kProjectorLabelPx));
    }
    p->setFont(f);
    const QString text = node_.label.isEmpty() ? QString::number(node_.rank) : node_.label;
    if (labelled_) {
      p->setPen(c.lightness() > 150 ? style_.ink : QColor(Qt::white));
      p->drawText(QRectF(-radius_, -radius_, 2 * radius_, 2 * radius_), Qt::AlignCenter, text);
    } else {
      const QRectF box(radius_ + 4, -radius_ - 26, 80, 24);
      p->setPen(style_.ink);
      p->drawText(box, Qt::AlignLeft | Qt::AlignVCenter, QStringLiteral("rank ") + text);
    }
  }
  if (slowRate_ > 0) {
    QFont f = style_.smallFont;
    f.setPixelSize(static_cast<int>(std::max(11.0, radius_ * 0.5)));
    f.setBold(true);
    p->setFont(f);
    p->setPen(style_.slowLinkPen.color().darker(120));
    p->drawText(QRectF(-120, radius_ * 1.35, 240, 24), Qt::AlignHCenter | Qt::AlignTop,
                QStringLiteral("port ") + QString::fromStdString(rateLabel(slowRate_)));
  }
}

void RankItem::paintCell(QPainter* p, const QRectF& r, uint64_t mask) const {
  const int n = style_.nranks;
  const int k = contributors(mask, n);
  p->setPen(Qt::NoPen);
  if (k == 0) {
    p->setBrush(style_.emptyBrush);
    p->drawRect(r);
  } else if (mask == allRanksMask(n) && n > 1) {
    p->setBrush(style_.completeBrush);
    p->drawRect(r);
  } else if (k <= 8) {
    // One band per contributor, in its rank's colour, across the cell's thickness.
    const double h = r.height() / k;
    int i = 0;
    for (int rank = 0; rank < n && rank < 64; ++rank) {
      if (!(mask & (uint64_t{1} << rank))) continue;
      p->setBrush(style_.rankBrushes[static_cast<size_t>(rank)]);
      p->drawRect(QRectF(r.left(), r.top() + i * h, r.width(), h + 0.3));
      ++i;
    }
  } else {
    p->setBrush(style_.emptyBrush);
    p->drawRect(r);
    const double f = static_cast<double>(k) / n;
    p->setBrush(style_.gaugeColor(node_.rank, f));
    p->drawRect(QRectF(r.left(), r.bottom() - f * r.height(), r.width(), f * r.height()));
  }
  const bool complete = mask == allRanksMask(n) && n > 1;
  p->setPen(complete ? style_.completePen : QPen(style_.faint.darker(125), 1));
  p->setBrush(Qt::NoBrush);
  p->drawRect(r);
}

RankItem::StripGeometry RankItem::stripGeometry() const {
  StripGeometry g;
  const int cells = std::max(strips_.cells(), 1);
  // Across under the node up to 8 ranks and in trees (whose nodes all point down); radially
  // outward beyond, where a strip across would reach the neighbours on a circle.
  g.below = tree_ || style_.nranks <= 8;
  if (g.below) {
    // Under the node, left to right, as a buffer is read: chunk 0 first.
    const double w = std::max(3.4 * radius_, 18.0 * cells);
    const double h = std::clamp(radius_ * 0.6, 9.0, 26.0);
    // Above a node at the top of the drawing, so the strip stays clear of its links.
    const double y = node_.outward.y() < -0.7 ? -radius_ - 8 - h : radius_ + 8;
    g.rect = QRectF(-w / 2, y, w, h);
  } else {
    // Radially outward from the node, cell 0 nearest to it.
    const double len = std::min(150.0, std::max(80.0, 16.0 * cells));
    const double h = std::clamp(radius_ * 0.62, 12.0, 22.0);
    g.rect = QRectF(radius_ + 10, -h / 2, len, h);
    g.angle = angleOf(node_.outward);
  }
  return g;
}

void RankItem::paintStrip(QPainter* p) const {
  const int cells = strips_.cells();
  if (cells <= 0) return;
  p->save();
  const StripGeometry g = stripGeometry();
  if (!g.below) p->rotate(g.angle);
  const double cw = g.rect.width() / cells;
  for (int c = 0; c < cells; ++c) {
    paintCell(p, QRectF(g.rect.left() + c * cw, g.rect.top(), cw, g.rect.height()),
              strips_.mask(node_.rank, c));
  }
  p->restore();
}

QRectF RankItem::contentRect() const {
  const double ring = slowRate_ > 0 ? radius_ * 1.3 + 2 : radius_ + 2;
  QRectF r(-ring, -ring, 2 * ring, 2 * ring);
  if (rings_) {
    const double rr = radius_ + std::max(3.5, radius_ * 0.35) + radius_ * 0.25;
    r |= QRectF(-rr, -rr, 2 * rr, 2 * rr);
  } else if (strips_.cells() > 0) {
    const StripGeometry g = stripGeometry();
    r |= g.below ? g.rect : QTransform().rotate(g.angle).mapRect(g.rect);
  }
  if (slowRate_ > 0) r |= QRectF(-90, radius_ * 1.35, 180, 24);
  return r.translated(pos());
}

void RankItem::paintFillRing(QPainter* p) const {
  const int cells = strips_.cells();
  const int n = style_.nranks;
  if (cells <= 0) return;
  const double rr = radius_ + std::max(3.5, radius_ * 0.35);
  const QRectF arc(-rr, -rr, 2 * rr, 2 * rr);
  const double span = 360.0 / cells;
  for (int c = 0; c < cells; ++c) {
    const uint64_t m = strips_.mask(node_.rank, c);
    const int k = contributors(m, n);
    const bool complete = m == allRanksMask(n) && n > 1;
    const QColor col = complete
                           ? completeColor()
                           : (k == 0 ? style_.faint : style_.gaugeColor(node_.rank, double(k) / n));
    p->setPen(QPen(col, std::max(3.0, radius_ * 0.5), Qt::SolidLine, Qt::FlatCap));
    p->drawArc(arc, static_cast<int>((90 - c * span) * 16), static_cast<int>(-span * 0.9 * 16));
  }
}

void RankItem::hoverEnterEvent(QGraphicsSceneHoverEvent*) {
  hovered_ = true;
  setZValue(5);
  update();
}

void RankItem::hoverLeaveEvent(QGraphicsSceneHoverEvent*) {
  hovered_ = false;
  setZValue(2);
  update();
}

// ---- TokenLayer ----

TokenLayer::TokenLayer(const SceneStyle& style, double radius, QRectF bounds)
    : style_(style), radius_(radius), bounds_(bounds) {
  setZValue(4);
}

void TokenLayer::setTokens(std::vector<TokenDraw> tokens) {
  tokens_ = std::move(tokens);
  update();
}

void TokenLayer::paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) {
  p->setRenderHint(QPainter::Antialiasing);
  for (const TokenDraw& t : tokens_) {
    if (style_.nranks > 16) {
      paintArcToken(p, t);
    } else {
      paintRingToken(p, t);
    }
  }
}

void TokenLayer::paintRingToken(QPainter* p, const TokenDraw& t) const {
  const int n = style_.nranks;
  const uint64_t all = allRanksMask(n);
  const int k = contributors(t.provenance, n);
  const double r = radius_;
  const QRectF outer(t.pos.x() - r, t.pos.y() - r, 2 * r, 2 * r);
  if (t.provenance == all && n > 1) {
    // A complete sum: a solid accent disc with a dark outline and a halo.
    p->setPen(Qt::NoPen);
    p->setBrush(QColor(0xff, 0xc4, 0x00, 70));
    p->drawEllipse(t.pos, r * 1.7, r * 1.7);
    p->setPen(style_.completePen);
    p->setBrush(style_.completeBrush);
    p->drawEllipse(outer);
    return;
  }
  p->setPen(QPen(style_.ink, 1.5));
  p->setBrush(QColor(Qt::white));
  p->drawEllipse(outer);
  const double ring = r * 0.78;
  const QRectF mid(t.pos.x() - ring, t.pos.y() - ring, 2 * ring, 2 * ring);
  const double thick = r * 0.55;
  if (k <= 8 && k > 0) {
    const double span = 360.0 / k;
    int i = 0;
    for (int rank = 0; rank < n && rank < 64; ++rank) {
      if (!(t.provenance & (uint64_t{1} << rank))) continue;
      p->setPen(
          QPen(style_.rankColors[static_cast<size_t>(rank)], thick, Qt::SolidLine, Qt::FlatCap));
      p->drawArc(mid, static_cast<int>((90 - i * span) * 16),
                 static_cast<int>(-span * 16 + (k > 1 ? 40 : 0)));
      ++i;
    }
  } else if (k > 8) {
    p->setPen(QPen(style_.faint, thick, Qt::SolidLine, Qt::FlatCap));
    p->drawEllipse(mid);
    p->setPen(QPen(style_.gaugeColor(t.sender, 1.0), thick, Qt::SolidLine, Qt::FlatCap));
    p->drawArc(mid, 90 * 16, static_cast<int>(-360.0 * k / n * 16));
  }
}

void TokenLayer::paintArcToken(QPainter* p, const TokenDraw& t) const {
  const int n = style_.nranks;
  const bool complete = t.provenance == allRanksMask(n);
  const double len = radius_ * 2.6;
  const QPointF a = t.pos - t.dir * (len / 2);
  const QPointF b = t.pos + t.dir * (len / 2);
  const double w = radius_ * 1.1;
  if (complete) {
    p->setPen(QPen(style_.completePen.color(), w + 2.5, Qt::SolidLine, Qt::RoundCap));
    p->drawLine(a, b);
    p->setPen(QPen(completeColor(), w, Qt::SolidLine, Qt::RoundCap));
    p->drawLine(a, b);
    return;
  }
  const double f = static_cast<double>(contributors(t.provenance, n)) / std::max(n, 1);
  p->setPen(QPen(style_.ink, w + 2, Qt::SolidLine, Qt::RoundCap));
  p->drawLine(a, b);
  p->setPen(QPen(QColor(Qt::white), w, Qt::SolidLine, Qt::RoundCap));
  p->drawLine(a, b);
  // The gauge: the token's length filled in proportion to its contributors.
  p->setPen(QPen(style_.gaugeColor(t.sender, 1.0), w, Qt::SolidLine, Qt::RoundCap));
  p->drawLine(a, a + (b - a) * std::max(f, 0.08));
}

}  // namespace arl::ui
