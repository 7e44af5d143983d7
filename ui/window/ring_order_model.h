// The ring order as a list of ranks that can be reordered by dragging (and by moveRows, which
// the drag ends in). Its order is the ring: rank order[0] sends to order[1], ..., the last to
// the first.
#pragma once

#include <QAbstractListModel>
#include <vector>

namespace arl::ui {

class RingOrderModel : public QAbstractListModel {
  Q_OBJECT

 public:
  explicit RingOrderModel(QObject* parent = nullptr);

  // A ring of `nranks`: `order` when it names each of them once, else 0, 1, ..., n-1.
  void setRing(int nranks, const std::vector<int>& order);
  const std::vector<int>& order() const { return order_; }
  // Whether the order is 0, 1, ..., n-1 (the default ring).
  bool isIdentity() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  bool moveRows(const QModelIndex& srcParent, int src, int count, const QModelIndex& dstParent,
                int dst) override;

  Qt::DropActions supportedDropActions() const override;
  Qt::DropActions supportedDragActions() const override;
  QStringList mimeTypes() const override;
  QMimeData* mimeData(const QModelIndexList& indexes) const override;
  bool canDropMimeData(const QMimeData* data, Qt::DropAction action, int row, int column,
                       const QModelIndex& parent) const override;
  bool dropMimeData(const QMimeData* data, Qt::DropAction action, int row, int column,
                    const QModelIndex& parent) override;

 signals:
  // The user reordered the ring.
  void orderEdited(const std::vector<int>& order);

 private:
  std::vector<int> order_;
  int nranks_ = 0;
};

}  // namespace arl::ui
