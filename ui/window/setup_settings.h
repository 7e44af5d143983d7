// The setup kept between sessions (QSettings, group "setup"). Values that do not read back
// (a hand-edited file, an algorithm that no longer exists) fall back to the defaults.
#pragma once

#include <QSettings>

#include "window/setup.h"

namespace arl::ui {

void saveSetup(QSettings& settings, const SessionSetup& s);
SessionSetup loadSetup(QSettings& settings);

}  // namespace arl::ui
