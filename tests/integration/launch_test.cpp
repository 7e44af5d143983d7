// `allreduce-lab bench --launch`: cluster launchers start the remote workers. mpirun and ssh
// run for real across emulated hosts (network namespaces with host names of their own, as
// docs/hosts.md makes them): mpirun reaches a host through a launch agent, and ssh is a
// stand-in on PATH, both running the command inside the host's namespace as sshd would. srun
// is a stand-in on PATH that sets Slurm's task variables and starts the tasks itself. Every
// test checks that the ranks follow the launcher's placement, not the order of joining, and
// that nothing of the launcher or its workers is left running.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "../run_binary.h"
#include "emulated_hosts.h"

namespace arl {
namespace {

using test::EmulatedHosts;
using testutil::runBinary;

// A folder of its own for each test, removed at the end.
struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "arl-launch-XXXXXX";
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { EmulatedHosts::shell("rm -rf '" + path + "'"); }
  std::string write(const std::string& name, const std::string& text, bool executable = false) {
    const std::string file = path + "/" + name;
    std::ofstream(file) << text;
    if (executable) ::chmod(file.c_str(), 0755);
    return file;
  }
};

// Processes whose environment holds `mark` (the launcher and every worker inherit it).
int processesMarked(const std::string& mark) {
  int n = 0;
  DIR* d = ::opendir("/proc");
  while (dirent* e = d != nullptr ? ::readdir(d) : nullptr) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/environ");
    const std::string env((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (env.find(mark) != std::string::npos && processAlive(std::stoll(e->d_name))) ++n;
  }
  if (d != nullptr) ::closedir(d);
  return n;
}

// The bench's rank lines: "Rank  0 ... on HOST (... launch rank 0 (0 on its host))".
std::vector<std::pair<std::string, int>> ranksOf(const std::string& out) {
  std::vector<std::pair<std::string, int>> ranks;
  const std::regex line(R"(#  Rank +(\d+) Pid +\d+ on (\S+) \(.*launch rank (\d+) )");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it) {
    EXPECT_EQ(std::stoi((*it)[1]), static_cast<int>(ranks.size())) << out;
    ranks.emplace_back((*it)[2], std::stoi((*it)[3]));
  }
  return ranks;
}

const std::string kSizes = " -b 4K -e 4K -n 2 -w 1";
const std::string kSmallSweep = " --algo ring" + kSizes;

TEST(Launch, ALauncherThatExitsEarlyFailsTheWaitAtOnceNamingIt) {
  TempDir dir;
  dir.write("mpirun", "#!/bin/sh\necho 'mpirun: no route to arl-hX' >&2\nexit 3\n", true);
  const std::string hostfile = dir.write("hosts", "arl-hX slots=2\n");
  const auto start = std::chrono::steady_clock::now();
  const auto r = runBinary("/usr/bin/env", "PATH='" + dir.path + "':\"$PATH\" '" +
                                               std::string(ARL_LAB_BINARY) +
                                               "' bench --launch mpirun --hostfile '" + hostfile +
                                               "' --listen 'tcp://127.0.0.1:*'" + kSmallSweep);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("mpirun: no route to arl-hX"), std::string::npos) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex(R"(mpirun \(pid \d+\), a launcher of the remote workers, exited with )"
                        R"(code 3 before its workers joined \(0 of 2 remote workers)")))
      << r.err;
  // The remote join timeout is minutes; a launcher's exit is noticed within a tick.
  EXPECT_LT(s, 20.0);
}

TEST(Launch, RefusesALauncherWithoutItsHostsOrOptionsItDoesNotTake) {
  const std::string lab = ARL_LAB_BINARY;
  auto r = runBinary(lab, "bench --launch ssh --listen 'tcp://127.0.0.1:*'");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--launch ssh: needs --hosts"), std::string::npos) << r.err;
  r = runBinary(lab, "bench --launch mpirun --hostfile /nonexistent --listen 'tcp://127.0.0.1:*'");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--hostfile /nonexistent"), std::string::npos) << r.err;
  r = runBinary(lab, "bench --launch srun --hosts a,b --listen 'tcp://127.0.0.1:*'");
  EXPECT_EQ(r.rc, 2);
  r = runBinary(lab, "bench --hosts a,b");
  EXPECT_NE(r.err.find("--hosts a,b: needs --launch"), std::string::npos) << r.err;
  r = runBinary(lab, "bench --launch ssh --hosts a:0 --listen 'tcp://127.0.0.1:*'");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("'a:0'"), std::string::npos) << r.err;
}

