#include "window/ring_order_model.h"

#include <QMimeData>
#include <algorithm>
#include <numeric>

#include "style/palette.h"

namespace arl::ui {

namespace {

const QString kMime = QStringLiteral("application/x-allreduce-lab-ring-position");

bool isPermutation(const std::vector<int>& order, int n) {
  if (static_cast<int>(order.size()) != n) return false;
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < n; ++i) {
    if (sorted[static_cast<size_t>(i)] != i) return false;
  }
  return true;
}

}  // namespace

RingOrderModel::RingOrderModel(QObject* parent) : QAbstractListModel(parent) {}

void RingOrderModel::setRing(int nranks, const std::vector<int>& order) {
  std::vector<int> next = order;
  if (!isPermutation(next, nranks)) {
    next.resize(static_cast<size_t>(std::max(nranks, 0)));
    std::iota(next.begin(), next.end(), 0);
  }
  if (next == order_ && nranks == nranks_) return;
  beginResetModel();
  nranks_ = nranks;
  order_ = std::move(next);
  endResetModel();
}

bool RingOrderModel::isIdentity() const {
  for (size_t i = 0; i < order_.size(); ++i) {
    if (order_[i] != static_cast<int>(i)) return false;
  }
  return true;
}

int RingOrderModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(order_.size());
}

QVariant RingOrderModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const int row = index.row();
  const int rank = order_[static_cast<size_t>(row)];
  const int next = order_[static_cast<size_t>((row + 1) % rowCount())];
  switch (role) {
    case Qt::DisplayRole: return tr("rank %1  → %2").arg(rank).arg(next);
    case Qt::DecorationRole: return rankColor(rank, nranks_);
    case Qt::ToolTipRole:
      return tr("Rank %1 sends to rank %2; drag to reorder").arg(rank).arg(next);
    case Qt::UserRole: return rank;
    default: return {};
  }
}

Qt::ItemFlags RingOrderModel::flags(const QModelIndex& index) const {
  const Qt::ItemFlags base = QAbstractListModel::flags(index);
  if (!index.isValid()) return base | Qt::ItemIsDropEnabled;
  return base | Qt::ItemIsDragEnabled;
}

bool RingOrderModel::moveRows(const QModelIndex& srcParent, int src, int count,
                              const QModelIndex& dstParent, int dst) {
  const int n = rowCount();
  if (srcParent.isValid() || dstParent.isValid() || count < 1 || src < 0 || src + count > n ||
      dst < 0 || dst > n || (dst >= src && dst <= src + count)) {
    return false;
  }
  if (!beginMoveRows(srcParent, src, src + count - 1, dstParent, dst)) return false;
  const auto first = order_.begin() + src, last = first + count;
  if (dst < src) {
    std::rotate(order_.begin() + dst, first, last);
  } else {
    std::rotate(first, last, order_.begin() + dst);
  }
  endMoveRows();
  // Every row's "→ next" text may have changed.
  emit dataChanged(index(0), index(n - 1), {Qt::DisplayRole, Qt::ToolTipRole});
  emit orderEdited(order_);
  return true;
}

Qt::DropActions RingOrderModel::supportedDropActions() const { return Qt::MoveAction; }
Qt::DropActions RingOrderModel::supportedDragActions() const { return Qt::MoveAction; }
QStringList RingOrderModel::mimeTypes() const { return {kMime}; }

QMimeData* RingOrderModel::mimeData(const QModelIndexList& indexes) const {
  if (indexes.isEmpty()) return nullptr;
  auto* m = new QMimeData;
  m->setData(kMime, QByteArray::number(indexes.front().row()));
  return m;
}

bool RingOrderModel::canDropMimeData(const QMimeData* data, Qt::DropAction action, int, int,
                                     const QModelIndex&) const {
  return data && action == Qt::MoveAction && data->hasFormat(kMime);
}

// Moves the dragged rank to the drop position. It returns false so that the view does not
// remove the source row afterwards: the move is already complete.
bool RingOrderModel::dropMimeData(const QMimeData* data, Qt::DropAction action, int row, int,
                                  const QModelIndex& parent) {
  if (!canDropMimeData(data, action, row, 0, parent)) return false;
  bool ok = false;
  const int src = data->data(kMime).toInt(&ok);
  if (!ok || src < 0 || src >= rowCount()) return false;
  int dst = row < 0 ? (parent.isValid() ? parent.row() : rowCount()) : row;
  dst = std::clamp(dst, 0, rowCount());
  moveRows({}, src, 1, {}, dst);
  return false;
}

}  // namespace arl::ui
