// The size of the shared-memory data plane's rings (transport/shm), apart from the plane so
// that the cost model, which counts them in a run's working set, can use it without linking
// the data planes.
#pragma once

#include <cstddef>

namespace arl {

// A ring holds records, each a head of kShmRecordHeadBytes and the payload padded to
// kShmLineBytes; no ring is smaller than kShmMinRingBytes.
inline constexpr size_t kShmLineBytes = 64;
inline constexpr size_t kShmRecordHeadBytes = 64;
inline constexpr size_t kShmMinRingBytes = size_t{64} << 10;

// Ring size for messages of at most maxMessageBytes with `inflight` of them outstanding:
// room for inflight + 2 records (the outstanding ones, the next one, and up to one lost to
// the wrap at the ring's end; the reasoning is at the definition), at least 64 KiB. Throws
// ConfigError when that size does not fit a size_t.
size_t shmRingBytes(size_t maxMessageBytes, int inflight);

}  // namespace arl
