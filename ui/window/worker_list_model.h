// The session's workers as a table for the setup panel: rank, state, name, host, backend,
// device and whether the window started it or it joined from elsewhere. Refilled whole from
// the coordinator's list each time a worker joins or leaves, and when a session ends. A spare
// (a worker that joined while a session held its ranks) is greyed and in italics: it takes
// part from the next run on.
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "runtime/run_types.h"

namespace arl::ui {

class WorkerListModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Rank, State, Name, Host, Backend, Device, Origin, Key, ColumnCount };

  explicit WorkerListModel(QObject* parent = nullptr);

  void setWorkers(std::vector<WorkerInfo> workers);
  const std::vector<WorkerInfo>& workers() const { return workers_; }
  int remoteCount() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  std::vector<WorkerInfo> workers_;
};

}  // namespace arl::ui
