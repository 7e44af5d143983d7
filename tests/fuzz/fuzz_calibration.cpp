// Calibration files (export/calibration.h: parseCalibration), which `allreduce-lab calibrate`
// writes and the model and the window read, also from other machines. An accepted calibration
// written out again must read back to the same text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "export/calibration.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace arl;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Calibration c;
  try {
    c = parseCalibration(text, "fuzz");
  } catch (const CalibrationError&) {
    return 0;
  }
  const std::string written = calibrationJson(c);
  Calibration back;
  try {
    back = parseCalibration(written, "fuzz (written)");
  } catch (const CalibrationError& e) {
    ARL_FUZZ_CHECK(false,
                   std::string("an accepted calibration, written out, is refused: ") + e.what());
  }
  ARL_FUZZ_CHECK(calibrationJson(back) == written, "a calibration read back differs");
  return 0;
}
