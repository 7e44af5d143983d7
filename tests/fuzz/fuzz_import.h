// The three importers of export/nccl_tests.h share one target body: `allreduce-lab import`
// writes what an importer accepts as a recording, so that recording must read back, with as
// many results, and its trace must be drawable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "export/export.h"
#include "export/nccl_tests.h"
#include "fuzz_check.h"

namespace arl {

using Importer = BenchReport (*)(std::string_view text, const std::string& name);

inline int fuzzImport(Importer import, const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)detectImportFormat(text);
  BenchReport r;
  try {
    r = import(text, "fuzz");
  } catch (const ImportError&) {
    return 0;
  }
  for (const BenchRow& row : r.rows) {
    ARL_FUZZ_CHECK(isImportedLabel(row.result.request.algorithm), row.result.request.algorithm);
  }
  const std::string written = recordingJson(r);
  BenchReport back;
  try {
    back = parseRecording(written);
  } catch (const RecordingError& e) {
    ARL_FUZZ_CHECK(
        false, std::string("an imported session, written as a recording, is refused: ") + e.what());
  }
  ARL_FUZZ_CHECK(back.rows.size() == r.rows.size(), "the recording lost results");
  (void)chromeTraceJson(back);
  return 0;
}

}  // namespace arl
