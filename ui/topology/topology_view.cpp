#include "topology/topology_view.h"

#include <QPainter>
#include <QResizeEvent>
#include <cmath>

#include "topology/scene_items.h"

namespace arl::ui {

namespace {
// The frame the layouts are made for; the tokens' layer spans it.
const QRectF kSceneRect(-560, -470, 1120, 940);
// The drawing is fitted to what it covers, at least this much of the frame (a small layout
// is not blown up past the size a larger one of its kind is drawn at).
constexpr double kMinContentWidth = 620;
constexpr double kMinContentHeight = 480;
constexpr int kPadPx = 14;  // free pixels around the drawing
// The caption's least title size: legible from the back of a room in projector mode.
constexpr int kTitleLeastPx = 16;
constexpr int kProjectorTitleLeastPx = 40;
}  // namespace

TopologyView::TopologyView(QWidget* parent)
    : QGraphicsView(parent), scene_(new QGraphicsScene(this)) {
  scene_->setItemIndexMethod(QGraphicsScene::NoIndex);
  scene_->setSceneRect(kSceneRect);
  setScene(scene_);
  setRenderHint(QPainter::Antialiasing);
  setViewportUpdateMode(QGraphicsView::MinimalViewportUpdate);
  setOptimizationFlag(QGraphicsView::DontSavePainterState, false);
  setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  setFrameShape(QFrame::NoFrame);
  setBackgroundBrush(QColor(0xfb, 0xfc, 0xfe));
  setMinimumSize(320, 240);
}

TopologyView::~TopologyView() = default;

const std::vector<TokenDraw>& TopologyView::tokens() const {
  static const std::vector<TokenDraw> none;
  return tokens_ ? tokens_->tokens() : none;
}

void TopologyView::setRun(const RunModel& model) {
  scene_->clear();
  rankItems_.clear();
  tokens_ = nullptr;
  linkItems_ = 0;
  tokenTransfers_.clear();
  layout_ = makeLayout(model.run(), model.schedule());
  style_ = std::make_unique<SceneStyle>(model.nranks(), projector_);
  strips_.reset(model.nranks(), model.cells(), startsWithOwnInput(model.run().request.collective));
  stripsApplied_ = SIZE_MAX;
  QRectF content;
  for (const LayoutBox& b : layout_.boxes) {
    auto* item = new BoxItem(b, *style_);
    scene_->addItem(item);
    content |= item->contentRect();
  }
  for (const LayoutLink& l : layout_.links) {
    auto* item = new LinkItem(layout_, l, *style_);
    scene_->addItem(item);
    content |= item->contentRect();
    ++linkItems_;
  }
  for (const LayoutNode& n : layout_.nodes) {
    auto* item = new RankItem(layout_, n, *style_, strips_);
    scene_->addItem(item);
    content |= item->contentRect();
    rankItems_.push_back(item);
  }
  if (content.isEmpty()) content = kSceneRect;
  const double grow = std::max(0.0, kMinContentWidth - content.width()) / 2;
  const double growY = std::max(0.0, kMinContentHeight - content.height()) / 2;
  content_ = content.adjusted(-grow, -growY, grow, growY);
  // Projector mode enlarges the ranks (RankItem) and their messages alike, so that a message
  // in flight stays visible beside a rank from the back of a room.
  const double tokenRadius = std::clamp(layout_.nodeRadius * 0.6 * (projector_ ? 1.35 : 1.0), 7.0,
                                        projector_ ? 36.0 : 28.0);
  tokens_ = new TokenLayer(*style_, tokenRadius, kSceneRect);
  scene_->addItem(tokens_);
  fit();
}

void TopologyView::showAt(const RunModel& model, int64_t tokenTime, int64_t stripTime) {
  strips_.applyUntil(model.updates(), stripTime);
  if (strips_.applied() != stripsApplied_) {
    stripsApplied_ = strips_.applied();
    // Only the ranks whose strips changed repaint (the others draw from their caches).
    const std::vector<char> changed = strips_.takeChanged();
    for (RankItem* r : rankItems_) {
      if (r->rank() < static_cast<int>(changed.size()) && changed[static_cast<size_t>(r->rank())])
        r->update();
    }
  }
  const Timeline& tl = model.timeline();
  tokenTransfers_ = tl.inFlightAt(tokenTime);
  std::vector<TokenDraw> draws;
  draws.reserve(tokenTransfers_.size());
  for (size_t i : tokenTransfers_) {
    const Transfer& x = tl.transfers()[i];
    const auto [a, b] = layout_.route(x.sender, x.receiver, x.chunk);
    if (a < 0 || b < 0) continue;
    const QPointF pa = layout_.nodes[static_cast<size_t>(a)].pos;
    const QPointF pb = layout_.nodes[static_cast<size_t>(b)].pos;
    const QPointF d = pb - pa;
    const double len = std::hypot(d.x(), d.y());
    const QPointF dir = len > 0 ? d / len : QPointF(1, 0);
    // Tokens leave the sender's rim and arrive at the receiver's, so they never hide a node.
    const double rim = std::min(layout_.nodeRadius, len / 3);
    const double f = Timeline::progress(x, tokenTime);
    const QPointF pos = pa + dir * (rim + f * std::max(0.0, len - 2 * rim));
    draws.push_back({pos, dir, x.provenance, x.sender});
  }
  if (tokens_) tokens_->setTokens(std::move(draws));
}

void TopologyView::setCaption(const QString& title, const QString& detail) {
  if (title == title_ && detail == detail_) return;
  title_ = title;
  detail_ = detail;
  viewport()->update();
}

double TopologyView::rankLabelPx() const {
  double px = 0;
  for (const RankItem* r : rankItems_) {
    const double one = r->labelScreenPx(transform().m11());
    px = px == 0 ? one : std::min(px, one);
  }
  return px;
}

void TopologyView::resizeEvent(QResizeEvent* e) {
  QGraphicsView::resizeEvent(e);
  fit();
}

QFont TopologyView::captionFont(bool title) const {
  QFont f(QStringLiteral("DejaVu Sans"));
  const int h = viewport()->height();
  if (projector_) {
    // Legible from the back of a room: at least 40 px for the caption, 24 for its detail.
    f.setPixelSize(title ? std::clamp(h / 14, kProjectorTitleLeastPx, 72)
                         : std::clamp(h / 28, 24, 36));
  } else {
    f.setPixelSize(title ? std::clamp(h / 20, kTitleLeastPx, 36) : std::clamp(h / 42, 11, 18));
  }
  f.setBold(title);
  return f;
}

int TopologyView::captionBandHeight() const {
  return 12 + QFontMetrics(captionFont(true)).height() + QFontMetrics(captionFont(false)).height() +
         4 + 16;
}

// Fits the drawing into the viewport under the caption band: the view's scene rect is the
// viewport itself, placed so that the content is centred in the space left for it.
void TopologyView::fit() {
  const QRectF c = content_.isEmpty() ? kSceneRect : content_;
  const QSizeF vp = viewport()->size();
  const double band = captionBandHeight();
  const double w = std::max(1.0, vp.width() - 2 * kPadPx);
  const double h = std::max(1.0, vp.height() - band - 2 * kPadPx);
  const double s = std::max(1e-3, std::min(w / c.width(), h / c.height()));
  setTransform(QTransform::fromScale(s, s));
  const double centreY = band + kPadPx + h / 2;  // viewport pixels
  setSceneRect(QRectF(c.center().x() - vp.width() / (2 * s), c.center().y() - centreY / s,
                      vp.width() / s, vp.height() / s));
  centerOn(sceneRect().center());
}

// A caption wider than the view is set smaller, down to the least size its mode allows, then
// ends in an ellipsis rather than a cut word. Fitted again only when something it depends on
// changed: measuring text at every size each frame would cost the frame.
const TopologyView::FittedCaption& TopologyView::fittedCaption() {
  const QSize vp = viewport()->size();
  if (fitted_ && fitted_->title == title_ && fitted_->detail == detail_ &&
      fitted_->viewport == vp && fitted_->projector == projector_) {
    return *fitted_;
  }
  ++captionFits_;
  FittedCaption c{title_, detail_, vp, projector_, captionFont(true), captionFont(false)};
  const int room = std::max(40, vp.width() - 12 - 28);
  const int leastPx = projector_ ? kProjectorTitleLeastPx : kTitleLeastPx;
  while (c.big.pixelSize() > leastPx && QFontMetrics(c.big).horizontalAdvance(title_) > room) {
    c.big.setPixelSize(c.big.pixelSize() - 1);
  }
  const QFontMetrics fb(c.big);
  const QFontMetrics fs(c.small);
  c.titleShown = fb.elidedText(title_, Qt::ElideRight, room);
  c.detailShown = fs.elidedText(detail_, Qt::ElideRight, room);
  c.titleHeight = fb.height();
  c.box =
      QSize(std::max(fb.horizontalAdvance(c.titleShown), fs.horizontalAdvance(c.detailShown)) + 28,
            fb.height() + (c.detailShown.isEmpty() ? 0 : fs.height() + 4) + 16);
  fitted_ = std::move(c);
  return *fitted_;
}

void TopologyView::drawForeground(QPainter* p, const QRectF&) {
  ++frames_;
  if (title_.isEmpty()) return;
  const FittedCaption& c = fittedCaption();
  p->save();
  p->resetTransform();
  const QRect box(QPoint(12, 12), c.box);
  p->setRenderHint(QPainter::Antialiasing);
  p->setPen(QColor(0x1d, 0x22, 0x2a));
  p->setFont(c.big);
  p->drawText(box.adjusted(14, 8, -14, 0), Qt::AlignLeft | Qt::AlignTop, c.titleShown);
  p->setFont(c.small);
  p->setPen(QColor(0x4a, 0x52, 0x5e));
  p->drawText(box.adjusted(14, 8 + c.titleHeight + 4, -14, 0), Qt::AlignLeft | Qt::AlignTop,
              c.detailShown);
  p->restore();
}

}  // namespace arl::ui
