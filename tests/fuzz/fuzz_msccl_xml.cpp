// MSCCL algorithm files (schedule/msccl_import.h: parseMscclProgram), as `allreduce-lab plan
// --import` and a run of one read them. An accepted program becomes a lab schedule whose ops
// the verifier walks; the verifier may find the algorithm wrong (that is its report), but the
// import must not crash or throw anything but MscclImportError on the way.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "schedule/msccl_import.h"
#include "schedule/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace arl;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  MscclProgram p;
  try {
    p = parseMscclProgram(text, "fuzz.xml");
  } catch (const MscclImportError&) {
    return 0;
  }
  ARL_FUZZ_CHECK(p.ngpus >= 1 && static_cast<int>(p.gpus.size()) == p.ngpus,
                 "an accepted program's GPUs do not match ngpus");
  (void)mscclAlgorithmName(p);
  // Eight elements per chunk of a loop, slices of two: small enough that a large program stays
  // quick, several slices per chunk so that slicing is exercised.
  const uint64_t count = uint64_t{8} * static_cast<uint64_t>(std::max(p.nchunksperloop, 1));
  std::vector<std::vector<MscclOrigin>> origins;
  Schedule s;
  try {
    s = mscclSchedule(p, count, 2, &origins);
  } catch (const MscclImportError&) {
    return 0;
  }
  ARL_FUZZ_CHECK(s.nranks == p.ngpus, "the schedule's ranks are not the program's GPUs");
  const VerifyResult vr = verify(s);
  if (!vr.ok) (void)withMscclOrigins(vr.message, origins);
  return 0;
}
