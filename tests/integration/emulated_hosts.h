// Emulated hosts for the integration tests: scripts/hosts's network namespaces, one host name
// each, joined by veth pairs on a bridge (docs/hosts.md). A test makes them, points a
// coordinator at the bridge, starts workers on them and may take a host off the network;
// the destructor ends the workers and removes everything. Needs root and iproute2: a test
// asks unavailable() first and skips with its reason.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/process.h"

namespace arl::test {

class EmulatedHosts {
 public:
  static std::string script() { return std::string(ARL_SOURCE_DIR) + "/scripts/hosts"; }

  // Why hosts cannot be made here ("" when they can): not root, or no ip / unshare / bridge.
  static std::string unavailable() {
    if (::geteuid() != 0) return "emulated hosts need root (network namespaces); not root here";
    for (const char* tool : {"ip", "tc", "unshare"}) {
      if (shell(std::string("command -v ") + tool + " >/dev/null 2>&1") != 0) {
        return std::string("emulated hosts need ") + tool + " (iproute2, util-linux)";
      }
    }
    const std::string probe = "arlprobe" + std::to_string(::getpid() % 100000);
    if (shell("ip netns add " + probe + " 2>/dev/null && ip netns delete " + probe) != 0) {
      return "emulated hosts need network namespaces: `ip netns add` failed here";
    }
    return {};
  }

  // `hosts` hosts, each link shaped to `rate` (tc's units) when not empty. Throws
  // std::runtime_error with the script's exit status when they cannot be made.
  explicit EmulatedHosts(int hosts, const std::string& rate = "")
      : name_(std::to_string((::getpid() % 100000) * 10 + next()++ % 10)) {
    std::string cmd = script() + " up " + name_ + " " + std::to_string(hosts) + "x1";
    if (!rate.empty()) cmd += " --rate " + rate;
    address_ = output(cmd);
    if (address_.empty()) throw std::runtime_error("`" + cmd + "` made no hosts");
  }
  // `down` ends the workers (SIGTERM, so that they remove their segments' names) and sweeps
  // what a killed one left; then they are reaped here, their parent.
  ~EmulatedHosts() {
    shell(script() + " down " + name_);
    for (int64_t pid : workers_) killAndReap(pid);
  }
  EmulatedHosts(const EmulatedHosts&) = delete;
  EmulatedHosts& operator=(const EmulatedHosts&) = delete;

  const std::string& name() const { return name_; }
  // The bridge's address: where a coordinator listens for the hosts' workers.
  const std::string& address() const { return address_; }
  std::string listen() const { return "tcp://" + address_ + ":*"; }

  // Starts a worker on host `host` (named arl-hHOST) that joins `endpoint`; returns its pid.
  int64_t startWorker(int host, const std::string& endpoint) {
    const int64_t pid = spawnChild({"/usr/bin/env", std::string("ARL_WORKER=") + ARL_WORKER_BINARY,
                                    script(), "worker", name_, std::to_string(host), endpoint});
    workers_.push_back(pid);
    return pid;
  }

  // Takes host `host` off the network (down) or puts it back (up).
  void setLink(int host, bool up) {
    shell(script() + " link " + name_ + " " + std::to_string(host) + (up ? " up" : " down"));
  }

  // What of NAME exists now: namespaces and links, one per line ("" when nothing).
  static std::string leftovers(const std::string& name) {
    return output("{ ip netns list; ip -o link show; } 2>/dev/null | grep -E 'arl-" + name +
                  "-h|arlb" + name + "|arl" + name + "v' || true");
  }

  static int shell(const std::string& cmd) {
    const int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  // The command's standard output, trailing newline removed; "" when it failed.
  static std::string output(const std::string& cmd) {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return out;
    std::array<char, 256> buf{};
    while (std::fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
    if (::pclose(p) != 0) return {};
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

 private:
  static int& next() {
    static int n = 0;
    return n;
  }

  std::string name_;
  std::string address_;
  std::vector<int64_t> workers_;
};

}  // namespace arl::test

// Skips a test, with the reason, where emulated hosts cannot be made (no root, no ip netns).
#define SKIP_WITHOUT_HOSTS()                                                               \
  do {                                                                                     \
    if (const std::string why = ::arl::test::EmulatedHosts::unavailable(); !why.empty()) { \
      GTEST_SKIP() << why;                                                                 \
    }                                                                                      \
  } while (0)
