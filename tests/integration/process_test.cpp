// Child-process helpers (process.h) on real processes: exit statuses, kill and reap, the
// worker binary lookup.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/process.h"

namespace arl {
namespace {

using std::chrono::milliseconds;

TEST(Process, ExitCodeIsReportedAndDescribed) {
  const int64_t pid = spawnChild({"/bin/sh", "-c", "exit 3"});
  ASSERT_GT(pid, 0);
  const auto st = waitFor(pid, milliseconds(5000));
  ASSERT_TRUE(st.has_value());
  EXPECT_FALSE(st->signaled);
  EXPECT_EQ(st->code, 3);
  EXPECT_EQ(st->describe(), "exited with code 3");
  // Reaped: it is gone, and asking again says it is not our child.
  EXPECT_FALSE(processAlive(pid));
  const auto again = tryReap(pid);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->code, -1);
}

TEST(Process, KillAndReapEndsARunningAndAStoppedChild) {
  for (bool stop : {false, true}) {
    const int64_t pid = spawnChild({"/bin/sleep", "30"});
    EXPECT_FALSE(tryReap(pid).has_value());
    EXPECT_TRUE(processAlive(pid));
    if (stop) {
      ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGSTOP), 0);
    }
    const auto st = killAndReap(pid, milliseconds(5000));
    ASSERT_TRUE(st.has_value());
    EXPECT_TRUE(st->signaled);
    EXPECT_EQ(st->signal, SIGKILL);
    EXPECT_EQ(st->describe(), "killed by signal 9 (SIGKILL)");
    EXPECT_FALSE(processAlive(pid));
  }
}

TEST(Process, AFailedExecExitsWith127) {
  const int64_t pid = spawnChild({"/nonexistent/program"});
  const auto st = waitFor(pid, milliseconds(5000));
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->code, 127);
}

TEST(Process, ChildrenGetNoStdinAndNoInheritedDescriptors) {
  // The child lists its open descriptors; only 0, 1, 2 (and the one ls itself opens) remain.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);  // not close-on-exec: spawnChild must close it anyway
  const int64_t pid =
      spawnChild({"/bin/sh", "-c",
                  "for f in /proc/self/fd/*; do n=${f##*/}; [ $n -gt 3 ] && exit 9; done; "
                  "read x && exit 8; exit 0"});
  const auto st = waitFor(pid, milliseconds(5000));
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->code, 0) << "9: a descriptor was inherited; 8: stdin was readable";
}

TEST(Process, WorkerBinaryLookup) {
  EXPECT_EQ(findWorkerBinary(ARL_WORKER_BINARY), ARL_WORKER_BINARY);
  EXPECT_EQ(findWorkerBinary("/nonexistent/allreduce-worker"), "");
  char plain[] = "/tmp/arl-process-test-XXXXXX";  // a regular file without execute permission
  const int fd = ::mkstemp(plain);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(findWorkerBinary(plain), "");
  ::unlink(plain);
  // The test binary lives in build/tests; the worker in build/workers.
  EXPECT_EQ(findWorkerBinary(), selfExeDir() + "/../workers/allreduce-worker");
  EXPECT_FALSE(hostName().empty());
}

}  // namespace
}  // namespace arl
