#include "window/setup_panel.h"

#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QSpinBox>
#include <QStringList>
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
#include "window/setup_section.h"
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

}  // namespace

SetupPanel::SetupPanel(QWidget* parent) : QWidget(parent) {
  auto* col = new QVBoxLayout(this);
  col->setContentsMargins(4, 2, 4, 4);
  col->setSpacing(2);
  buildWorkers();
  buildCollective();
  buildSizes();
  buildRing();
  buildShaping();
  for (SetupSection* sec : sections_) col->addWidget(sec);
  col->addStretch(1);
  alignLabels();
  connect(this, &SetupPanel::changed, this, &SetupPanel::updateSummaries);
  setSetup(SessionSetup{});
}

// One label column down the whole panel, so that the fields of every section line up.
void SetupPanel::alignLabels() {
  std::vector<QWidget*> labels;
  int width = 0;
  for (SetupSection* sec : sections_) {
    QFormLayout* form = sec->form();
    for (int r = 0; r < form->rowCount(); ++r) {
      QLayoutItem* item = form->itemAt(r, QFormLayout::LabelRole);
      if (item == nullptr || item->widget() == nullptr) continue;
      labels.push_back(item->widget());
      width = std::max(width, item->widget()->sizeHint().width());
    }
  }
  for (QWidget* l : labels) l->setMinimumWidth(width);
}

SetupSection* SetupPanel::addSection(const QString& key, const QString& title, bool collapsible) {
  auto* sec = new SetupSection(key, title, collapsible, this);
  sections_.push_back(sec);
  return sec;
}

void SetupPanel::addField(SetupSection* sec, SetupField f, const QString& label, QWidget* field,
                          const QString& tip) {
  QFormLayout* form = sec->form();
  field->setToolTip(tip);
  auto* l = new QLabel(label, sec->body());
  l->setToolTip(tip);
  form->addRow(l, field);
  auto* problem = new QLabel(sec->body());
  problem->setWordWrap(true);
  problem->setStyleSheet(QStringLiteral("color: #c62828; font-weight: 600;"));
  problem->setObjectName(QStringLiteral("problem"));
  form->addRow(problem);
  form->setRowVisible(problem, false);
  fieldWidgets_[f] = field;
  problemLabels_[f] = problem;
  fieldNames_[f] = label;
  fieldSections_[f] = sec;
}

// The workers a run needs most (how many, the backend), then, folded, those started by hand
// elsewhere with the endpoint and command that join them, the GPUs, and who has joined.
void SetupPanel::buildWorkers() {
  SetupSection* main = addSection(QStringLiteral("workers"), tr("Workers"), false);
  QWidget* in = main->body();
  local_ = new QSpinBox(in);
  local_->setRange(0, kMaxRanks);
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
  addField(main, SetupField::LocalWorkers, tr("Local workers"), local_,
           tr("allreduce-worker processes this window starts on this machine"));
  addField(main, SetupField::Backend, tr("Backend"), backend_,
           tr("Where the buffers live and who reduces them: cpu (host memory), cuda (the lab's "
              "kernels on a GPU), nccl (NCCL's own collectives, the reference)"));

  remoteSection_ = addSection(QStringLiteral("remote"), tr("Remote workers, GPUs"), true);
  in = remoteSection_->body();
  remote_ = new QSpinBox(in);
  remote_->setRange(0, kMaxRanks);
  listen_ = new QLineEdit(in);
  listen_->setPlaceholderText(tr("this machine only (tcp://127.0.0.1, free port)"));
  devices_ = new QLineEdit(in);
  addField(remoteSection_, SetupField::RemoteWorkers, tr("Remote workers"), remote_,
           tr("Workers started by hand elsewhere that a run waits for"));
  remoteSection_->form()->addRow(tr("Listen on"), listen_);
  listen_->setToolTip(tr("Control endpoint, e.g. tcp://0.0.0.0:5555 to accept other machines"));
  remoteSection_->form()->addRow(tr("Join with"), buildJoinRow(in));
  control_ = new QLabel(in);
  control_->setWordWrap(true);
  control_->setToolTip(
      tr("Whether the control connection is encrypted and its workers "
         "authenticated (docs/security.md)"));
  remoteSection_->form()->addRow(tr("Control"), control_);
  addField(remoteSection_, SetupField::Devices, tr("GPUs"), devices_,
           tr("The local workers' GPUs: one index for all, or one per worker (0,1,2,3)"));

  presentSection_ = addSection(QStringLiteral("present"), tr("Workers present"), true);
  workers_ = new WorkerListModel(this);
  workerTable_ = new QTableView(presentSection_->body());
  workerTable_->setModel(workers_);
  workerTable_->verticalHeader()->hide();
  workerTable_->horizontalHeader()->setStretchLastSection(true);
  workerTable_->setSelectionMode(QAbstractItemView::NoSelection);
  presentSection_->form()->addRow(workerTable_);
  for (QSpinBox* s : {local_, remote_})
    connect(s, &QSpinBox::valueChanged, this, &SetupPanel::changed);
  connect(listen_, &QLineEdit::editingFinished, this, &SetupPanel::changed);
  connect(devices_, &QLineEdit::editingFinished, this, &SetupPanel::changed);
  connect(backend_, &QComboBox::currentIndexChanged, this, [this] {
    updateDependentFields();
    emit changed();
  });
  lockedWhileRunning_ = {local_, remote_, listen_, backend_, devices_};
}

