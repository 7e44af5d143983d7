// A wake-up signal another thread can raise and a zmq::poll loop can wait on (an eventfd in
// the poll set): lets the coordinator's and the worker's control loops react to work handed
// over by other threads at once instead of at their next tick. Private to core/src.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace arl {

class Wakeup {
 public:
  Wakeup() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  }
  ~Wakeup() { ::close(fd_); }
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  // Any thread: makes the next (or current) poll on fd() return.
  void raise() noexcept {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(fd_, &one, sizeof one);
  }
  // The polling thread: consumes the signal.
  void clear() noexcept {
    uint64_t v = 0;
    [[maybe_unused]] const ssize_t n = ::read(fd_, &v, sizeof v);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace arl
