#include "window/setup_panel.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QSpinBox>
#include <QStyle>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>

#include "backend/registry.h"
#include "base/errors.h"
#include "base/limits.h"
#include "exec/collective_library.h"
#include "schedule/generators.h"
#include "window/ring_order_model.h"
#include "window/setup_fields.h"
#include "window/worker_list_model.h"

namespace arl::ui {

namespace {

// Outlines every input of a field that core would refuse.
const char* kInvalidStyle =
    "QSpinBox, QDoubleSpinBox, QComboBox, QLineEdit { border: 2px solid #c62828; "
    "border-radius: 3px; padding: 1px 3px; }";

template <class Enum, size_t N>
QComboBox* enumBox(const Enum (&values)[N], QWidget* parent) {
  auto* box = new QComboBox(parent);
  for (Enum v : values)
    box->addItem(QString::fromStdString(std::string(toString(v))), static_cast<int>(v));
  return box;
}

template <class Enum>
Enum enumOf(const QComboBox* box) {
  return static_cast<Enum>(box->currentData().toInt());
}

void selectData(QComboBox* box, int value) {
  const int i = box->findData(value);
  if (i >= 0) box->setCurrentIndex(i);
}

QDoubleSpinBox* rateBox(QWidget* parent, const QString& zeroText) {
  auto* b = new QDoubleSpinBox(parent);
  b->setRange(0, 1e6);
  b->setDecimals(0);
  b->setSingleStep(50);
  b->setSuffix(QStringLiteral(" MB/s"));
  if (!zeroText.isEmpty()) b->setSpecialValueText(zeroText);
  return b;
}

QGroupBox* group(const QString& title, QWidget* parent) {
  auto* g = new QGroupBox(title, parent);
  QFont f = g->font();
  f.setBold(true);
  g->setFont(f);
  return g;
}

// Group boxes make their children bold through the font; the fields inside stay regular.
QFormLayout* formIn(QGroupBox* g) {
  auto* inner = new QWidget(g);
  QFont f = inner->font();
  f.setBold(false);
  inner->setFont(f);
  auto* outer = new QVBoxLayout(g);
  outer->setContentsMargins(8, 4, 8, 8);
  outer->addWidget(inner);
  auto* form = new QFormLayout(inner);
  form->setContentsMargins(0, 0, 0, 0);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  form->setRowWrapPolicy(QFormLayout::DontWrapRows);
  return form;
}

}  // namespace

SetupPanel::SetupPanel(QWidget* parent) : QWidget(parent) {
  auto* col = new QVBoxLayout(this);
  col->setContentsMargins(6, 6, 6, 6);
  col->setSpacing(8);
  runRow_ = new QWidget(this);
  col->addWidget(runRow_);
  col->addWidget(buildWorkers());
  col->addWidget(buildCollective());
  col->addWidget(buildSizes());
  col->addWidget(buildRing());
  col->addWidget(buildShaping());
  col->addStretch(1);
  setSetup(SessionSetup{});
}

void SetupPanel::addField(QFormLayout* form, SetupField f, const QString& label, QWidget* field,
                          const QString& tip) {
  field->setToolTip(tip);
  auto* l = new QLabel(label, field->parentWidget());
  l->setToolTip(tip);
  form->addRow(l, field);
  auto* problem = new QLabel(field->parentWidget());
  problem->setWordWrap(true);
  problem->setStyleSheet(QStringLiteral("color: #c62828; font-weight: 600;"));
  problem->setObjectName(QStringLiteral("problem"));
  problem->hide();
  form->addRow(problem);
  fieldWidgets_[f] = field;
  problemLabels_[f] = problem;
}

QWidget* SetupPanel::buildWorkers() {
  auto* g = group(tr("Workers"), this);
  QFormLayout* form = formIn(g);
  QWidget* in = form->parentWidget();
  local_ = new QSpinBox(in);
  local_->setRange(0, kMaxRanks);
  remote_ = new QSpinBox(in);
  remote_->setRange(0, kMaxRanks);
  listen_ = new QLineEdit(in);
  listen_->setPlaceholderText(tr("this machine only (tcp://127.0.0.1, free port)"));
  backend_ = new QComboBox(in);
  // Every backend the lab knows; one this build lacks is shown, disabled, with the reason.
  for (const BackendInfo& b : backends()) {
    const QString name = QString::fromStdString(std::string(b.name));
    backend_->addItem(name, name);
    const int i = backend_->count() - 1;
    const auto why = backendUnavailable(b.name);
    backend_->setItemData(i, why ? QVariant(0) : QVariant(), Qt::UserRole - 1);
    backend_->setItemData(i, QString::fromStdString(why ? *why : std::string(b.summary)),
                          Qt::ToolTipRole);
  }
  devices_ = new QLineEdit(in);
  addField(form, SetupField::LocalWorkers, tr("Local workers"), local_,
           tr("allreduce-worker processes this window starts on this machine"));
  addField(form, SetupField::Backend, tr("Backend"), backend_,
           tr("Where the buffers live and who reduces them: cpu (host memory), cuda (the lab's "
              "kernels on a GPU), nccl (NCCL's own collectives, the reference)"));
  addField(form, SetupField::Devices, tr("GPUs"), devices_,
           tr("The local workers' GPUs: one index for all, or one per worker (0,1,2,3)"));
  addField(form, SetupField::RemoteWorkers, tr("Remote workers"), remote_,
           tr("Workers started by hand elsewhere that a run waits for"));
  form->addRow(tr("Listen on"), listen_);
  listen_->setToolTip(tr("Control endpoint, e.g. tcp://0.0.0.0:5555 to accept other machines"));
  auto* joinRow = new QWidget(in);
  auto* jl = new QHBoxLayout(joinRow);
  jl->setContentsMargins(0, 0, 0, 0);
  joinCommand_ = new QLineEdit(joinRow);
  joinCommand_->setReadOnly(true);
  joinCommand_->setToolTip(tr("Run this on another machine (or here) to add a worker"));
  QFont mono(QStringLiteral("monospace"));
  mono.setStyleHint(QFont::Monospace);
  joinCommand_->setFont(mono);
  auto* copy = new QToolButton(joinRow);
  copy->setText(tr("Copy"));
  copy->setToolTip(tr("Copy the command that joins a worker"));
  connect(copy, &QToolButton::clicked, this,
          [this] { QApplication::clipboard()->setText(joinCommand_->text()); });
  jl->addWidget(joinCommand_, 1);
  jl->addWidget(copy);
  form->addRow(tr("Join with"), joinRow);
  workers_ = new WorkerListModel(this);
  workerTable_ = new QTableView(in);
  workerTable_->setModel(workers_);
  workerTable_->verticalHeader()->hide();
  workerTable_->horizontalHeader()->setStretchLastSection(true);
  workerTable_->setSelectionMode(QAbstractItemView::NoSelection);
  form->addRow(workerTable_);
  for (QSpinBox* s : {local_, remote_})
    connect(s, &QSpinBox::valueChanged, this, &SetupPanel::changed);
  connect(listen_, &QLineEdit::editingFinished, this, &SetupPanel::changed);
  connect(devices_, &QLineEdit::editingFinished, this, &SetupPanel::changed);
  connect(backend_, &QComboBox::currentIndexChanged, this, [this] {
    updateDependentFields();
    emit changed();
  });
  lockedWhileRunning_ = {local_, remote_, listen_, backend_, devices_};
  return g;
}

QWidget* SetupPanel::buildCollective() {
  auto* g = group(tr("Collective"), this);
  QFormLayout* form = formIn(g);
  QWidget* in = form->parentWidget();
  algorithm_ = new QComboBox(in);
  for (const std::string& a : algorithmNames())
    algorithm_->addItem(QString::fromStdString(a), QString::fromStdString(a));
  for (const LibraryAlgorithm& a : libraryAlgorithms()) {
    const QString name = QString::fromStdString(std::string(a.name));
    algorithm_->addItem(name, name);
  }
  algorithm_->addItem(tr("all (compare)"), QStringLiteral("all"));
  collective_ = enumBox(kAllCollectives, in);
  dtype_ = enumBox(kAllDataTypes, in);
  op_ = enumBox(kAllRedOps, in);
  root_ = new QSpinBox(in);
  root_->setRange(0, kMaxRanks - 1);
  addField(form, SetupField::Algorithm, tr("Algorithm"), algorithm_,
           tr("How the ranks exchange chunks; 'all' compares every algorithm of the collective"));
  addField(form, SetupField::Collective, tr("Collective"), collective_,
           tr("What the ranks compute together"));
  form->addRow(tr("Data type"), dtype_);
  form->addRow(tr("Reduction"), op_);
  addField(form, SetupField::Root, tr("Root"), root_,
           tr("The rank that reduce gathers to and broadcast sends from"));
  for (QComboBox* b : {algorithm_, collective_, dtype_, op_}) {
    connect(b, &QComboBox::currentIndexChanged, this, [this] {
      updateDependentFields();
      emit changed();
    });
  }
  connect(root_, &QSpinBox::valueChanged, this, &SetupPanel::changed);
  return g;
}

QWidget* SetupPanel::buildSizes() {
  auto* g = group(tr("Sizes and pipeline"), this);
  QFormLayout* form = formIn(g);
  QWidget* in = form->parentWidget();
  size_ = new RangeField(1024, uint64_t{1} << 30, in);
  slice_ = new RangeField(1024, uint64_t{64} << 20, in);
  inflight_ = new RangeField(1, kMaxInflight, in);
  iterations_ = new QSpinBox(in);
  iterations_->setRange(1, 100000);
  warmup_ = new QSpinBox(in);
  warmup_->setRange(0, 100000);
  ranksPerHost_ = new QSpinBox(in);
  ranksPerHost_->setRange(0, kMaxRanks);
  ranksPerHost_->setSpecialValueText(tr("from host names"));
  addField(form, SetupField::Size, tr("Message size"), size_,
           tr("Bytes of the collective (nccl-tests' size), e.g. 64K, 16M; sweep to chart bandwidth "
              "against size"));
  addField(form, SetupField::Slice, tr("Slice size"), slice_,
           tr("The pipeline unit: the most bytes one message carries"));
  addField(form, SetupField::Inflight, tr("Slices in flight"), inflight_,
           tr("Slices a rank may have in flight at once"));
  addField(form, SetupField::Iterations, tr("Iterations"), iterations_,
           tr("Timed iterations per run"));
  addField(form, SetupField::Warmup, tr("Warm-up"), warmup_, tr("Untimed iterations before them"));
  addField(form, SetupField::RanksPerHost, tr("Ranks per host"), ranksPerHost_,
           tr("How hierarchical groups the ranks into hosts"));
  for (RangeField* r : {size_, slice_, inflight_})
    connect(r, &RangeField::edited, this, &SetupPanel::changed);
  for (QSpinBox* s : {iterations_, warmup_, ranksPerHost_}) {
    connect(s, &QSpinBox::valueChanged, this, &SetupPanel::changed);
  }
  return g;
}

QWidget* SetupPanel::buildRing() {
  auto* g = group(tr("Ring order"), this);
  QFormLayout* form = formIn(g);
  QWidget* in = form->parentWidget();
  ringText_ = new QLineEdit(in);
  ringText_->setPlaceholderText(tr("0 1 2 … n−1 (type e.g. 0 2 1 3)"));
  addField(form, SetupField::RingOrder, tr("Order"), ringText_,
           tr("The ring as ranks in sending order; or drag the ranks below"));
  ring_ = new RingOrderModel(this);
  ringList_ = new QListView(in);
  ringList_->setModel(ring_);
  ringList_->setDragDropMode(QAbstractItemView::InternalMove);
  ringList_->setDefaultDropAction(Qt::MoveAction);
  ringList_->setDragEnabled(true);
  ringList_->setAcceptDrops(true);
  ringList_->setDropIndicatorShown(true);
  ringList_->setMinimumHeight(90);
  ringList_->setMaximumHeight(150);
  ringList_->setToolTip(tr("Drag a rank to change its place in the ring"));
  form->addRow(ringList_);
  connect(ringText_, &QLineEdit::textEdited, this, &SetupPanel::ringTextEdited);
  connect(ring_, &RingOrderModel::orderEdited, this, [this](const std::vector<int>& order) {
    ringText_->setText(ring_->isIdentity() ? QString()
                                           : QString::fromStdString(formatRingOrder(order)));
    emit changed();
  });
  return g;
}

QWidget* SetupPanel::buildShaping() {
  auto* g = group(tr("Link shaping"), this);
  QFormLayout* form = formIn(g);
  QWidget* in = form->parentWidget();
  portRate_ = rateBox(in, tr("not shaped"));
  latency_ = new QDoubleSpinBox(in);
  latency_->setRange(0, 1e6);
  latency_->setDecimals(0);
  latency_->setSingleStep(10);
  latency_->setSuffix(QStringLiteral(" µs"));
  latency_->setSpecialValueText(tr("none"));
  addField(form, SetupField::PortRate, tr("Every port"), portRate_,
           tr("Every rank's port rate, each direction (the model predicts under it too)"));
  addField(form, SetupField::Latency, tr("Added latency"), latency_, tr("Added to every message"));
  auto row = [in](std::initializer_list<QWidget*> ws) {
    auto* w = new QWidget(in);
    auto* l = new QHBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    for (QWidget* x : ws) {
      x->setParent(w);
      l->addWidget(x);
    }
    l->addStretch(1);
    return w;
  };
  slowRankOn_ = new QCheckBox(tr("rank"), in);
  slowRank_ = new QSpinBox(in);
  slowRankRate_ = rateBox(in, {});
  addField(form, SetupField::SlowRank, tr("Slow rank"),
           row({slowRankOn_, slowRank_, new QLabel(tr("at")), slowRankRate_}),
           tr("One rank whose port is slower than the others"));
  slowLinkOn_ = new QCheckBox(tr("link"), in);
  slowFrom_ = new QSpinBox(in);
  slowTo_ = new QSpinBox(in);
  slowLinkRate_ = rateBox(in, {});
  addField(form, SetupField::SlowLink, tr("Slow link"),
           row({slowLinkOn_, slowFrom_, new QLabel(QStringLiteral("→")), slowTo_,
                new QLabel(tr("at")), slowLinkRate_}),
           tr("One directed link slower than its ports"));
  for (QDoubleSpinBox* b : {portRate_, latency_, slowRankRate_, slowLinkRate_}) {
    connect(b, &QDoubleSpinBox::valueChanged, this, &SetupPanel::changed);
  }
  for (QSpinBox* b : {slowRank_, slowFrom_, slowTo_})
    connect(b, &QSpinBox::valueChanged, this, &SetupPanel::changed);
  for (QCheckBox* c : {slowRankOn_, slowLinkOn_}) {
    connect(c, &QCheckBox::toggled, this, [this] {
      updateDependentFields();
      emit changed();
    });
  }
  return g;
}

void SetupPanel::setRunActions(QAction* run, QAction* stop) {
  auto* l = new QHBoxLayout(runRow_);
  l->setContentsMargins(0, 0, 0, 0);
  for (QAction* a : {run, stop}) {
    auto* b = new QToolButton(runRow_);
    b->setDefaultAction(a);
    b->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    b->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    b->setMinimumHeight(36);
    QFont f = b->font();
    f.setPointSizeF(f.pointSizeF() * 1.15);
    f.setBold(true);
    b->setFont(f);
    l->addWidget(b);
  }
}

void SetupPanel::ringTextEdited() {
  std::vector<SetupProblem> ignored;
  const SessionSetup s = setup(&ignored);
  ring_->setRing(s.nranks(), s.ringOrder);
  emit changed();
}

void SetupPanel::updateDependentFields() {
  const auto c = enumOf<Collective>(collective_);
  const bool reduces = collectiveReduces(c);
  op_->setEnabled(reduces);
  op_->setToolTip(reduces ? tr("The reduction the collective applies")
                          : tr("%1 does not reduce").arg(collective_->currentText()));
  const bool rooted = c == Collective::Reduce || c == Collective::Broadcast;
  root_->setEnabled(rooted);
  // Algorithms that do not implement the collective, or cannot run on the backend, cannot be
  // chosen: the lab's own need a backend with its data planes, NCCL's a device backend.
  const std::string backend = backend_->currentData().toString().toStdString();
  const BackendInfo* info = findBackend(backend);
  const bool onDevice = info != nullptr && info->memory == MemoryKind::Device;
  for (int i = 0; i < algorithm_->count(); ++i) {
    const std::string a = algorithm_->itemData(i).toString().toStdString();
    const LibraryAlgorithm* lib = findLibraryAlgorithm(a);
    QString why;
    if (a == "all") {
      why.clear();
    } else if (lib != nullptr ? !lib->supports(c) : !algorithmSupports(a, c)) {
      why = tr("does not implement %1").arg(collective_->currentText());
    } else if (lib != nullptr && !onDevice) {
      why = tr("NCCL's own collective: needs the cuda or nccl backend");
    } else if (lib == nullptr && backend == "nccl") {
      why = tr("the nccl backend runs NCCL's own collectives only");
    }
    algorithm_->setItemData(i, why.isEmpty() ? QVariant() : QVariant(0), Qt::UserRole - 1);
    algorithm_->setItemData(i, why.isEmpty() ? QVariant() : QVariant(why), Qt::ToolTipRole);
  }
  devices_->setEnabled(onDevice);
  devices_->setPlaceholderText(backend == "nccl"   ? tr("default: 0, 1, ... (one per worker)")
                               : backend == "cuda" ? tr("default: 0")
                                                   : tr("no GPU with this backend"));
  const int n = std::max(1, local_->value() + remote_->value());
  for (QSpinBox* s : {root_, slowRank_, slowFrom_, slowTo_}) s->setMaximum(n - 1);
  slowRank_->setEnabled(slowRankOn_->isChecked());
  slowRankRate_->setEnabled(slowRankOn_->isChecked());
  for (QWidget* w : std::initializer_list<QWidget*>{slowFrom_, slowTo_, slowLinkRate_}) {
    w->setEnabled(slowLinkOn_->isChecked());
  }
  ringList_->setEnabled(n > 1);
}

SessionSetup SetupPanel::setup(std::vector<SetupProblem>* problems) const {
  SessionSetup s;
  s.localWorkers = local_->value();
  s.remoteWorkers = remote_->value();
  s.listen = listen_->text().trimmed().toStdString();
  s.backend = backend_->currentData().toString().toStdString();
  try {
    s.devices = parseDevices(devices_->text().toStdString());
  } catch (const ConfigError& e) {
    if (problems) problems->push_back({SetupField::Devices, e.what()});
  }
  s.algorithm = algorithm_->currentData().toString().toStdString();
  s.collective = enumOf<Collective>(collective_);
  s.dtype = enumOf<DataType>(dtype_);
  s.op = enumOf<RedOp>(op_);
  s.root = root_->value();
  auto readRange = [&](RangeField* f, SetupField which, SweepRange& out) {
    QString why;
    if (auto r = f->range(&why)) {
      out = *r;
    } else if (problems) {
      problems->push_back({which, why.toStdString()});
    }
  };
  readRange(size_, SetupField::Size, s.size);
  readRange(slice_, SetupField::Slice, s.slice);
  readRange(inflight_, SetupField::Inflight, s.inflight);
  s.iterations = iterations_->value();
  s.warmup = warmup_->value();
  s.ranksPerHost = ranksPerHost_->value();
  try {
    s.ringOrder = parseRingOrder(ringText_->text().toStdString());
  } catch (const ConfigError& e) {
    if (problems) problems->push_back({SetupField::RingOrder, e.what()});
  }
  s.portMBps = portRate_->value();
  s.latencyUs = latency_->value();
  s.slowRank = slowRankOn_->isChecked() ? slowRank_->value() : -1;
  s.slowRankMBps = slowRankRate_->value();
  s.slowLinkFrom = slowLinkOn_->isChecked() ? slowFrom_->value() : -1;
  s.slowLinkTo = slowLinkOn_->isChecked() ? slowTo_->value() : -1;
  s.slowLinkMBps = slowLinkRate_->value();
  return s;
}

void SetupPanel::setSetup(const SessionSetup& s) {
  const QSignalBlocker block(this);
  local_->setValue(s.localWorkers);
  remote_->setValue(s.remoteWorkers);
  listen_->setText(QString::fromStdString(s.listen));
  const int bi = backend_->findData(QString::fromStdString(s.backend));
  if (bi >= 0) backend_->setCurrentIndex(bi);
  QStringList devices;
  for (int d : s.devices) devices << QString::number(d);
  devices_->setText(devices.join(QLatin1Char(',')));
  const int ai = algorithm_->findData(QString::fromStdString(s.algorithm));
  if (ai >= 0) algorithm_->setCurrentIndex(ai);
  selectData(collective_, static_cast<int>(s.collective));
  selectData(dtype_, static_cast<int>(s.dtype));
  selectData(op_, static_cast<int>(s.op));
  updateDependentFields();
  root_->setValue(s.root);
  size_->setRange(s.size);
  slice_->setRange(s.slice);
  inflight_->setRange(s.inflight);
  iterations_->setValue(s.iterations);
  warmup_->setValue(s.warmup);
  ranksPerHost_->setValue(s.ranksPerHost);
  ringText_->setText(QString::fromStdString(formatRingOrder(s.ringOrder)));
  ring_->setRing(s.nranks(), s.ringOrder);
  portRate_->setValue(s.portMBps);
  latency_->setValue(s.latencyUs);
  slowRankOn_->setChecked(s.slowRank >= 0);
  slowRank_->setValue(std::max(s.slowRank, 0));
  slowRankRate_->setValue(s.slowRankMBps);
  slowLinkOn_->setChecked(s.slowLinkFrom >= 0);
  slowFrom_->setValue(std::max(s.slowLinkFrom, 0));
  slowTo_->setValue(std::max(s.slowLinkTo, 0));
  slowLinkRate_->setValue(s.slowLinkMBps);
  updateDependentFields();
}

void SetupPanel::showProblems(const std::vector<SetupProblem>& problems) {
  for (auto& [field, label] : problemLabels_) {
    const auto it = std::find_if(problems.begin(), problems.end(),
                                 [f = field](const SetupProblem& p) { return p.field == f; });
    QWidget* w = fieldWidgets_[field];
    if (it == problems.end()) {
      label->hide();
      label->clear();
      w->setStyleSheet({});
      continue;
    }
    label->setText(QString::fromStdString(it->rule));
    label->show();
    w->setStyleSheet(QString::fromLatin1(kInvalidStyle));
  }
  // The ring list follows the world's size.
  std::vector<SetupProblem> ignored;
  const SessionSetup s = setup(&ignored);
  updateDependentFields();
  ring_->setRing(s.nranks(), s.ringOrder);
}

QString SetupPanel::problemText(SetupField f) const {
  const auto it = problemLabels_.find(f);
  return it == problemLabels_.end() || it->second->isHidden() ? QString() : it->second->text();
}

void SetupPanel::setWorkers(const std::vector<WorkerInfo>& workers, const QString& joinCommand) {
  workers_->setWorkers(workers);
  joinCommand_->setText(joinCommand);
  joinCommand_->setCursorPosition(0);
  workerTable_->resizeColumnsToContents();
  // Up to six workers show without scrolling.
  const int rows = std::clamp(static_cast<int>(workers.size()), 2, 6);
  const int h = workerTable_->horizontalHeader()->height() +
                rows * workerTable_->verticalHeader()->defaultSectionSize() + 4;
  workerTable_->setFixedHeight(h);
}

void SetupPanel::setRunning(bool running) {
  for (QWidget* w : lockedWhileRunning_) w->setEnabled(!running);
}

}  // namespace arl::ui
