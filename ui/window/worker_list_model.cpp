#include "window/worker_list_model.h"

#include <QColor>
#include <QFont>
#include <algorithm>

#include "style/palette.h"

namespace arl::ui {

WorkerListModel::WorkerListModel(QObject* parent) : QAbstractTableModel(parent) {}

void WorkerListModel::setWorkers(std::vector<WorkerInfo> workers) {
  beginResetModel();
  workers_ = std::move(workers);
  endResetModel();
}

int WorkerListModel::remoteCount() const {
  return static_cast<int>(std::count_if(workers_.begin(), workers_.end(),
                                        [](const WorkerInfo& w) { return !w.local; }));
}

int WorkerListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(workers_.size());
}

int WorkerListModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant WorkerListModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const WorkerInfo& w = workers_[static_cast<size_t>(index.row())];
  const int n = static_cast<int>(workers_.size());
  const bool spare = w.spare || w.rank < 0;
  if (role == Qt::DecorationRole && index.column() == Rank && !spare) return rankColor(w.rank, n);
  if (role == Qt::ToolTipRole) {
    const QString where = QStringLiteral("%1 on %2, pid %3")
                              .arg(QString::fromStdString(w.name), QString::fromStdString(w.host))
                              .arg(w.pid);
    return spare ? where + tr(": a spare, joined while a session ran; it gets a rank when the "
                              "session ends and takes part from the next run on")
                 : where;
  }
  if (spare && role == Qt::ForegroundRole) return QColor(0x75, 0x75, 0x75);
  if (spare && role == Qt::FontRole) {
    QFont f;
    f.setItalic(true);
    return f;
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case Rank: return spare ? QStringLiteral("spare") : QString::number(w.rank);
    case State: return spare ? tr("spare: joins the next run") : tr("ranked");
    case Name: return QString::fromStdString(w.name);
    case Host: return QString::fromStdString(w.host);
    case Backend: return QString::fromStdString(w.backend);
    case Device: return w.device < 0 ? QStringLiteral("host") : QString::number(w.device);
    case Origin: return w.local ? QStringLiteral("local") : QStringLiteral("remote");
    case Key:
      return w.keyFingerprint.empty() ? QStringLiteral("none (clear)")
                                      : QString::fromStdString(w.keyFingerprint);
    default: return {};
  }
}

QVariant WorkerListModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Rank: return tr("Rank");
    case State: return tr("State");
    case Name: return tr("Name");
    case Host: return tr("Host");
    case Backend: return tr("Backend");
    case Device: return tr("Device");
    case Origin: return tr("Started");
    case Key: return tr("Key fingerprint");
    default: return {};
  }
}

}  // namespace arl::ui
