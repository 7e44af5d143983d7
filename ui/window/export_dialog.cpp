#include "window/export_dialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

namespace arl::ui {

ExportDialog::ExportDialog(QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Export the session"));
  auto* form = new QFormLayout(this);

  directory_ = new QLineEdit(this);
  directory_->setPlaceholderText(tr("a folder (created when missing)"));
  auto* browse = new QPushButton(tr("Choose…"), this);
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString d =
        QFileDialog::getExistingDirectory(this, tr("Export the session to"), directory_->text());
    if (!d.isEmpty()) directory_->setText(d);
  });
  auto* dirRow = new QHBoxLayout;
  dirRow->addWidget(directory_, 1);
  dirRow->addWidget(browse);
  form->addRow(tr("Folder"), dirRow);

  const std::pair<ExportFormat, QString> kinds[] = {
      {ExportFormat::Png, tr("charts as PNG")},
      {ExportFormat::Svg, tr("charts as SVG")},
      {ExportFormat::Pdf, tr("charts as PDF")},
      {ExportFormat::Csv, tr("results as CSV")},
      {ExportFormat::Json, tr("results as JSON")},
      {ExportFormat::Trace, tr("Perfetto trace")},
      {ExportFormat::Recording, tr("recording (.arlrec)")},
  };
  auto* formatsRow = new QVBoxLayout;
  for (const auto& [f, label] : kinds) {
    auto* box = new QCheckBox(label, this);
    box->setChecked(true);
    formats_.emplace_back(f, box);
    formatsRow->addWidget(box);
  }
  form->addRow(tr("Write"), formatsRow);

  width_ = new QSpinBox(this);
  width_->setRange(kMinImageSide, kMaxImageSide);
  height_ = new QSpinBox(this);
  height_->setRange(kMinImageSide, kMaxImageSide);
  auto* sizeRow = new QHBoxLayout;
  sizeRow->addWidget(width_);
  sizeRow->addWidget(new QLabel(QStringLiteral("×"), this));
  sizeRow->addWidget(height_);
  form->addRow(tr("Chart size (px)"), sizeRow);
  scale_ = new QDoubleSpinBox(this);
  scale_->setRange(kMinImageScale, kMaxImageScale);
  scale_->setSingleStep(0.5);
  scale_->setSuffix(QStringLiteral("×"));
  scale_->setToolTip(tr("PNG pixels per logical pixel (2× for print and HiDPI)"));
  form->addRow(tr("PNG scale"), scale_);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  buttons->button(QDialogButtonBox::Ok)->setText(tr("Export"));
  connect(buttons, &QDialogButtonBox::accepted, this, [this] {
    if (directory_->text().trimmed().isEmpty()) {
      directory_->setFocus();
      directory_->setStyleSheet(QStringLiteral("border: 1px solid #c62828"));
      return;
    }
    accept();
  });
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  form->addRow(buttons);
  setOptions(ExportOptions{});
}

ExportOptions ExportDialog::options() const {
  ExportOptions o;
  o.directory = directory_->text().trimmed().toStdString();
  o.formats.clear();
  for (const auto& [f, box] : formats_) {
    if (box->isChecked()) o.formats.insert(f);
  }
  o.image.width = width_->value();
  o.image.height = height_->value();
  o.image.scale = scale_->value();
  return o;
}

void ExportDialog::setOptions(const ExportOptions& o) {
  directory_->setText(QString::fromStdString(o.directory));
  for (const auto& [f, box] : formats_) box->setChecked(o.formats.count(f) != 0);
  width_->setValue(o.image.width);
  height_->setValue(o.image.height);
  scale_->setValue(o.image.scale);
}

}  // namespace arl::ui
