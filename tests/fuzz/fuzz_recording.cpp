// Recordings (.arlrec) as `allreduce-lab replay` and the window read them (export/export.h:
// parseRecording). An accepted recording must be drawable (the trace writer runs on it), and
// written out again it must read back to the same recording.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "export/export.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace arl;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  BenchReport r;
  try {
    r = parseRecording(text);
  } catch (const RecordingError&) {
    return 0;
  }
  (void)chromeTraceJson(r);
  const std::string written = recordingJson(r);
  BenchReport back;
  try {
    back = parseRecording(written);
  } catch (const RecordingError& e) {
    ARL_FUZZ_CHECK(false,
                   std::string("an accepted recording, written out, is refused: ") + e.what());
  }
  ARL_FUZZ_CHECK(recordingJson(back) == written, "a recording read back differs");
  return 0;
}
