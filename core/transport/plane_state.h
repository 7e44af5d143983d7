// The abort and failure state a socket data plane shares with its outstanding completions
// (which may outlive it). A self-pipe lets a thread blocked in poll wake at once when another
// thread aborts, without touching a socket that the blocked thread owns.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <system_error>

#include "base/errors.h"

namespace arl {

struct PlaneState {
  std::atomic<bool> aborted{false};
  std::atomic<bool> failed{false};  // a send, receive or wait threw PeerError
  int fds[2] = {-1, -1};            // fds[0] turns readable on abort()

  PlaneState() {
    if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
      throw std::system_error(errno, std::generic_category(), "data plane: pipe2");
    }
  }
  ~PlaneState() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  PlaneState(const PlaneState&) = delete;
  PlaneState& operator=(const PlaneState&) = delete;

  void abort() {
    if (!aborted.exchange(true)) {
      const char c = 1;
      const ssize_t n = ::write(fds[1], &c, 1);
      (void)n;  // the flag alone suffices; the byte only shortens the wait
    }
  }
  bool isAborted() const { return aborted.load(std::memory_order_acquire); }
  // The error to throw, remembered so that close() skips its goodbye.
  PeerError fail(int rank, int peer, int64_t step, const std::string& reason) {
    failed.store(true, std::memory_order_release);
    return PeerError(rank, peer, step, reason);
  }
};

}  // namespace arl
