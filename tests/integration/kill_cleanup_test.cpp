// A killed bench, or a killed worker, leaves nothing behind: no worker process and no
// data-plane segment in /dev/shm (the workers' SIGTERM handler, which their parent's death
// sends, and the coordinator's sweep after it reaps a dead worker).
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/process.h"

namespace arl {
namespace {

using namespace std::chrono_literals;

// The pids of the processes whose parent is `parent`.
std::set<int> childrenOf(int parent) {
  std::set<int> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    std::sscanf(line.c_str() + close + 2, "%c %d", &state, &ppid);
    if (ppid == parent) out.insert(pid);
  }
  ::closedir(d);
  return out;
}

// The /dev/shm names that the data plane of one of `pids` created.
std::vector<std::string> segmentsOf(const std::set<int>& pids) {
  std::vector<std::string> out;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    for (int pid : pids) {
      if (name.rfind("arl-dp-" + std::to_string(pid) + "-", 0) == 0) out.push_back(name);
    }
  }
  ::closedir(d);
  return out;
}

template <typename F>
bool waitUntil(F done, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

TEST(KillCleanup, AKilledBenchLeavesNoWorkerAndNoSegment) {
  // Large buffers make each run's setup (mapping and touching the rings) long enough to be
  // caught with segments still named.
  const int64_t bench = spawnChild({ARL_LAB_BINARY, "bench", "--workers", "3", "-b", "64M", "-e",
                                    "64M", "-n", "200", "-w", "0", "--data-plane", "shm"});
  std::set<int> workers;
  ASSERT_TRUE(waitUntil(
      [&] {
        workers = childrenOf(static_cast<int>(bench));
        return workers.size() == 3 && !segmentsOf(workers).empty();
      },
      60s))
      << "the bench's 3 workers never created their segments";
  ASSERT_EQ(::kill(static_cast<pid_t>(bench), SIGKILL), 0);
  (void)killAndReap(bench, 5000ms);
  EXPECT_TRUE(waitUntil(
      [&] {
        for (int w : workers) {
          if (processAlive(w)) return false;
        }
        return true;
      },
      10s))
      << "a worker outlived its bench";
  EXPECT_TRUE(waitUntil([&] { return segmentsOf(workers).empty(); }, 5s))
      << segmentsOf(workers).front() << " was left in /dev/shm";
}

}  // namespace
}  // namespace arl
