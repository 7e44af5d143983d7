// File > Export: where to, which formats, and the charts' size and scale.
#pragma once

#include <QDialog>

#include "export/export_session.h"

class QCheckBox;
class QDoubleSpinBox;
class QLineEdit;
class QSpinBox;

namespace arl::ui {

class ExportDialog : public QDialog {
  Q_OBJECT

 public:
  explicit ExportDialog(QWidget* parent = nullptr);

  // The choices, as exportSession() takes them.
  ExportOptions options() const;
  void setOptions(const ExportOptions& o);

 private:
  QLineEdit* directory_ = nullptr;
  std::vector<std::pair<ExportFormat, QCheckBox*>> formats_;
  QSpinBox* width_ = nullptr;
  QSpinBox* height_ = nullptr;
  QDoubleSpinBox* scale_ = nullptr;
};

}  // namespace arl::ui
