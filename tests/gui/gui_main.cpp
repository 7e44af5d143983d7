// The GUI tests' main: a QApplication on the offscreen platform unless the environment names
// another (gtest_discover_tests runs this binary without the tests' ENVIRONMENT, so it must not
// need a display).
#include <gtest/gtest.h>

#include <QApplication>
#include <cstdlib>

int main(int argc, char** argv) {
  if (std::getenv("QT_QPA_PLATFORM") == nullptr) setenv("QT_QPA_PLATFORM", "offscreen", 1);
  QApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