// Slurm's srun, stood in for: -N nodes -n tasks, each task with SLURM_PROCID, SLURM_LOCALID,
// SLURM_NODEID and SLURMD_NODENAME, started last first so that they join in the reverse of
// their placement.
const char* kFakeSrun = R"(#!/bin/sh
nodes=1; tasks=1
while [ $# -gt 0 ]; do
  case $1 in -N) nodes=$2; shift 2 ;; -n) tasks=$2; shift 2 ;; *) break ;; esac
done
echo "-N $nodes -n $tasks $*" > "$(dirname "$0")/srun.args"
per=$(( (tasks + nodes - 1) / nodes )); i=$((tasks - 1))
while [ $i -ge 0 ]; do
  SLURM_PROCID=$i SLURM_LOCALID=$((i % per)) SLURM_NODEID=$((i / per)) \
    SLURMD_NODENAME=node$((i / per)) "$@" &
  sleep 0.3; i=$((i - 1))
done
wait
)";

TEST(Launch, SrunPlacesTheRanksByProcidAndNodeName) {
  TempDir dir;
  dir.write("srun", kFakeSrun, true);
  const std::string mark = "ARL_LAUNCH_TEST=" + std::to_string(::getpid()) + "srun";
  const auto r = runBinary("/usr/bin/env", mark + " PATH='" + dir.path + "':\"$PATH\" '" +
                                               std::string(ARL_LAB_BINARY) +
                                               "' bench --launch srun --nodes 2 --np 4 "
                                               "--listen 'tcp://127.0.0.1:*'" +
                                               kSmallSweep);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const std::string args = testutil::slurp(dir.path + "/srun.args");
  EXPECT_EQ(args.rfind("-N 2 -n 4 ", 0), 0u) << args;
  EXPECT_NE(args.find("allreduce-worker --connect tcp://127.0.0.1:"), std::string::npos) << args;
  const auto ranks = ranksOf(r.out);
  ASSERT_EQ(ranks.size(), 4u) << r.out;
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(ranks[k].first, "node" + std::to_string(k / 2)) << r.out;
    EXPECT_EQ(ranks[k].second, k) << r.out;
  }
  EXPECT_NE(r.out.find("shm inside hosts, tcp across (2 hosts)"), std::string::npos) << r.out;
  EXPECT_EQ(processesMarked(mark), 0);
}

// The lab's keys for a listen beyond loopback: the workers join with the lab's own pair.
std::string keysArgs(TempDir& dir) {
  const std::string keys = dir.path + "/keys";
  EXPECT_EQ(EmulatedHosts::shell("'" + std::string(ARL_LAB_BINARY) + "' keys --dir '" + keys +
                                 "' >/dev/null"),
            0);
  return " --keys '" + keys + "' --allow '" + dir.write("allowed", "") + "'";
}

// Slurm itself where this machine runs it (slurmctld and slurmd: Debian's slurm-wlm as one
// node, or one slurmd per emulated host): srun's own allocation, task launch and environment.
// The lab listens on every address, so that nodes in other namespaces reach it too.
TEST(Launch, SrunOfThisMachinesSlurmStartsTheWorkersInItsOrder) {
  if (EmulatedHosts::shell("command -v srun >/dev/null && timeout 5 sinfo -h -t idle,mix -o %n "
                           "2>/dev/null | grep -q .") != 0) {
    GTEST_SKIP() << "no Slurm here: srun, and sinfo listing an idle node";
  }
  TempDir dir;
  const std::string mark = "ARL_LAUNCH_TEST=" + std::to_string(::getpid()) + "slurm";
  const auto r = runBinary("/usr/bin/env", mark + " '" + std::string(ARL_LAB_BINARY) +
                                               "' bench --launch srun --np 2 --listen "
                                               "'tcp://0.0.0.0:*'" +
                                               keysArgs(dir) + kSmallSweep);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const auto ranks = ranksOf(r.out);
  ASSERT_EQ(ranks.size(), 2u) << r.out;
  for (int k = 0; k < 2; ++k) EXPECT_EQ(ranks[k].second, k) << r.out;
  EXPECT_EQ(processesMarked(mark), 0);
}

