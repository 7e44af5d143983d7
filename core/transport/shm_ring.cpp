// The shared-memory data plane's ring size (shm_ring.h).
#include "transport/shm_ring.h"

#include <algorithm>
#include <limits>
#include <string>

#include "base/errors.h"

namespace arl {

// Why inflight + 2 records of the largest size R. A sender must always be able to place its
// next record while up to `inflight` earlier records are live (unread, or read and still held
// by a receiver that may keep them until this very record arrives). The live records take
// L <= inflight * R contiguous ring bytes (a WRAP padding among them included) ending at the
// write position p. Two cases, with cap = (inflight + 2) R:
//  - R or more bytes are left before the ring's end: the free bytes run from p to the tail,
//    cap - L >= 2R of them, so the record fits behind p;
//  - fewer are (p > cap - R): the record goes to the ring's start behind a WRAP padding the
//    end. The live bytes [p - L, p) do not cross the end then, so the start holds
//    p - L > cap - R - L >= R free bytes: the record fits there in one piece.
// With inflight + 1 records (the old size) the second case fails: a receiver holding one
// record that ends at p, with the tail anywhere in (0, R), leaves less than R at the start
// and less than R at the end, and the sender waits for a release that never comes.
size_t shmRingBytes(size_t maxMessageBytes, int inflight) {
  const size_t records = static_cast<size_t>(std::max(inflight, 1)) + 2;
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  const bool fits = maxMessageBytes <= kMax - (kShmLineBytes - 1);
  const size_t padded =
      fits ? (maxMessageBytes + kShmLineBytes - 1) / kShmLineBytes * kShmLineBytes : 0;
  if (!fits || padded > kMax / records - kShmRecordHeadBytes) {
    throw ConfigError("shared-memory data plane: a ring for " + std::to_string(records) +
                      " messages of " + std::to_string(maxMessageBytes) +
                      " bytes does not fit the address space (make the slice smaller)");
  }
  return std::max(kShmMinRingBytes, (kShmRecordHeadBytes + padded) * records);
}

}  // namespace arl
