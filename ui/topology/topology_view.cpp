#include "topology/topology_view.h"

#include <QPainter>
#include <QResizeEvent>
#include <cmath>

#include "topology/scene_items.h"

namespace arl::ui {

namespace {
// Fixed frame and strip sizes keep the same layout at the same scale from run to run.
const QRectF kSceneRect(-560, -470, 1120, 940);
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
  style_ = std::make_unique<SceneStyle>(model.nranks());
  strips_.reset(model.nranks(), model.cells(), startsWithOwnInput(model.run().request.collective));
  stripsApplied_ = SIZE_MAX;
  for (const LayoutBox& b : layout_.boxes) scene_->addItem(new BoxItem(b, *style_));
  for (const LayoutLink& l : layout_.links) {
    scene_->addItem(new LinkItem(layout_, l, *style_));
    ++linkItems_;
  }
  for (const LayoutNode& n : layout_.nodes) {
    auto* item = new RankItem(layout_, n, *style_, strips_);
    scene_->addItem(item);
    rankItems_.push_back(item);
  }
  const double tokenRadius = std::clamp(layout_.nodeRadius * 0.45, 7.0, 20.0);
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

void TopologyView::resizeEvent(QResizeEvent* e) {
  QGraphicsView::resizeEvent(e);
  fit();
}

void TopologyView::fit() { fitInView(kSceneRect, Qt::KeepAspectRatio); }

void TopologyView::drawForeground(QPainter* p, const QRectF&) {
  ++frames_;
  if (title_.isEmpty()) return;
  p->save();
  p->resetTransform();
  QFont big(QStringLiteral("DejaVu Sans"));
  big.setPixelSize(std::clamp(viewport()->height() / 22, 16, 34));
  big.setBold(true);
  QFont small(QStringLiteral("DejaVu Sans"));
  small.setPixelSize(std::clamp(viewport()->height() / 42, 11, 18));
  const QFontMetrics fb(big);
  const QFontMetrics fs(small);
  const int w = std::max(fb.horizontalAdvance(title_), fs.horizontalAdvance(detail_)) + 28;
  const int h = fb.height() + (detail_.isEmpty() ? 0 : fs.height() + 4) + 16;
  const QRect box(12, 12, w, h);
  p->setRenderHint(QPainter::Antialiasing);
  p->setPen(Qt::NoPen);
  p->setBrush(QColor(255, 255, 255, 225));
  p->drawRoundedRect(box, 10, 10);
  p->setPen(QColor(0x1d, 0x22, 0x2a));
  p->setFont(big);
  p->drawText(box.adjusted(14, 8, -14, 0), Qt::AlignLeft | Qt::AlignTop, title_);
  p->setFont(small);
  p->setPen(QColor(0x4a, 0x52, 0x5e));
  p->drawText(box.adjusted(14, 8 + fb.height() + 4, -14, 0), Qt::AlignLeft | Qt::AlignTop, detail_);
  p->restore();
}

}  // namespace arl::ui
