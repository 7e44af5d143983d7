// Helpers shared by the data-plane tests (ZeroMQ and shared memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "arl/transport.h"

namespace arl::transport_test {

inline ChunkHeader headerFor(uint32_t step, uint32_t chunk = 0) {
  ChunkHeader h;
  h.epoch = 7;
  h.seq = 3;
  h.step = step;
  h.chunk = chunk;
  return h;
}

// Payload whose every byte depends on (stream, index), so a swap or a corruption shows.
inline std::vector<unsigned char> pattern(int stream, uint32_t i, size_t bytes) {
  std::vector<unsigned char> v(bytes);
  for (size_t j = 0; j < bytes; ++j) {
    v[j] =
        static_cast<unsigned char>(j * 131 + i * 17 + static_cast<size_t>(stream) * 71 + (j >> 12));
  }
  return v;
}

inline bool samePayload(const InMessage& m, const std::vector<unsigned char>& v) {
  return m.size() == v.size() && (v.empty() || std::memcmp(m.data(), v.data(), v.size()) == 0);
}

}  // namespace arl::transport_test
