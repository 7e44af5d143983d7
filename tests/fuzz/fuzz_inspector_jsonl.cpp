// NCCL Inspector's JSON lines (plugins/profiler/inspector) as `allreduce-lab import` and the window
// read it (export/nccl_tests.h: importInspectorJsonl).
#include "fuzz_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return arl::fuzzImport(&arl::importInspectorJsonl, data, size);
}