// What sshd would do on host arl-hI: run the command line in its namespace, under its host
// name. Serves as ssh itself (options -o X first) and as mpirun's launch agent.
std::string remoteShell(const EmulatedHosts& hosts) {
  return "#!/bin/sh\nwhile [ \"$1\" = -o ]; do shift 2; done\nhost=$1; shift\n"
         "exec ip netns exec arl-" +
         hosts.name() +
         "-h\"${host#arl-h}\" unshare --uts sh -c 'hostname \"$0\" && exec sh -c \"$1\"' "
         "\"$host\" \"$*\"\n";
}

TEST(Launch, MpirunStartsTheWorkersOnTheHostsOfItsHostfileInItsOrder) {
  SKIP_WITHOUT_HOSTS();
  EmulatedHosts hosts(2);
  TempDir dir;
  const std::string agent = dir.write("agent", remoteShell(hosts), true);
  // Host 1 first: its ranks come first although the two hosts join in any order.
  const std::string hostfile = dir.write("hosts", "arl-h1 slots=2\narl-h0 slots=2\n");
  const std::string mark = "ARL_LAUNCH_TEST=" + std::to_string(::getpid()) + "mpirun";
  // mpirun's daemons call home on the bridge's network, not on this machine's others.
  const std::string subnet = hosts.address().substr(0, hosts.address().rfind('.')) + ".0/24";
  const auto r =
      runBinary("/usr/bin/env",
                mark + " '" + std::string(ARL_LAB_BINARY) + "' bench --launch mpirun --hostfile '" +
                    hostfile + "' --mca plm_rsh_agent '" + agent + "' --mca oob_tcp_if_include '" +
                    subnet + "' --listen 'tcp://" + hosts.address() + ":*'" + keysArgs(dir) +
                    " --algo ring,hierarchical" + kSizes);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const auto ranks = ranksOf(r.out);
  ASSERT_EQ(ranks.size(), 4u) << r.out;
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(ranks[k].first, k < 2 ? "arl-h1" : "arl-h0") << r.out;
    EXPECT_EQ(ranks[k].second, k) << r.out;
  }
  EXPECT_NE(r.out.find("shm inside hosts, tcp across (2 hosts)"), std::string::npos) << r.out;
  EXPECT_EQ(processesMarked(mark), 0);
}

TEST(Launch, SshStartsOneWorkerPerSlotOnEachHost) {
  SKIP_WITHOUT_HOSTS();
  EmulatedHosts hosts(2);
  TempDir dir;
  dir.write("ssh", remoteShell(hosts), true);
  const std::string mark = "ARL_LAUNCH_TEST=" + std::to_string(::getpid()) + "ssh";
  const auto r = runBinary(
      "/usr/bin/env", mark + " PATH='" + dir.path + "':\"$PATH\" '" + std::string(ARL_LAB_BINARY) +
                          "' bench --launch ssh --hosts arl-h1,arl-h0:2 --listen 'tcp://" +
                          hosts.address() + ":*'" + keysArgs(dir) + kSmallSweep);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  const auto ranks = ranksOf(r.out);
  ASSERT_EQ(ranks.size(), 3u) << r.out;
  const char* want[] = {"arl-h1", "arl-h0", "arl-h0"};
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(ranks[k].first, want[k]) << r.out;
    EXPECT_EQ(ranks[k].second, k) << r.out;
  }
  EXPECT_EQ(processesMarked(mark), 0);
}

}  // namespace
}  // namespace arl
