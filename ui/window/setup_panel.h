// The setup panel (a dock beside the topology): workers (local count, remote ones as they join
// with the command that joins one), the collective, sizes and their sweeps, the pipeline, the
// ring order (typed or dragged) and the network's shaping. What most runs change is always in
// view; the rest folds into sections that summarise their values while closed. A field that
// core would refuse is outlined in red with the rule under it, before Run is pressed (its
// section opens). Run and Stop are the window's (toolbar, Run menu).
#pragma once

#include <QStringList>
#include <QWidget>
#include <map>
#include <vector>

#include "runtime/run_types.h"
#include "window/setup.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QListView;
class QSpinBox;
class QTableView;

namespace arl::ui {

class RangeField;
class RingOrderModel;
class SetupSection;
class WorkerListModel;

class SetupPanel : public QWidget {
  Q_OBJECT

 public:
  explicit SetupPanel(QWidget* parent = nullptr);

  // The setup as the fields say it; `problems` gets what a field's text cannot say (a size
  // that is not a size, a ring order that is not numbers).
  SessionSetup setup(std::vector<SetupProblem>* problems = nullptr) const;
  void setSetup(const SessionSetup& s);

  // Marks the fields with problems (and clears the others).
  void showProblems(const std::vector<SetupProblem>& problems);
  // The rule shown under a field ("" when it has none).
  QString problemText(SetupField f) const;
  // The field's label ("Local workers").
  QString fieldName(SetupField f) const;

  void setWorkers(const std::vector<WorkerInfo>& workers, const QString& joinCommand);
  // How the control socket listens (LabRuntime::workersChanged); red when `insecure`.
  void setControlSecurity(const QString& text, bool insecure);
  // Fields that cannot change while a session runs are disabled.
  void setRunning(bool running);

  // For the toolbar, which mirrors these.
  QComboBox* algorithmBox() const { return algorithm_; }
  QComboBox* collectiveBox() const { return collective_; }
  RangeField* sizeField() const { return size_; }
  RangeField* sliceField() const { return slice_; }
  WorkerListModel* workerModel() const { return workers_; }
  // The command a remote worker joins with, as the "Join with" field shows it.
  QString joinCommand() const;
  RingOrderModel* ringModel() const { return ring_; }
  QLineEdit* ringOrderEdit() const { return ringText_; }

  // The folded sections open now, by key ("remote", "present", "runs", "ring", "shaping"), to
  // keep between sessions; and opening those (the others close, unless refused).
  QStringList openSections() const;
  void setOpenSections(const QStringList& keys);
  SetupSection* section(const QString& key) const;

 signals:
  void changed();

 private:
  SetupSection* addSection(const QString& key, const QString& title, bool collapsible);
  void buildWorkers();
  QWidget* buildJoinRow(QWidget* parent);
  void buildCollective();
  void buildSizes();
  void buildRing();
  void buildShaping();
  // A field with its label, and under it the rule when refused; the field is what turns red.
  void addField(SetupSection* sec, SetupField f, const QString& label, QWidget* field,
                const QString& tip);
  void alignLabels();
  void updateDependentFields();
  void updateSummaries();
  void ringTextEdited();

  std::map<SetupField, QWidget*> fieldWidgets_;
  std::map<SetupField, QLabel*> problemLabels_;
  std::map<SetupField, QString> fieldNames_;
  std::map<SetupField, SetupSection*> fieldSections_;
  std::vector<SetupSection*> sections_;
  SetupSection* remoteSection_ = nullptr;
  SetupSection* presentSection_ = nullptr;
  SetupSection* runsSection_ = nullptr;
  SetupSection* ringSection_ = nullptr;
  SetupSection* shapingSection_ = nullptr;
  QSpinBox* local_;
  QSpinBox* remote_;
  QLineEdit* listen_;
  QComboBox* backend_;
  QLineEdit* devices_;
  QLineEdit* joinCommand_;
  QLabel* control_;
  QTableView* workerTable_;
  WorkerListModel* workers_;
  QComboBox* algorithm_;
  // The MSCCL file of the "msccl:NAME" entry that setSetup added, and its collective.
  std::string scheduleXml_;
  Collective scheduleCollective_ = Collective::AllReduce;
  QComboBox* collective_;
  QComboBox* dtype_;
  QComboBox* op_;
  QSpinBox* root_;
  RangeField* size_;
  RangeField* slice_;
  RangeField* inflight_;
  QSpinBox* window_;
  QSpinBox* iterations_;
  QSpinBox* warmup_;
  QSpinBox* ranksPerHost_;
  QSpinBox* radix_;
  QLineEdit* ringText_;
  QListView* ringList_;
  RingOrderModel* ring_;
  QDoubleSpinBox* portRate_;
  QDoubleSpinBox* latency_;
  QLineEdit* topology_;
  QCheckBox* slowRankOn_;
  QSpinBox* slowRank_;
  QDoubleSpinBox* slowRankRate_;
  QCheckBox* slowLinkOn_;
  QSpinBox* slowFrom_;
  QSpinBox* slowTo_;
  QDoubleSpinBox* slowLinkRate_;
  std::vector<QWidget*> lockedWhileRunning_;
  bool loading_ = false;
};

}  // namespace arl::ui
