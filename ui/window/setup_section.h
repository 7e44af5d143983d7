// One section of the setup panel: a bold title over a form of fields. A collapsible one shows
// a summary of its values beside the title while closed ("not shaped", "2 remote"), so that a
// setting in effect is never hidden, and opens by itself when one of its fields is refused.
#pragma once

#include <QWidget>

class QFormLayout;
class QLabel;
class QToolButton;

namespace arl::ui {

class SetupSection : public QWidget {
  Q_OBJECT

 public:
  // `key` names the section in the settings that remember which sections are open.
  SetupSection(const QString& key, const QString& title, bool collapsible,
               QWidget* parent = nullptr);

  QFormLayout* form() const { return form_; }
  // The widget the form lives in (the parent of the section's fields).
  QWidget* body() const { return body_; }
  const QString& key() const { return key_; }
  bool collapsible() const { return toggle_ != nullptr; }

  bool isOpen() const;
  void setOpen(bool open);
  // The values in a few words, shown beside the title.
  void setSummary(const QString& text);
  QString summary() const;
  // A field of the section is refused: the title turns red, and the section opens when it had
  // no refusal before.
  void setRefused(bool refused);
  bool refused() const { return refused_; }

 signals:
  void toggled(bool open);

 private:
  QString key_;
  QToolButton* toggle_ = nullptr;
  QLabel* titleLabel_ = nullptr;
  QLabel* summary_;
  QWidget* body_;
  QFormLayout* form_;
  bool open_ = false;
  bool refused_ = false;
};

}  // namespace arl::ui
