// nccl-tests' printed table as `allreduce-lab import` and the window read it (export/nccl_tests.h:
// importNcclTestsText).
#include "fuzz_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return arl::fuzzImport(&arl::importNcclTestsText, data, size);
}
