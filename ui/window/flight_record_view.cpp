#include "window/flight_record_view.h"

#include <QBrush>
#include <QColor>
#include <QDialogButtonBox>
#include <QFont>
#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QVBoxLayout>

namespace arl::ui {

namespace {

QString rankList(const std::vector<int>& ranks) {
  QStringList s;
  for (int r : ranks) s << QString::number(r);
  return s.join(QStringLiteral(", "));
}

}  // namespace

FlightRecordModel::FlightRecordModel(QObject* parent) : QAbstractTableModel(parent) {}

void FlightRecordModel::setAnalysis(FlightAnalysis a) {
  beginResetModel();
  a_ = std::move(a);
  endResetModel();
}

int FlightRecordModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(a_.ranks.size());
}

int FlightRecordModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant FlightRecordModel::text(const FlightRankLine& l, int column) const {
  const CollectiveRecord* r = l.record ? &*l.record : nullptr;
  switch (column) {
    case Rank: return l.rank;
    case State: return r ? QString::fromUtf8(toString(r->state)) : tr("no record");
    case LastStep:
      if (!r) return QString();
      return r->lastStep < 0 ? tr("none") : QString::number(r->lastStep);
    case WaitedOn: return r ? rankList(ranksOf(r->waitedOn)) : QString();
    case Reached:
      if (!a_.found) return QStringLiteral("\u2014");  // no failing step
      return l.reachedStep ? tr("yes") : tr("never reached step %1").arg(a_.failingStep);
    case Note: return QString::fromStdString(l.note);
    default: return {};
  }
}

QVariant FlightRecordModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const FlightRankLine& l = a_.ranks[static_cast<size_t>(index.row())];
  if (role == Qt::DisplayRole) return text(l, index.column());
  if (role == Qt::ForegroundRole && a_.found && !l.reachedStep) {
    return QBrush(QColor(0xc6, 0x28, 0x28));
  }
  if (role == Qt::FontRole && a_.found && !l.reachedStep) {
    QFont f;
    f.setBold(true);
    return f;
  }
  return {};
}

QVariant FlightRecordModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Rank: return tr("Rank");
    case State: return tr("State");
    case LastStep: return tr("Last step done");
    case WaitedOn: return tr("Waited on");
    case Reached: return tr("Reached the failing step");
    case Note: return tr("Note");
    default: return {};
  }
}

QString flightHeadline(const FlightAnalysis& a) {
  if (!a.found) return QObject::tr("No rank recorded an unfinished collective of this run");
  QString s = QObject::tr("Failed in %1 at step %2")
                  .arg(QString::fromStdString(placeText(a.place)))
                  .arg(a.failingStep);
  if (a.nsteps > 0) s += QObject::tr(" of %1 (numbered from 0)").arg(a.nsteps);
  return s;
}

QString flightNeverReachedText(const FlightAnalysis& a) {
  if (!a.found) return {};
  if (a.neverReached.empty()) return QObject::tr("Every rank reached step %1").arg(a.failingStep);
  return QObject::tr("Ranks that never reached step %1: %2")
      .arg(a.failingStep)
      .arg(rankList(a.neverReached));
}

FlightRecordDialog::FlightRecordDialog(QWidget* parent)
    : QDialog(parent),
      headline_(new QLabel(this)),
      neverReached_(new QLabel(this)),
      model_(new FlightRecordModel(this)) {
  setWindowTitle(tr("Flight record"));
  QFont big = headline_->font();
  big.setPointSizeF(big.pointSizeF() * 1.25);
  big.setBold(true);
  headline_->setFont(big);
  neverReached_->setFont(big);
  neverReached_->setStyleSheet(QStringLiteral("color: #c62828;"));
  auto* explain = new QLabel(
      tr("Each worker keeps its last %1 collectives; the surviving ones handed theirs over when "
         "the run failed. A rank that never reached the step is the one the others waited on.")
          .arg(kFlightRecords),
      this);
  explain->setWordWrap(true);
  auto* table = new QTableView(this);
  table->setModel(model_);
  table->verticalHeader()->hide();
  table->horizontalHeader()->setStretchLastSection(true);
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* col = new QVBoxLayout(this);
  col->addWidget(headline_);
  col->addWidget(neverReached_);
  col->addWidget(explain);
  col->addWidget(table, 1);
  col->addWidget(buttons);
  resize(820, 360);
}

void FlightRecordDialog::setFlightRecord(const std::vector<RankFlight>& flight, uint64_t runId) {
  FlightAnalysis a = analyzeFlight(flight, runId);
  headline_->setText(flightHeadline(a));
  neverReached_->setText(flightNeverReachedText(a));
  neverReached_->setVisible(a.found);
  model_->setAnalysis(std::move(a));
  if (auto* table = findChild<QTableView*>()) table->resizeColumnsToContents();
}

}  // namespace arl::ui
