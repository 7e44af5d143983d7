#include "runtime/launcher.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <initializer_list>

#include "base/errors.h"
#include "base/limits.h"
#include "runtime/mpi_launch.h"

namespace arl {

std::string_view launcherName(LauncherKind k) {
  switch (k) {
    case LauncherKind::Mpirun: return "mpirun";
    case LauncherKind::Srun: return "srun";
    case LauncherKind::Ssh: return "ssh";
  }
  return "?";
}

int launchedWorkers(const LaunchSpec& spec) {
  if (spec.kind == LauncherKind::Ssh) {
    int n = 0;
    for (const SshHost& h : spec.hosts) n += h.slotCount;
    return n;
  }
  if (spec.tasks > 0) return spec.tasks;
  return spec.kind == LauncherKind::Srun && spec.nodes > 0 ? spec.nodes : 1;
}

namespace {

std::string programOf(const LaunchSpec& spec) {
  return spec.program.empty() ? std::string(launcherName(spec.kind)) : spec.program;
}

// One ssh per worker: BatchMode, since nobody is there to type a password (stdin is
// /dev/null), and the placement in front of the worker's command line.
std::vector<std::vector<std::string>> sshCommands(const LaunchSpec& spec,
                                                  const std::vector<std::string>& worker) {
  std::vector<std::vector<std::string>> out;
  int rank = 0;
  for (const SshHost& h : spec.hosts) {
    for (int local = 0; local < h.slotCount; ++local, ++rank) {
      std::vector<std::string> remote = {"env", "ARL_LAUNCH_RANK=" + std::to_string(rank),
                                         "ARL_LAUNCH_LOCAL_RANK=" + std::to_string(local)};
      remote.insert(remote.end(), worker.begin(), worker.end());
      std::vector<std::string> argv = {programOf(spec), "-o", "BatchMode=yes"};
      argv.insert(argv.end(), spec.extra.begin(), spec.extra.end());
      argv.push_back(h.host);
      argv.push_back(shellLine(remote));
      out.push_back(std::move(argv));
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<std::string>> launcherCommands(const LaunchSpec& spec,
                                                       const std::vector<std::string>& worker,
                                                       bool root) {
  if (spec.kind == LauncherKind::Ssh) return sshCommands(spec, worker);
  std::vector<std::string> argv = {programOf(spec)};
  if (spec.kind == LauncherKind::Mpirun) {
    if (!spec.hostfile.empty()) argv.insert(argv.end(), {"--hostfile", spec.hostfile});
    argv.insert(argv.end(), {"-np", std::to_string(launchedWorkers(spec))});
    if (root) argv.emplace_back("--allow-run-as-root");
  } else {
    if (spec.nodes > 0) argv.insert(argv.end(), {"-N", std::to_string(spec.nodes)});
    argv.insert(argv.end(), {"-n", std::to_string(launchedWorkers(spec))});
  }
  argv.insert(argv.end(), spec.extra.begin(), spec.extra.end());
  argv.insert(argv.end(), worker.begin(), worker.end());
  return {argv};
}

namespace {

bool hostChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_' ||
         c == '@';
}

// "0".."63", else -1.
int rankValue(std::string_view text) {
  int v = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return -1;
  return v >= 0 && v < kMaxRanks ? v : -1;
}

}  // namespace

std::vector<SshHost> parseSshHosts(std::string_view text) {
  std::vector<SshHost> hosts;
  const std::string rule =
      "expected HOST[:SLOTS][,HOST[:SLOTS]...], SLOTS in 1.." + std::to_string(kMaxRanks);
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view part = text.substr(start, comma - start);
    const size_t colon = part.find(':');
    SshHost h{std::string(part.substr(0, colon)), 1};
    const bool nameOk = !h.host.empty() && h.host.front() != '-' &&
                        std::all_of(h.host.begin(), h.host.end(), hostChar);
    if (colon != std::string_view::npos) h.slotCount = rankValue(part.substr(colon + 1));
    if (!nameOk || h.slotCount < 1) {
      throw ConfigError("'" + std::string(part) + "' in '" + std::string(text) + "': " + rule);
    }
    hosts.push_back(std::move(h));
    start = comma + 1;
  }
  return hosts;
}

int hostfileSlots(std::string_view text) {
  int total = 0, lineNo = 0;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++lineNo;
    line = line.substr(0, line.find('#'));
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) continue;
    int slots = 1;
    const size_t at = line.find(" slots=");
    if (at != std::string_view::npos) {
      std::string_view v = line.substr(at + 7);
      v = v.substr(0, v.find_first_of(" \t\r"));
      slots = rankValue(v);
      if (slots < 1) {
        throw ConfigError("line " + std::to_string(lineNo) + ": slots='" + std::string(v) +
                          "' is not a count in 1.." + std::to_string(kMaxRanks));
      }
    }
    total += slots;
  }
  return total;
}

namespace {

// The first variable of `names` that is set, as a rank; -1 when none is.
int rankFromEnv(const std::function<const char*(const char*)>& env,
                std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* v = env(name);
    if (v == nullptr) continue;
    const int r = rankValue(v);
    if (r < 0) {
      throw ConfigError(std::string(name) + "='" + v + "' is not a rank in 0.." +
                        std::to_string(kMaxRanks - 1));
    }
    return r;
  }
  return -1;
}

}  // namespace

LaunchPlacement launchPlacement(const std::function<const char*(const char*)>& env) {
  LaunchPlacement p;
  p.rank = rankFromEnv(env, {"OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "ARL_LAUNCH_RANK"});
  p.localRank =
      rankFromEnv(env, {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "ARL_LAUNCH_LOCAL_RANK"});
  if (const char* node = env("SLURMD_NODENAME")) p.host = node;
  return p;
}

}  // namespace arl
