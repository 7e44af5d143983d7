#include "worker_options.h"

#include <charconv>
#include <cstdlib>

#include "backend/registry.h"
#include "base/errors.h"
#include "runtime/key_store.h"
#include "runtime/protocol.h"

#if ARL_HAVE_GPU
#include "gpu/gpu_backends.h"
#endif

namespace arl::worker {

namespace {

[[noreturn]] void refuse(const std::string& flag, const std::string& value,
                         const std::string& rule) {
  throw ConfigError(flag + " " + value + ": " + rule);
}

int parseInt(const std::string& flag, const std::string& v, int lo, int hi) {
  int x = 0;
  const char* end = v.data() + v.size();
  const auto [p, ec] = std::from_chars(v.data(), end, x);
  if (v.empty() || p != end || ec != std::errc() || x < lo || x > hi) {
    refuse(flag, v, "must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return x;
}

void checkName(const std::string& flag, const std::string& v) {
  if (v.size() > kMaxNameBytes) {
    refuse(flag, v.substr(0, 16) + "...",
           "longer than " + std::to_string(kMaxNameBytes) + " bytes");
  }
}

int deviceOf(const WorkerArgs& a) {
  return a.device.empty() ? -1 : parseInt("--device", a.device, -1, kMaxDeviceIndex);
}

// "cpu, nccl": the backends this build's worker has.
std::string backendList() {
  std::string s;
  for (std::string_view b : builtBackendNames()) s += (s.empty() ? "" : ", ") + std::string(b);
  return s;
}

}  // namespace

void registerGpuBackends([[maybe_unused]] const WorkerArgs& a) {
#if ARL_HAVE_GPU
  gpu::registerGpuBackends(deviceOf(a));
#endif
}

namespace {

// --server-key makes the worker a CURVE client with its own key pair from --keys.
void checkKeys(const WorkerArgs& a, WorkerOptions& o) {
  if (a.serverKey.empty()) {
    if (!a.keys.empty()) {
      refuse("--keys", a.keys, "needs --server-key KEY|FILE, the lab's public key");
    }
    return;
  }
  o.serverKey = readServerKey(a.serverKey);
  const std::string dir = keysFolder(a.keys);
  auto pair = loadKeyPair(dir);
  if (!pair) {
    refuse("--server-key", a.serverKey,
           "needs this worker's own key pair, and " + dir +
               " has none: run 'allreduce-lab keys' and have the lab's owner add the public "
               "key it prints to the lab's allowed_workers");
  }
  o.keys = std::move(*pair);
}

}  // namespace

void declareOptions(CLI::App& app, WorkerArgs& a) {
  app.description(
      "Joins the allreduce-lab coordinator at the given control endpoint and runs the\n"
      "collectives it is sent. Leaves when the coordinator says so or goes silent.");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--connect", a.connect, "the coordinator's control endpoint (printed by the lab)")
      ->type_name("ENDPOINT")
      ->required();
  app.add_option("--backend", a.backend,
                 "buffers and reductions: " + backendList() +
                     " (nccl runs NCCL's own collectives, with --device)")
      ->type_name("NAME");
  app.add_option("--name", a.name, "display name (default HOST:PID)")->type_name("NAME");
  app.add_option("--device", a.device, "accelerator index (default: none; cuda uses device 0)")
      ->type_name("N");
  app.add_option("--host", a.host,
                 "host name to report (default: this machine's); ranks on\n"
                 "different hosts exchange data over tcp://")
      ->type_name("NAME");
  app.add_option("--server-key", a.serverKey,
                 "the lab's public key (Z85, or its curve.pub file): join over CURVE,\n"
                 "encrypted, as the key pair in --keys; the lab's join command shows it")
      ->type_name("KEY|FILE");
  app.add_option("--keys", a.keys,
                 "folder of this worker's key pair (allreduce-lab keys); default\n"
                 "$XDG_CONFIG_HOME/allreduce-lab or ~/.config/allreduce-lab")
      ->type_name("DIR");
  // Set by the lab when it spawns a local worker; not for users.
  app.add_option("--parent-pid", a.parentPid)->group("");
  app.add_flag("-v,--verbose", a.verbose, "log every control message");
}

WorkerOptions toOptions(const WorkerArgs& a) {
  WorkerOptions o;
  if (!validEndpoint(a.connect) || a.connect.rfind("inproc://", 0) == 0 ||
      a.connect.rfind("shm://", 0) == 0) {
    refuse("--connect", a.connect, "not an endpoint (expected tcp://HOST:PORT or ipc://PATH)");
  }
  o.connect = a.connect;
  if (auto why = backendUnavailable(a.backend)) refuse("--backend", a.backend, *why);
  o.backend = a.backend;
  o.device = deviceOf(a);
  if (o.backend == "nccl" && o.device < 0) {
    refuse("--backend", o.backend, "needs --device N: NCCL runs one rank per GPU");
  }
  // A device backend without --device uses device 0, and says so in its Hello.
  if (o.device < 0 && findBackend(o.backend)->memory == MemoryKind::Device) o.device = 0;
#if ARL_HAVE_GPU
  if (auto why = gpu::gpuWorkerProblem(o.backend, o.device)) throw ConfigError(*why);
#endif
  checkName("--name", a.name);
  checkName("--host", a.host);
  o.name = a.name;
  o.hostName = a.host;
  o.placement = launchPlacement([](const char* name) { return std::getenv(name); });
  if (o.hostName.empty() && !o.placement.host.empty()) {
    checkName("SLURMD_NODENAME", o.placement.host);
    o.hostName = o.placement.host;
  }
  if (!a.parentPid.empty()) o.parentPid = parseInt("--parent-pid", a.parentPid, 1, 1 << 30);
  o.verbose = a.verbose;
  checkKeys(a, o);
  return o;
}

}  // namespace arl::worker
