// nccl-tests' -J JSON (nccl-tests 2.19.6, src/util.cu) as `allreduce-lab import` and the window
// read it (export/nccl_tests.h: importNcclTestsJson).
#include "fuzz_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return arl::fuzzImport(&arl::importNcclTestsJson, data, size);
}
