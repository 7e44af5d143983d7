// SIGINT and SIGTERM for the commands that run workers (bench, train): the first signal asks
// the command to stop, a second one quits at once.
#pragma once

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <ctime>
#include <functional>
#include <mutex>
#include <thread>

namespace arl::app {

// Blocks SIGINT and SIGTERM in every thread started after it (so the coordinator's thread
// never sees them) and waits for them on its own thread. The first signal calls `onSignal`;
// a second one ends the process at once (local workers die with it: PR_SET_PDEATHSIG).
class SignalWatch {
 public:
  // `prog` names the command in the second signal's message; it must outlive the watch.
  explicit SignalWatch(const char* prog) : prog_(prog) {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    thread_ = std::thread([this] { loop(); });
  }
  ~SignalWatch() {
    stop_.store(true);
    thread_.join();
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  void setHandler(std::function<void(int)> f) {
    std::lock_guard<std::mutex> lock(mu_);
    handler_ = std::move(f);
  }
  int signal() const { return sig_.load(); }

 private:
  void loop() {
    const timespec tick{0, 50'000'000};
    while (!stop_.load()) {
      const int s = sigtimedwait(&set_, nullptr, &tick);
      if (s <= 0) continue;
      if (sig_.load() != 0) {
        static const char head[] = "\n", tail[] = ": second signal, quitting now\n";
        (void)!::write(2, head, sizeof head - 1);
        (void)!::write(2, prog_, std::strlen(prog_));
        (void)!::write(2, tail, sizeof tail - 1);
        ::_exit(128 + s);
      }
      sig_.store(s);
      std::lock_guard<std::mutex> lock(mu_);
      if (handler_) handler_(s);
    }
  }

  const char* prog_;
  sigset_t set_{}, old_{};
  std::atomic<bool> stop_{false};
  std::atomic<int> sig_{0};
  std::mutex mu_;
  std::function<void(int)> handler_;
  std::thread thread_;
};

}  // namespace arl::app
