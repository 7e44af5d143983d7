// Cluster launchers' command lines, host lists and hostfiles, and where a worker reads its
// placement: built without running anything (the runs are in tests/integration/).
#include "runtime/launcher.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "base/errors.h"

namespace arl {
namespace {

using Argv = std::vector<std::string>;

const Argv kWorker = {"/opt/arl/allreduce-worker", "--connect", "tcp://10.0.0.1:5555",
                      "--server-key", "a&b$c"};

TEST(Launcher, MpirunRunsTheWorkersOfItsHostfile) {
  LaunchSpec s;
  s.kind = LauncherKind::Mpirun;
  s.hostfile = "hosts.txt";
  s.tasks = 4;
  s.extra = {"--mca", "plm_rsh_agent", "/tmp/agent"};
  const auto cmds = launcherCommands(s, kWorker, true);
  ASSERT_EQ(cmds.size(), 1u);
  Argv want = {"mpirun", "--hostfile",    "hosts.txt", "-np", "4", "--allow-run-as-root",
               "--mca",  "plm_rsh_agent", "/tmp/agent"};
  want.insert(want.end(), kWorker.begin(), kWorker.end());
  EXPECT_EQ(cmds[0], want);
  EXPECT_EQ(launchedWorkers(s), 4);
  EXPECT_EQ(launcherCommands(s, kWorker, false)[0][5], "--mca");  // no root flag
}

TEST(Launcher, SrunTakesNodesAndTasks) {
  LaunchSpec s;
  s.kind = LauncherKind::Srun;
  s.program = "/usr/bin/srun";
  s.nodes = 2;
  s.tasks = 8;
  Argv want = {"/usr/bin/srun", "-N", "2", "-n", "8"};
  want.insert(want.end(), kWorker.begin(), kWorker.end());
  EXPECT_EQ(launcherCommands(s, kWorker, true), std::vector<Argv>{want});
  EXPECT_EQ(launchedWorkers(s), 8);
  s.tasks = 0;  // srun's default: one task a node
  EXPECT_EQ(launchedWorkers(s), 2);
  EXPECT_EQ(launcherCommands(s, kWorker, true)[0][4], "2");
  s.nodes = 0;
  EXPECT_EQ(launchedWorkers(s), 1);
}

TEST(Launcher, SshRunsOneWorkerPerSlotWithItsPlacement) {
  LaunchSpec s;
  s.kind = LauncherKind::Ssh;
  s.hosts = {{"a", 1}, {"me@b", 2}};
  const auto cmds = launcherCommands(s, kWorker, true);
  ASSERT_EQ(cmds.size(), 3u);
  EXPECT_EQ(launchedWorkers(s), 3);
  EXPECT_EQ(cmds[0], (Argv{"ssh", "-o", "BatchMode=yes", "a",
                           "env ARL_LAUNCH_RANK=0 ARL_LAUNCH_LOCAL_RANK=0 "
                           "/opt/arl/allreduce-worker --connect tcp://10.0.0.1:5555 "
                           "--server-key 'a&b$c'"}));
  EXPECT_EQ(cmds[2][3], "me@b");
  EXPECT_NE(cmds[2][4].find("ARL_LAUNCH_RANK=2 ARL_LAUNCH_LOCAL_RANK=1 "), std::string::npos);
}

TEST(Launcher, ParsesSshHostsAndRefusesWhatIsNotOne) {
  EXPECT_EQ(parseSshHosts("a,b:2,user@c.example:4"),
            (std::vector<SshHost>{{"a", 1}, {"b", 2}, {"user@c.example", 4}}));
  for (const char* bad : {"", "a,,b", "a:0", "a:65", "a:x", "-oProxyCommand=x", "a b", "a:"}) {
    EXPECT_THROW(parseSshHosts(bad), ConfigError) << bad;
  }
  try {
    parseSshHosts("a,b:0");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'b:0'"), std::string::npos) << e.what();
  }
}

TEST(Launcher, CountsAHostfilesSlots) {
  EXPECT_EQ(
      hostfileSlots("# the cluster\nnode1 slots=2 max_slots=4\nnode2\n\n  node3 slots=3 # x\n"), 6);
  EXPECT_EQ(hostfileSlots("n1 max_slots=4 slots=2\n"), 2);
  EXPECT_EQ(hostfileSlots("# none\n"), 0);
  try {
    hostfileSlots("n1\nn2 slots=zero\n");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

TEST(Launcher, ReadsThePlacementOfEachLauncher) {
  std::map<std::string, std::string> env;
  const auto get = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(launchPlacement(get).rank, -1);
  EXPECT_EQ(launchPlacement(get).localRank, -1);
  EXPECT_EQ(launchPlacement(get).host, "");
  env = {{"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "1"}, {"SLURMD_NODENAME", "node7"}};
  EXPECT_EQ(launchPlacement(get).rank, 5);
  EXPECT_EQ(launchPlacement(get).localRank, 1);
  EXPECT_EQ(launchPlacement(get).host, "node7");
  env["OMPI_COMM_WORLD_RANK"] = "3";  // mpirun's comes first
  env["OMPI_COMM_WORLD_LOCAL_RANK"] = "0";
  EXPECT_EQ(launchPlacement(get).rank, 3);
  EXPECT_EQ(launchPlacement(get).localRank, 0);
  env = {{"ARL_LAUNCH_RANK", "7"}, {"ARL_LAUNCH_LOCAL_RANK", "2"}};
  EXPECT_EQ(launchPlacement(get).rank, 7);
  env = {{"SLURM_PROCID", "64"}};
  try {
    launchPlacement(get);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_PROCID='64'"), std::string::npos) << e.what();
  }
  env = {{"OMPI_COMM_WORLD_RANK", "1x"}};
  EXPECT_THROW(launchPlacement(get), ConfigError);
}

}  // namespace
}  // namespace arl