// The exact command that joins a worker, with Copy.
QWidget* SetupPanel::buildJoinRow(QWidget* parent) {
  auto* joinRow = new QWidget(parent);
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
  return joinRow;
}

void SetupPanel::buildCollective() {
  SetupSection* sec = addSection(QStringLiteral("collective"), tr("Collective"), false);
  QWidget* in = sec->body();
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
  addField(sec, SetupField::Algorithm, tr("Algorithm"), algorithm_,
           tr("How the ranks exchange chunks; 'all' compares every algorithm of the collective"));
  addField(sec, SetupField::Collective, tr("Collective"), collective_,
           tr("What the ranks compute together"));
  // The data type and the reduction side by side: one row for two short choices.
  auto* data = new QWidget(in);
  auto* dl = new QHBoxLayout(data);
  dl->setContentsMargins(0, 0, 0, 0);
  dtype_->setParent(data);
  op_->setParent(data);
  dtype_->setToolTip(tr("The elements' type"));
  dl->addWidget(dtype_, 1);
  dl->addWidget(op_, 1);
  auto* dataLabel = new QLabel(tr("Type, reduction"), in);
  dataLabel->setToolTip(tr("The elements' type and the reduction the collective applies"));
  sec->form()->addRow(dataLabel, data);
  addField(sec, SetupField::Root, tr("Root"), root_,
           tr("The rank that reduce gathers to and broadcast sends from"));
  for (QComboBox* b : {algorithm_, collective_, dtype_, op_}) {
    connect(b, &QComboBox::currentIndexChanged, this, [this] {
      updateDependentFields();
      emit changed();
    });
  }
  connect(root_, &QSpinBox::valueChanged, this, &SetupPanel::changed);
}

void SetupPanel::buildSizes() {
  SetupSection* sec = addSection(QStringLiteral("sizes"), tr("Sizes and pipeline"), false);
  QWidget* in = sec->body();
  size_ = new RangeField(1024, uint64_t{1} << 30, in);
  slice_ = new RangeField(1024, uint64_t{64} << 20, in);
  inflight_ = new RangeField(1, kMaxInflight, in);
  addField(sec, SetupField::Size, tr("Message size"), size_,
           tr("Bytes of the collective (nccl-tests' size), e.g. 64K, 16M; sweep to chart bandwidth "
              "against size"));
  addField(sec, SetupField::Slice, tr("Slice size"), slice_,
           tr("The pipeline unit: the most bytes one message carries"));
  addField(sec, SetupField::Inflight, tr("Slices in flight"), inflight_,
           tr("Slices a rank may have in flight at once"));
  window_ = new QSpinBox(in);
  window_->setRange(1, static_cast<int>(kMaxInflight));
  window_->setSpecialValueText(tr("1 (slice by slice)"));
  addField(sec, SetupField::Window, tr("Ring window"), window_,
           tr("Slices ring takes through each step together: a step's latency is paid once a "
              "window (all-reduce, reduce-scatter, all-gather)"));
  connect(window_, &QSpinBox::valueChanged, this, &SetupPanel::changed);
  runsSection_ = addSection(QStringLiteral("runs"), tr("Iterations, hosts"), true);
  in = runsSection_->body();
  iterations_ = new QSpinBox(in);
  iterations_->setRange(1, 100000);
  warmup_ = new QSpinBox(in);
  warmup_->setRange(0, 100000);
  ranksPerHost_ = new QSpinBox(in);
  ranksPerHost_->setRange(0, kMaxRanks);
  ranksPerHost_->setSpecialValueText(tr("from host names"));
  radix_ = new QSpinBox(in);
  // 1 stands for "not set": the spin box's special value, since no tree has radix 1.
  radix_->setRange(1, kMaxRanks);
  radix_->setSpecialValueText(tr("default (4)"));
  addField(runsSection_, SetupField::Iterations, tr("Iterations"), iterations_,
           tr("Timed iterations per run"));
  addField(runsSection_, SetupField::Warmup, tr("Warm-up"), warmup_,
           tr("Untimed iterations before them"));
  addField(runsSection_, SetupField::RanksPerHost, tr("Ranks per host"), ranksPerHost_,
           tr("How hierarchical groups the ranks into hosts"));
  addField(runsSection_, SetupField::Radix, tr("knomial radix"), radix_,
           tr("knomial's k, 2..ranks: children per parent and round (2: binomial)"));
  for (RangeField* r : {size_, slice_, inflight_})
    connect(r, &RangeField::edited, this, &SetupPanel::changed);
  for (QSpinBox* s : {iterations_, warmup_, ranksPerHost_, radix_}) {
    connect(s, &QSpinBox::valueChanged, this, &SetupPanel::changed);
  }
}

