// Control frames as the coordinator and the workers read them from a peer (runtime/protocol.h):
// the input's first kHeaderBytes are the header frame, the rest the body frame. What decode()
// accepts must pass validate(), re-encode, and decode again to the same message.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <variant>

#include "fuzz_check.h"
#include "runtime/protocol.h"

namespace {

bool holdsNaN(const arl::Message& m) {
  const auto* r = std::get_if<arl::IterationResult>(&m);
  return r != nullptr && r->train && (std::isnan(r->train->loss) || std::isnan(r->train->spread));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace arl;
  const ByteView all(data, size);
  const size_t split = std::min(size, kHeaderBytes);
  const ByteView header = all.first(split);
  const ByteView body = all.subspan(split);

  // What a side does with a peer of another version before it decodes anything.
  (void)headerVersion(header);
  (void)shutdownReasonAnyVersion(header, body);

  const DecodeResult<Envelope> got = decode(header, body);
  if (!got) {
    (void)got.error().message();
    return 0;
  }
  const Message& m = got->message;
  ARL_FUZZ_CHECK(typeOf(m) == got->type(), typeName(m));
  const auto invalid = validate(m);
  ARL_FUZZ_CHECK(!invalid, *invalid);
  (void)describe(m);

  const Frames again = encode(m);
  const DecodeResult<Envelope> back = decode(again);
  ARL_FUZZ_CHECK(back.ok(), back.ok() ? "" : back.error().message());
  // A NaN (a diverged training step's loss or spread, which the lab reports as it is) is not
  // == to itself: for such a message the bytes, checked next, decide.
  ARL_FUZZ_CHECK(back->message == m || holdsNaN(m), describe(m));
  ARL_FUZZ_CHECK(encode(back->message) == again, describe(m));
  return 0;
}
