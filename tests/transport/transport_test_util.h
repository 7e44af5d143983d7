// Helpers shared by the data-plane tests (ZeroMQ and shared memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/transport.h"

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

// Runs f(rank) on one thread per rank, rethrowing the first failure on the calling thread.
inline void onThreads(int n, const std::function<void(int)>& f) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  std::mutex m;
  std::exception_ptr first;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        f(r);
      } catch (...) {
        std::lock_guard<std::mutex> lk(m);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

inline bool samePayload(const InMessage& m, const std::vector<unsigned char>& v) {
  return m.size() == v.size() && (v.empty() || std::memcmp(m.data(), v.data(), v.size()) == 0);
}

}  // namespace arl::transport_test