void SetupPanel::buildRing() {
  ringSection_ = addSection(QStringLiteral("ring"), tr("Ring order"), true);
  QWidget* in = ringSection_->body();
  ringText_ = new QLineEdit(in);
  ringText_->setPlaceholderText(tr("0 1 2 … n−1 (type e.g. 0 2 1 3)"));
  addField(ringSection_, SetupField::RingOrder, tr("Order"), ringText_,
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
  ringSection_->form()->addRow(ringList_);
  connect(ringText_, &QLineEdit::textEdited, this, &SetupPanel::ringTextEdited);
  connect(ring_, &RingOrderModel::orderEdited, this, [this](const std::vector<int>& order) {
    ringText_->setText(ring_->isIdentity() ? QString()
                                           : QString::fromStdString(formatRingOrder(order)));
    emit changed();
  });
}

void SetupPanel::buildShaping() {
  shapingSection_ = addSection(QStringLiteral("shaping"), tr("Link shaping"), true);
  QWidget* in = shapingSection_->body();
  portRate_ = rateBox(in, tr("not shaped"));
  latency_ = new QDoubleSpinBox(in);
  latency_->setRange(0, 1e6);
  latency_->setDecimals(0);
  latency_->setSingleStep(10);
  latency_->setSuffix(QStringLiteral(" µs"));
  latency_->setSpecialValueText(tr("none"));
  addField(shapingSection_, SetupField::PortRate, tr("Every port"), portRate_,
           tr("Every rank's port rate, each direction (the model predicts under it too)"));
  addField(shapingSection_, SetupField::Latency, tr("Added latency"), latency_,
           tr("Added to every message"));
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
  addField(shapingSection_, SetupField::SlowRank, tr("Slow rank"),
           row({slowRankOn_, slowRank_, new QLabel(tr("at")), slowRankRate_}),
           tr("One rank whose port is slower than the others"));
  slowLinkOn_ = new QCheckBox(tr("link"), in);
  slowFrom_ = new QSpinBox(in);
  slowTo_ = new QSpinBox(in);
  slowLinkRate_ = rateBox(in, {});
  addField(shapingSection_, SetupField::SlowLink, tr("Slow link"),
           row({slowLinkOn_, slowFrom_, new QLabel(QStringLiteral("→")), slowTo_,
                new QLabel(tr("at")), slowLinkRate_}),
           tr("One directed link slower than its ports"));
  topology_ = new QLineEdit(in);
  topology_->setPlaceholderText(tr("none (e.g. torus:2x2@100M, fat-tree:2:4)"));
  addField(shapingSection_, SetupField::Topology, tr("Topology"), topology_,
           tr("A named network (docs/topologies.md): torus:RxC[@RATE] or fat-tree:K[:O][@RATE]; "
              "RATE is one link's, else the port rate's; the added latency is then per hop"));
  connect(topology_, &QLineEdit::textChanged, this, &SetupPanel::changed);
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
  // The root matters to reduce and broadcast alone: its row shows for them (or its refusal).
  fieldSections_[SetupField::Root]->form()->setRowVisible(
      root_, rooted || !problemLabels_[SetupField::Root]->text().isEmpty());
  // Algorithms that do not implement the collective, or cannot run on the backend, cannot be
  // chosen: the lab's own need a backend with its data planes, NCCL's a device backend,
  // Gloo's the cpu backend (and a build with Gloo).
  const std::string backend = backend_->currentData().toString().toStdString();
  const BackendInfo* info = findBackend(backend);
  const MemoryKind memory = info != nullptr ? info->memory : MemoryKind::Host;
  for (int i = 0; i < algorithm_->count(); ++i) {
    const std::string a = algorithm_->itemData(i).toString().toStdString();
    const LibraryAlgorithm* lib = findLibraryAlgorithm(a);
    QString why;
    if (a == "all") {
      why.clear();
    } else if (a.rfind("msccl:", 0) == 0) {
      if (c != scheduleCollective_) why = tr("the MSCCL file implements another collective");
    } else if (lib != nullptr ? !lib->supports(c) : !algorithmSupports(a, c)) {
      why = tr("does not implement %1").arg(collective_->currentText());
    } else if (lib != nullptr && lib->memory != memory) {
      why = lib->memory == MemoryKind::Device
                ? tr("NCCL's own collective: needs the cuda or nccl backend")
                : tr("%1's own collective: needs the cpu backend")
                      .arg(QString::fromStdString(std::string(lib->library)));
    } else if (lib != nullptr && libraryMissing(lib->library)) {
      why = QString::fromStdString(*libraryMissing(lib->library));
    } else if (lib == nullptr && backend == "nccl") {
      why = tr("the nccl backend runs NCCL's own collectives only");
    } else if (lib == nullptr) {
      why = QString::fromStdString(
          workerCountRefusal(a, std::max(1, local_->value() + remote_->value())));
    }
    algorithm_->setItemData(i, why.isEmpty() ? QVariant() : QVariant(0), Qt::UserRole - 1);
    algorithm_->setItemData(i, why.isEmpty() ? QVariant() : QVariant(why), Qt::ToolTipRole);
  }
  devices_->setEnabled(memory == MemoryKind::Device);
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
  if (s.algorithm.rfind("msccl:", 0) == 0) s.scheduleXml = scheduleXml_;
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
  s.window = window_->value();
  s.iterations = iterations_->value();
  s.warmup = warmup_->value();
  s.ranksPerHost = ranksPerHost_->value();
  s.radix = radix_->value() >= 2 ? radix_->value() : 0;
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
  s.topology = topology_->text().trimmed().toStdString();
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
  if (!s.scheduleXml.empty() && algorithm_->findData(QString::fromStdString(s.algorithm)) < 0) {
    // An imported file is one more algorithm, first in the list.
    scheduleXml_ = s.scheduleXml;
    scheduleCollective_ = s.collective;
    const QString name = QString::fromStdString(s.algorithm);
    algorithm_->insertItem(0, name, name);
  }
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
  window_->setValue(s.window);
  iterations_->setValue(s.iterations);
  warmup_->setValue(s.warmup);
  ranksPerHost_->setValue(s.ranksPerHost);
  radix_->setValue(s.radix >= 2 ? s.radix : 1);
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
  topology_->setText(QString::fromStdString(s.topology));
  slowLinkRate_->setValue(s.slowLinkMBps);
  updateDependentFields();
  updateSummaries();
}

void SetupPanel::showProblems(const std::vector<SetupProblem>& problems) {
  std::map<SetupSection*, bool> refused;
  for (auto& [field, label] : problemLabels_) {
    const auto it = std::find_if(problems.begin(), problems.end(),
                                 [f = field](const SetupProblem& p) { return p.field == f; });
    QWidget* w = fieldWidgets_[field];
    SetupSection* sec = fieldSections_[field];
    refused[sec] |= it != problems.end();
    if (it == problems.end()) {
      sec->form()->setRowVisible(label, false);
      label->clear();
      w->setStyleSheet({});
      continue;
    }
    label->setText(QString::fromStdString(it->rule));
    sec->form()->setRowVisible(label, true);
    w->setStyleSheet(QString::fromLatin1(kInvalidStyle));
  }
  // A refused field is never hidden in a folded section.
  for (auto& [sec, any] : refused) sec->setRefused(any);
  // The ring list follows the world's size.
  std::vector<SetupProblem> ignored;
  const SessionSetup s = setup(&ignored);
  updateDependentFields();
  ring_->setRing(s.nranks(), s.ringOrder);
}

QString SetupPanel::problemText(SetupField f) const {
  const auto it = problemLabels_.find(f);
  return it == problemLabels_.end() ? QString() : it->second->text();
}

QString SetupPanel::fieldName(SetupField f) const {
  const auto it = fieldNames_.find(f);
  return it == fieldNames_.end() ? QString() : it->second;
}

void SetupPanel::setWorkers(const std::vector<WorkerInfo>& workers, const QString& joinCommand) {
  const int remoteBefore = workers_->remoteCount();
  workers_->setWorkers(workers);
  // A run's ranks are the setup's workers: a remote worker that joined beyond them (a spare
  // of the last session, or one started by hand) counts from the next run on. Not while a
  // session runs: its world is fixed, and the field is locked.
  if (remote_->isEnabled() && workers_->remoteCount() > remote_->value()) {
    remote_->setValue(workers_->remoteCount());
  }
  // A worker from another machine joining is news: its key's fingerprint is there to check.
  if (remoteBefore == 0 && workers_->remoteCount() > 0) presentSection_->setOpen(true);
  joinCommand_->setText(joinCommand);
  joinCommand_->setCursorPosition(0);
  workerTable_->resizeColumnsToContents();
  // Up to five workers show without scrolling.
  const int rows = std::clamp(static_cast<int>(workers.size()), 2, 5);
  const int h = workerTable_->horizontalHeader()->height() +
                rows * workerTable_->verticalHeader()->defaultSectionSize() + 4;
  workerTable_->setFixedHeight(h);
  updateSummaries();
}

QString SetupPanel::joinCommand() const { return joinCommand_->text(); }

void SetupPanel::setControlSecurity(const QString& text, bool insecure) {
  control_->setText(text);
  // A network listen in the clear is a warning, not a detail to fold away.
  if (insecure) remoteSection_->setOpen(true);
  // The red of a refused field: in the clear on a network is a warning.
  control_->setStyleSheet(insecure ? QStringLiteral("color: #c62828; font-weight: 600;")
                                   : QString());
}

void SetupPanel::setRunning(bool running) {
  for (QWidget* w : lockedWhileRunning_) w->setEnabled(!running);
}

// What each folded section holds, in a few words beside its title: a setting in effect is
// never out of sight.
void SetupPanel::updateSummaries() {
  std::vector<SetupProblem> ignored;
  const SessionSetup s = setup(&ignored);
  QStringList remote;
  remote << (s.remoteWorkers == 0 ? tr("none remote") : tr("%1 remote").arg(s.remoteWorkers));
  if (!s.listen.empty()) remote << QString::fromStdString(s.listen);
  if (!devices_->text().trimmed().isEmpty()) remote << tr("GPUs %1").arg(devices_->text());
  remoteSection_->setSummary(remote.join(QStringLiteral(" · ")));
  presentSection_->setSummary(tr("%1 joined").arg(workers_->rowCount()));
  QString runs = tr("%1 iterations, %2 warm-up").arg(s.iterations).arg(s.warmup);
  if (s.ranksPerHost > 0) runs += tr(", %1 per host").arg(s.ranksPerHost);
  if (s.radix > 0) runs += tr(", radix %1").arg(s.radix);
  runsSection_->setSummary(runs);
  ringSection_->setSummary(s.ringOrder.empty()
                               ? tr("0 … n−1 (default)")
                               : QString::fromStdString(formatRingOrder(s.ringOrder)));
  QStringList shaping;
  if (s.portMBps > 0) shaping << tr("ports %1 MB/s").arg(s.portMBps);
  if (!s.topology.empty()) shaping << QString::fromStdString(s.topology);
  if (s.latencyUs > 0) {
    shaping << (s.topology.empty() ? tr("+%1 µs") : tr("+%1 µs per hop")).arg(s.latencyUs);
  }
  if (s.slowRank >= 0) shaping << tr("rank %1 at %2 MB/s").arg(s.slowRank).arg(s.slowRankMBps);
  if (s.slowLinkFrom >= 0) {
    shaping
        << tr("link %1→%2 at %3 MB/s").arg(s.slowLinkFrom).arg(s.slowLinkTo).arg(s.slowLinkMBps);
  }
  shapingSection_->setSummary(shaping.isEmpty() ? tr("not shaped")
                                                : shaping.join(QStringLiteral(" · ")));
}

QStringList SetupPanel::openSections() const {
  QStringList open;
  for (const SetupSection* sec : sections_) {
    if (sec->collapsible() && sec->isOpen()) open << sec->key();
  }
  return open;
}

void SetupPanel::setOpenSections(const QStringList& keys) {
  for (SetupSection* sec : sections_) {
    // A section holding a refused field stays open.
    if (sec->collapsible()) sec->setOpen(keys.contains(sec->key()) || sec->refused());
  }
}

SetupSection* SetupPanel::section(const QString& key) const {
  for (SetupSection* sec : sections_) {
    if (sec->key() == key) return sec;
  }
  return nullptr;
}

}  // namespace arl::ui
