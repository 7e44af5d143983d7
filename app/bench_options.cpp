#include "bench_options.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>

#include "backend/registry.h"
#include "base/errors.h"
#include "base/input_file.h"
#include "base/limits.h"
#include "exec/collective_library.h"
#include "exec/run_request.h"
#include "runtime/mpi_launch.h"
#include "runtime/protocol.h"
#include "runtime/run_types.h"
#include "schedule/generators.h"
#include "schedule/msccl_import.h"
#include "transport/shm/shm_transport.h"
#include "transport/transport.h"

namespace arl::app {

namespace {

// What the command does, after its options in --help.
constexpr const char* kAbout =
    "Runs collectives on worker processes (shared memory or ZeroMQ between them), on real "
    "buffers with real reductions, and prints nccl-tests' table: time, algbw, busbw and "
    "#wrong per size and algorithm, beside the cost model's prediction. Flags and meanings "
    "follow nccl-tests. A chunk is a piece of the buffer that a schedule step moves; a slice is "
    "the pipeline "
    "unit, the most bytes one message carries.\n"
    "Exit status: 0 when every run completed and no element was wrong; 1 when a run failed "
    "or an element was wrong; 2 on bad arguments; 128+N when stopped by signal N.";

// More sizes than this is a mistake in -b, -e and the step, not a sweep anyone waits for.
constexpr size_t kMaxSizes = 1000;

void checkOutputPath(const Arg& a) {
  if (a.text.empty()) throw refuse(a, "needs a file name");
  struct stat st {};
  if (::stat(a.text.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw refuse(a, "is a directory");
  const auto slash = a.text.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : a.text.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw refuse(a, "directory '" + dir + "' does not exist");
  }
  if (::access(dir.c_str(), W_OK) != 0) throw refuse(a, "directory '" + dir + "' is not writable");
}

// bench's flags for the fields of its run requests that commands name differently.
constexpr RunFieldFlags kRunFlags{"--workers", "--maxbytes", "--warmup_iters"};

RunRequest requestOf(const BenchConfig& c, const std::string& algo, uint64_t bytes,
                     uint64_t sliceBytes, int inflight) {
  return sweepRequest(sweepSpecOf(c, {}), SweepPoint{bytes, algo, sliceBytes, inflight},
                      nranksOf(c));
}

}  // namespace

int nranksOf(const BenchConfig& c) { return c.workers + c.expect; }

BenchOptions::BenchOptions(CLI::App& lab, const std::vector<std::string>& args)
    : app_(lab.add_subcommand("bench", "run collectives on worker processes, nccl-tests style")),
      opts_(app_, args) {
  app_->footer(wrap(kAbout, 92) + "\n");
  declare();
}

// The cluster launchers' options, in the Workers group (checkLaunch reads them).
void BenchOptions::declareLaunch() {
  Options& o = opts_;
  o.value("--launch", "NAME",
          "start the remote workers with a cluster launcher: mpirun (Open MPI, --hostfile), "
          "srun (Slurm) or ssh (--hosts), each running allreduce-worker --connect to --listen "
          "with these keys; ranks follow the launcher's placement (docs/hosts.md)");
  o.value("--hostfile", "FILE", "--launch mpirun: Open MPI's hostfile (HOST slots=N a line)");
  o.value("--np", "N",
          "--launch mpirun or srun: the workers to start (mpirun -np, srun -n; default: the "
          "hostfile's slots, srun's --nodes)");
  o.value("--nodes", "N", "--launch srun: the nodes (srun -N)");
  o.value("--hosts", "HOST[:SLOTS],...", "--launch ssh: the hosts and the workers on each");
}

// The slices, their order and the algorithms' shapes (the Operation group's second half).
void BenchOptions::declarePipeline() {
  Options& o = opts_;
  o.value("--slice,--chunk", "SIZE[,SIZE...]",
          "pipeline slice sizes to sweep, in bytes, e.g. 64K,256K,1M (default 1M); --chunk is "
          "its older name");
  o.value("--inflight", "K[,K...]",
          "slices in flight per rank to sweep, 1.." + std::to_string(kMaxInflight) +
              ", e.g. 1,2,4,8 (default 4)");
  o.value("--window", "W",
          "ring: slices each step takes together, 1.." + std::to_string(kMaxInflight) +
              ": a rank sends W slices before it waits for one, as NCCL's FIFO lets it (default 1, "
              "slice by slice; other algorithms ignore it)");
  o.value("--radix", "K", "knomial's radix, 2..N (2: binomial; default 4, or N when fewer ranks)");
  o.value("--ring-order", "LIST",
          "the ring as a permutation of the ranks 0..N-1, N = --workers + --expect, e.g. "
          "0,2,1,3 (default 0,1,...,N-1)");
}

void BenchOptions::declare() {
  Options& o = opts_;
  o.group("Sizes (bytes; K, M, G = 2^10, 2^20, 2^30; the collective's total, as in nccl-tests)");
  o.value("-b,--minbytes", "SIZE", "smallest size (default 32M)");
  o.value("-e,--maxbytes", "SIZE", "largest size (default 32M)");
  o.value("-f,--stepfactor", "F", "multiply the size by F (>= 2) between runs");
  o.value("-i,--stepbytes", "SIZE", "or add SIZE between runs (default 1M; not with -f)");
  o.group("Operation");
  o.value("--collective", "NAME",
          "allreduce, reducescatter, allgather, reduce, broadcast (default allreduce)");
  o.value("--schedule", "FILE.xml",
          "an MSCCL algorithm file to run instead of --algo (docs/msccl.md): its collective, "
          "its ranks (the default --workers) and rows labelled msccl:NAME");
  o.value("--algo", "NAME[,NAME...]",
          "algorithms to compare, or 'all' (every one that implements the collective); default "
          "ring. Known: " +
              algorithmList());
  o.value("-o,--op", "NAME", "sum, prod, min, max, avg (default sum)");
  o.value("-d,--datatype,--dtype", "NAME",
          "float, double, half, bfloat16, int32, int64, uint8 (default float)");
  o.value("-r,--root", "R", "root of reduce and broadcast (default 0)");
  o.flag("--in-place", &inPlace_, "run in place (NCCL's in-place buffers)");
  declarePipeline();
  o.group("Performance");
  o.value("-n,--iters", "N", "timed iterations per run (default 20)");
  o.value("-w,--warmup_iters,--warmup", "N", "untimed iterations before them (default 5)");
  o.value("-c,--check", "N",
          "iterations whose result is checked element by element: 0 none, 1 the last timed "
          "one (default), N that one and N-1 more run after it, untimed, each into a poisoned "
          "output (nccl-tests' -c N)");
  o.group("Workers");
  o.value("--workers", "N", "local worker processes to start (default 4)");
  o.value("--expect", "N", "remote workers to wait for (default 0)");
  o.value("--listen", "tcp://ADDR:PORT",
          "control endpoint for remote workers; the command that joins one is printed on stderr");
  declareLaunch();
  o.value("--ranks-per-host", "K", "ranks per host for hierarchical (default: from host names)");
  o.value("--backend", "NAME[,NAME...]",
          "cpu, mpi (Open MPI under mpirun), gloo (Gloo's collectives on cpu workers); cuda and "
          "nccl need a CUDA build; default cpu. A list such as cpu,mpi,gloo runs each --algo on "
          "the lab's code and on each engine's counterpart (ring: mpi-ring, gloo-ring), one row "
          "each, the engines' timed whole");
  o.value("--device", "N[,N...]",
          "GPU of the local workers (cuda, nccl): one index for all, or one per local worker; "
          "nccl's default: 0,1,...");
  o.value("--nccl-algo", "NAME[,NAME...]",
          "NCCL's own collectives to run beside --algo (ring, tree: NCCL_ALGO), shown as "
          "nccl-ring, nccl-tree and timed whole; with --backend nccl the default is ring");
  o.repeated("--mca", "NAME VALUE",
             "an Open MPI parameter for the workers' mpirun, e.g. --mca btl self,vader (the "
             "transport); repeatable; needs mpi in --backend");
  app_->get_option("--mca")->expected(2);
  o.value("--mpi-algo", "NAME[,NAME...]",
          "Open MPI's own algorithms to run (default, linear, nonoverlapping, "
          "recursive-doubling, ring, segmented-ring, rabenseifner: coll_tuned's forced "
          "algorithm, set per run), shown as mpi-NAME and timed whole; needs mpi in --backend");
  o.value("--data-plane", "NAME",
          "auto, shm, zmq or tcp: shared memory, ZeroMQ or plain TCP between workers (default "
          "auto: shm when every worker is on one host)");
  o.value("--cuda-ipc", "on|off",
          "cuda workers of one host read each other's slices in place, device to device "
          "(default on); off stages every slice through host memory and the data plane");
  o.value("--stall-timeout", "TIME",
          "fail a run when no rank makes progress for TIME, e.g. 500ms, 30s (default 20s); a "
          "rank that waits while others work is not failing");
  declareShaping(o);
  o.group("Keys (docs/security.md)");
  declareSecurity(o, &insecure_);
  o.group("Teaching");
  o.value("--mismatch-rank", "R",
          "rank R runs the collective on twice the count, as a rank that disagrees with the "
          "others would: the header check must fail the run at the first message, naming the "
          "ranks (docs/lessons.md; default: none)");
  o.value("--data", "KIND",
          "checkable (default): inputs whose sums are exact in any order, so every element is "
          "checked; random: seeded random floats whose sums depend on the order of addition, "
          "not checked: each rank reports a digest of its output and its first elements' bits "
          "(JSON \"output\"; docs/lessons.md, the determinism lesson)");
  o.group("Telemetry and outputs");
  o.value("--telemetry", "LEVEL", "off, steps or chunks (default chunks; docs/telemetry.md)");
  o.value("--max-events", "N",
          "telemetry events kept per run, all ranks together (default 1000000; the rest are "
          "dropped and counted)");
  o.value("--json", "FILE", "results as JSON ({\"config\": ..., \"results\": [...]})");
  o.value("-J,--nccl-tests-json", "FILE",
          "results in nccl-tests' -J JSON (2.19.6), which its tools/analyze_perf_json.py reads");
  o.value("-I,--per_iter_timing", "0|1",
          "1: nccl-tests' per-iteration summary (i_min, i_max, i_p99, i_cv% columns; with -J, "
          "each result's per-iteration block)");
  o.value("--csv", "FILE", "results as CSV");
  o.value("--trace", "FILE", "Chrome trace-event JSON for ui.perfetto.dev");
  o.value("--record", "FILE", "a recording of everything, for replay and export (FILE.arlrec)");
  o.value("--flight-record", "FILE",
          "every failed run's flight record as JSON: each rank's last collectives, the step "
          "where the run failed and the ranks that never reached it (docs/reliability.md)");
}

BenchArgs BenchOptions::check() const {
  BenchArgs a;
  BenchConfig& c = a.cfg;
  c.inPlace = inPlace_;
  checkWorkers(c, a.launch);
  checkOperation(c);
  checkTelemetry(c);
  checkPipeline(c);
  checkAlgorithms(c);
  a.notes = checkEngines(c);
  checkDevices(c);
  a.sizes = checkSizes(c);
  checkOutputs(c);
  checkRuns(a);
  // Last: what the command asks must be right before this host's devices are looked at.
  checkDevicesUsable(c);
  return a;
}

// --backend NAME, or a list of host-memory backends whose engines run beside the lab's
// algorithms (cpu,mpi): the local workers take mpi when the list has it (mpi's workers run
// the lab's schedules on the CPU too), else the first.
void checkBackends(const Arg& v, BenchConfig& c) {
  const std::vector<std::string> list = parseNameList(v);
  for (const std::string& b : list) {
    // Gloo is an engine, not a worker backend: its ranks are the host-memory workers.
    if (b == "gloo") {
      if (auto why = libraryMissing("gloo")) throw refuse(Arg{v.flag, b}, *why);
      continue;
    }
    if (auto why = backendUnavailable(b)) throw refuse(Arg{v.flag, b}, *why);
    if (list.size() > 1 && findBackend(b)->memory != MemoryKind::Host) {
      throw refuse(v, "a list of backends names cpu and engines on host memory (mpi); " + b +
                          " holds device memory: run it alone");
    }
  }
  const auto has = [&](const char* b) {
    return std::find(list.begin(), list.end(), b) != list.end();
  };
  c.backend = has("mpi") ? "mpi" : list.front() == "gloo" ? "cpu" : list.front();
  if (list.size() > 1 || has("gloo")) c.backends = list;
}

// The backend first (a build without CUDA says so before anything else), then the world.
void BenchOptions::checkWorkers(BenchConfig& c, std::optional<LaunchSpec>& launch) const {
  if (auto v = opts_.get("--backend")) checkBackends(*v, c);
  const auto workers = opts_.get("--workers"), expect = opts_.get("--expect");
  if (workers) c.workers = parseInt(*workers, 0, kMaxRanks);
  if (expect) c.expect = parseInt(*expect, 0, kMaxRanks);
  launch = checkLaunch(c);
  if (nranksOf(c) == 0) {
    throw refuse(workers.value_or(Arg{"--workers", "0"}),
                 "leaves no rank to run on with --expect 0; one of them must be positive");
  }
  if (nranksOf(c) > kMaxRanks) {
    throw refuse(expect.value_or(Arg{"--expect", std::to_string(c.expect)}),
                 "with --workers " + std::to_string(c.workers) + " makes " +
                     std::to_string(nranksOf(c)) + " ranks; at most " + std::to_string(kMaxRanks) +
                     " in all");
  }
  if (auto v = opts_.get("--listen")) {
    checkListen(*v);
    c.listen = v->text;
  }
  c.shaping = parseShaping(opts_, nranksOf(c));
  c.security = parseSecurity(opts_, insecure_);
  if (const auto t = parseTopologyFlag(opts_, nranksOf(c))) c.topology = topologyName(*t);
}

// --launch and its hosts; the launcher's workers are the remote ones (--expect). Refuses a
// host option that the launcher does not take, so that a mistyped command fails before any
// process starts.
std::optional<LaunchSpec> BenchOptions::checkLaunch(BenchConfig& c) const {
  const auto launch = opts_.get("--launch");
  const std::map<std::string, std::set<std::string>> takes = {
      {"mpirun", {"--hostfile", "--np"}}, {"srun", {"--np", "--nodes"}}, {"ssh", {"--hosts"}}};
  for (const char* flag : {"--hostfile", "--np", "--nodes", "--hosts"}) {
    const auto v = opts_.get(flag);
    if (!v) continue;
    if (!launch) throw refuse(*v, "needs --launch (mpirun, srun or ssh)");
    const auto it = takes.find(launch->text);
    if (it != takes.end() && it->second.count(flag) == 0) {
      throw refuse(*v, "is not an option of --launch " + launch->text);
    }
  }
  if (!launch) return std::nullopt;
  LaunchSpec s;
  if (launch->text == "mpirun") {
    s.kind = LauncherKind::Mpirun;
  } else if (launch->text == "srun") {
    s.kind = LauncherKind::Srun;
  } else if (launch->text == "ssh") {
    s.kind = LauncherKind::Ssh;
  } else {
    throw refuse(*launch, "unknown launcher (known: mpirun, srun, ssh)");
  }
  s.program = findOnPath(launch->text);
  if (s.program.empty()) {
    throw refuse(*launch, launch->text + " is not on PATH" +
                              (s.kind == LauncherKind::Mpirun ? " (Debian: openmpi-bin)"
                               : s.kind == LauncherKind::Srun ? " (Debian: slurm-client)"
                                                              : " (Debian: openssh-client)"));
  }
  if (auto e = opts_.get("--expect")) {
    throw refuse(*e, "the launcher starts the remote workers: their number comes from " +
                         std::string(s.kind == LauncherKind::Ssh ? "--hosts" : "--np"));
  }
  if (!opts_.get("--listen")) {
    throw refuse(*launch,
                 "needs --listen tcp://ADDR:PORT, an address of this machine that the hosts "
                 "reach (tcp://0.0.0.0:PORT listens on all)");
  }
  if (c.backend != "cpu" && !(c.backend == "mpi" && s.kind == LauncherKind::Mpirun)) {
    throw refuse(*launch, "starts workers of backend cpu (or mpi under mpirun), not " + c.backend);
  }
  if (s.kind == LauncherKind::Mpirun) {
    // --mca's two values arrive as one Arg each.
    const std::vector<Arg> mca = opts_.getAll("--mca");
    for (size_t i = 0; i + 1 < mca.size(); i += 2) {
      s.extra.insert(s.extra.end(), {"--mca", mca[i].text, mca[i + 1].text});
    }
  }
  checkLaunchHosts(*launch, s);
  // Local workers are asked for by name: a cluster run starts none by default.
  if (!opts_.get("--workers")) c.workers = 0;
  c.expect = launchedWorkers(s);
  return s;
}

// The launcher's hosts into `s`, and the workers it starts: mpirun's -np or its hostfile's
// slots, srun's -n (else -N), the slots of ssh's hosts.
void BenchOptions::checkLaunchHosts(const Arg& launch, LaunchSpec& s) const {
  if (auto v = opts_.get("--nodes")) s.nodes = parseInt(*v, 1, kMaxRanks);
  if (auto v = opts_.get("--np")) s.tasks = parseInt(*v, 1, kMaxRanks);
  if (auto v = opts_.get("--hosts")) {
    try {
      s.hosts = parseSshHosts(v->text);
    } catch (const ConfigError& e) {
      throw refuse(*v, e.what());
    }
  }
  if (s.kind == LauncherKind::Ssh && s.hosts.empty()) {
    throw refuse(launch, "needs --hosts HOST[:SLOTS],... (the hosts ssh reaches)");
  }
  if (s.kind != LauncherKind::Mpirun) return;
  const auto file = opts_.get("--hostfile");
  if (!file) throw refuse(launch, "needs --hostfile FILE (Open MPI's: HOST slots=N a line)");
  s.hostfile = file->text;
  int hostSlots = 0;
  try {
    hostSlots = hostfileSlots(readInputFile(file->text, size_t{1} << 20));
  } catch (const InputFileError& e) {
    throw refuse(*file, e.what());
  } catch (const ConfigError& e) {
    throw refuse(*file, e.what());
  }
  if (hostSlots == 0) throw refuse(*file, "names no host");
  if (s.tasks == 0) s.tasks = hostSlots;
}

void BenchOptions::checkOperation(BenchConfig& c) const {
  if (auto v = opts_.get("--collective")) c.collective = parseCollective(*v);
  if (auto v = opts_.get("--datatype")) c.dtype = parseDataType(*v);
  if (auto v = opts_.get("--op")) c.op = parseRedOp(*v);
  if (auto v = opts_.get("--root")) c.root = parseInteger(*v);
  if (auto v = opts_.get("--mismatch-rank")) c.mismatchRank = parseInteger(*v);
  if (auto v = opts_.get("--iters")) c.iters = parseInteger(*v);
  if (auto v = opts_.get("--warmup_iters")) c.warmup = parseInteger(*v);
  if (auto v = opts_.get("--check")) {
    const int n = parseInteger(*v);
    if (n < 0 || static_cast<uint32_t>(n) > kMaxIterations) {
      throw refuse(*v, "must be in 0.." + std::to_string(kMaxIterations));
    }
    c.check = static_cast<uint32_t>(n);
  }
  if (auto v = opts_.get("--data")) {
    if (v->text != "checkable" && v->text != "random")
      throw refuse(*v, "must be checkable or random");
    c.randomData = v->text == "random";
    // A -c N that the runs would not honour (RunRequest::checkedIterations) is refused; left
    // out, -c's default checks nothing then.
    if (opts_.get("--check") && runRequestOf(c).checkedIterations() < c.check)
      throw refuse(*v, "random data cannot be checked: drop --check (or give --check 0)");
  }
}

void BenchOptions::checkTelemetry(BenchConfig& c) const {
  if (auto v = opts_.get("--telemetry")) {
    const auto t = parseTelemetryLevel(v->text);
    if (!t) throw refuse(*v, "unknown level (known: off, steps, chunks)");
    c.telemetry = *t;
  }
  if (auto v = opts_.get("--max-events")) c.maxEvents = parseSize(*v);
  if (auto v = opts_.get("--stall-timeout")) c.stallTimeout = parseMillis(*v, kMaxStallTimeoutMs);
  if (auto v = opts_.get("--data-plane")) {
    const auto d = parseDataPlaneKind(v->text);
    if (!d) throw refuse(*v, "unknown data plane (known: auto, shm, zmq, tcp)");
    c.dataPlane = *d;
  }
  if (auto v = opts_.get("--cuda-ipc")) {
    if (v->text != "on" && v->text != "off") throw refuse(*v, "expected on or off");
    c.cudaIpc = v->text == "on";
  }
  // The workers inherit the environment: a bad wait setting is refused here, before any starts.
  try {
    (void)shmWaitsFromEnv(ShmOptions{});
  } catch (const ConfigError& e) {
    throw UsageError{e.what()};
  }
}

void BenchOptions::checkPipeline(BenchConfig& c) const {
  if (auto v = opts_.get("--ranks-per-host")) c.ranksPerHost = parseInteger(*v);
  if (auto v = opts_.get("--radix")) c.radix = parseInteger(*v);
  if (auto v = opts_.get("--slice")) c.sliceSizes = parseSizeList(*v);
  if (auto v = opts_.get("--inflight")) c.inflights = parseIntegerList(*v);
  if (auto v = opts_.get("--window")) c.window = parseInteger(*v);
  if (auto v = opts_.get("--ring-order")) c.ringOrder = parseIntegerList(*v);
}

// --schedule FILE.xml: the file's one algorithm, collective and ranks.
void BenchOptions::checkSchedule(BenchConfig& c, const Arg& file) const {
  for (const char* flag : {"--algo", "--nccl-algo", "--mpi-algo"}) {
    if (auto v = opts_.get(flag))
      throw refuse(*v, "cannot be given with --schedule (the file is the algorithm)");
  }
  MscclProgram p;
  try {
    c.scheduleXml = readInputFile(file.text, kMscclMaxFileBytes);
    p = parseMscclProgram(c.scheduleXml, file.text);
  } catch (const InputFileError& e) {
    throw refuse(file, e.what());
  } catch (const MscclImportError& e) {
    throw UsageError{e.what()};
  }
  if (auto v = opts_.get("--collective"); v && c.collective != p.collective) {
    throw refuse(*v,
                 "the file " + file.text + " implements " + std::string(toString(p.collective)));
  }
  c.collective = p.collective;
  const auto workers = opts_.get("--workers");
  if (!workers && c.expect == 0) c.workers = p.ngpus;
  if (nranksOf(c) != p.ngpus) {
    throw refuse(workers.value_or(Arg{"--expect", std::to_string(c.expect)}),
                 "the file " + file.text + " is for " + std::to_string(p.ngpus) + " ranks");
  }
  c.algorithms = {mscclAlgorithmName(p)};
}

void BenchOptions::checkAlgorithms(BenchConfig& c) const {
  if (auto file = opts_.get("--schedule")) {
    checkSchedule(c, *file);
    return;
  }
  const auto v = opts_.get("--algo");
  const bool ncclOnly = c.backend == "nccl";
  if (v && ncclOnly) {
    throw refuse(*v,
                 "the nccl backend runs NCCL's own collectives only; choose them with "
                 "--nccl-algo ring,tree");
  }
  if (ncclOnly) c.algorithms.clear();
  if (v && v->text != "all") c.algorithms = parseNameList(*v);
  if (v && v->text == "all") {
    c.algorithms.clear();
    for (const std::string& name : algorithmNames()) {
      // "all" means all that can run here: swing's refusal of other rank counts is no error,
      // nor switch's of a world with no worker to spare for the switch.
      const bool runs = workerCountRefusal(name, nranksOf(c)).empty();
      if (algorithmSupports(name, c.collective) && runs) c.algorithms.push_back(name);
    }
  }
  if (c.backend == "mpi" && c.backends.empty()) c.backends = {"mpi"};
  for (const std::string& name : c.algorithms) {
    const LibraryAlgorithm* lib = findLibraryAlgorithm(name);
    if (lib == nullptr) continue;
    if (auto why = libraryMissing(lib->library)) {
      throw refuse(v.value_or(Arg{"--backend", "gloo"}), name + ": " + *why);
    }
  }
  std::optional<Arg> nccl = opts_.get("--nccl-algo");
  if (!nccl && ncclOnly) nccl = Arg{"--nccl-algo", "ring"};
  if (!nccl) return;
  if (findBackend(c.backend)->memory != MemoryKind::Device) {
    throw refuse(*nccl, "NCCL runs on GPU workers: add --backend nccl (or cuda)");
  }
  for (const std::string& name : parseNameList(*nccl)) {
    if (name != "ring" && name != "tree") {
      throw refuse(*nccl, "unknown NCCL algorithm '" + name + "' (known: ring, tree)");
    }
    const std::string algo = "nccl-" + name;
    if (std::find(c.algorithms.begin(), c.algorithms.end(), algo) == c.algorithms.end()) {
      c.algorithms.push_back(algo);
    }
  }
}

// The engines' algorithms for the lab's (expandBackends), and Open MPI's own by name
// (--mpi-algo). Returns a line for each lab algorithm an engine has not.
std::vector<std::string> BenchOptions::checkEngines(BenchConfig& c) const {
  const auto mpiAlgo = opts_.get("--mpi-algo");
  const bool mpi = std::find(c.backends.begin(), c.backends.end(), "mpi") != c.backends.end();
  if (mpiAlgo && !mpi)
    throw refuse(*mpiAlgo, "Open MPI runs on workers of mpirun: add mpi to --backend");
  const std::vector<Arg> mca = opts_.getAll("--mca");
  const auto launch = opts_.get("--launch");
  if (!mca.empty() && !mpi && !(launch && launch->text == "mpirun"))
    throw refuse(mca.front(),
                 "passes Open MPI's parameters: add mpi to --backend, or --launch mpirun");
  for (const Arg& m : mca) c.mpiMca.push_back(m.text);
  if (c.backends.empty()) return {};
  std::vector<std::string> notes;
  if (!mpiAlgo || opts_.get("--algo") || c.backends.size() > 1) {
    BackendExpansion x = expandBackends(c.backends, c.algorithms, c.collective);
    if (x.algorithms.empty()) {
      throw refuse(opts_.getOr("--algo", "ring"),
                   "names no algorithm the engines of --backend have (ring: mpi-ring, gloo-ring; "
                   "halving-doubling: mpi-rabenseifner, gloo-halving-doubling; or an engine's "
                   "name such as gloo-bcube)");
    }
    c.algorithms = std::move(x.algorithms);
    notes = std::move(x.notes);
  } else {
    c.algorithms.clear();  // --backend mpi --mpi-algo NAME: Open MPI's alone
  }
  if (mpiAlgo) {
    for (const std::string& name : parseNameList(*mpiAlgo)) {
      const std::string algo = "mpi-" + name;
      if (findLibraryAlgorithm(algo) == nullptr) {
        throw refuse(*mpiAlgo, "unknown Open MPI algorithm '" + name +
                                   "' (known: default, linear, nonoverlapping, "
                                   "recursive-doubling, ring, segmented-ring, rabenseifner)");
      }
      if (std::find(c.algorithms.begin(), c.algorithms.end(), algo) == c.algorithms.end()) {
        c.algorithms.push_back(algo);
      }
    }
  }
  for (const std::string& algo : c.algorithms) {
    const LibraryAlgorithm* lib = findLibraryAlgorithm(algo);
    if (lib != nullptr && lib->library == "mpi" && !lib->supports(c.collective)) {
      throw refuse(mpiAlgo.value_or(Arg{"--backend", "mpi"}),
                   algo + " has no " + std::string(toString(c.collective)));
    }
  }
  if (c.algorithms.empty()) {
    throw refuse(opts_.getOr("--algo", "ring"),
                 "leaves no algorithm to run on --backend " + c.backends.front());
  }
  return notes;
}

// The local workers' devices, and NCCL's rule of one rank per GPU among them.
void BenchOptions::checkDevices(BenchConfig& c) const {
  const bool gpu = findBackend(c.backend)->memory == MemoryKind::Device;
  const auto v = opts_.get("--device");
  if (v && !gpu) throw refuse(*v, "backend " + c.backend + " uses no device");
  if (v) {
    c.devices = parseIntegerList(*v);
    for (int d : c.devices) {
      if (d < 0 || d > kMaxDeviceIndex) {
        throw refuse(Arg{v->flag, std::to_string(d)},
                     "must be in 0.." + std::to_string(kMaxDeviceIndex));
      }
    }
    if (c.devices.size() != 1 && c.devices.size() != static_cast<size_t>(c.workers)) {
      throw refuse(*v, "gives " + std::to_string(c.devices.size()) + " devices for " +
                           std::to_string(c.workers) +
                           " local workers: give one for all or one per worker");
    }
  } else if (c.backend == "nccl") {
    for (int k = 0; k < c.workers; ++k) c.devices.push_back(k);
  }
  const std::vector<int> devices = c.devices;
  std::vector<RankPlace> places;
  for (int k = 0; k < c.workers; ++k)
    places.push_back({"localhost", c.backend, localDevice(devices, k)});
  for (const std::string& algo : c.algorithms) {
    if (findLibraryAlgorithm(algo) == nullptr && c.backend != "nccl") continue;
    try {
      checkPlaces(algo, places);
    } catch (const ConfigError& e) {
      // A host-memory library's refusal is about the algorithm (gloo-bcube's rank count).
      const LibraryAlgorithm* lib = findLibraryAlgorithm(algo);
      const bool onHost = lib != nullptr && lib->memory == MemoryKind::Host;
      const std::optional<Arg> algoArg = opts_.get("--algo");
      throw refuse(onHost && algoArg ? *algoArg : v.value_or(Arg{"--backend", c.backend}),
                   e.what());
    }
  }
}

// Local workers run on this host: a GPU backend without a usable device here is refused
// before any of them starts (remote workers check their own host when they start).
void BenchOptions::checkDevicesUsable(const BenchConfig& c) const {
  if (c.workers == 0) return;
  if (auto why = localDevicesProblem(c.backend, c.devices, c.workers)) {
    throw refuse(opts_.get("--device")
                     .value_or(opts_.get("--backend").value_or(Arg{"--backend", c.backend})),
                 *why);
  }
}

// The sizes of the sweep, as nccl-tests steps them.
std::vector<uint64_t> BenchOptions::checkSizes(BenchConfig& c) const {
  const auto minb = opts_.get("--minbytes"), maxb = opts_.get("--maxbytes");
  const auto factor = opts_.get("--stepfactor"), step = opts_.get("--stepbytes");
  if (minb) c.minBytes = parseSize(*minb);
  if (maxb) c.maxBytes = parseSize(*maxb);
  if (factor && step)
    throw refuse(*step, "excludes " + factor->flag + ": step by a factor or by bytes");
  if (factor) {
    c.stepFactor = parseSize(*factor);
    if (c.stepFactor < 2) throw refuse(*factor, "must be at least 2");
  }
  if (step) c.stepBytes = parseSize(*step);
  if (c.stepFactor == 0 && c.stepBytes == 0) {
    throw refuse(opts_.getOr("--stepbytes", "0"), "must be at least 1");
  }
  const Arg b = opts_.getOr("--minbytes", std::to_string(c.minBytes));
  if (c.minBytes == 0) throw refuse(b, "must be at least 1");
  if (c.maxBytes < c.minBytes) {
    throw refuse(opts_.getOr("--maxbytes", std::to_string(c.maxBytes)),
                 "is smaller than " + b.flag + " " + b.text);
  }
  if (apiCountForSize(c.collective, nranksOf(c), c.minBytes, c.dtype) == 0) {
    // Reduce-scatter and all-gather split the size over the ranks in 16-byte pieces, as
    // nccl-tests does (apiCountForSize).
    const bool perRank =
        c.collective == Collective::ReduceScatter || c.collective == Collective::AllGather;
    const uint64_t least = perRank ? 16 * static_cast<uint64_t>(nranksOf(c)) : dtypeSize(c.dtype);
    throw refuse(b, "must be at least " + std::to_string(least) + " bytes: " +
                        (perRank ? "16 bytes per rank of " + std::string(toString(c.collective))
                                 : "one " + std::string(toString(c.dtype)) + " element"));
  }
  std::vector<uint64_t> sizes;
  for (uint64_t s = c.minBytes; s <= c.maxBytes;) {
    if (sizes.size() >= kMaxSizes) {
      throw refuse(opts_.getOr("--maxbytes", std::to_string(c.maxBytes)),
                   "gives more than " + std::to_string(kMaxSizes) + " sizes; use a larger step");
    }
    sizes.push_back(s);
    const uint64_t next = c.stepFactor ? s * c.stepFactor : s + c.stepBytes;
    if ((c.stepFactor && next / c.stepFactor != s) || next <= s) break;  // 64-bit overflow
    s = next;
  }
  return sizes;
}

void BenchOptions::checkOutputs(BenchConfig& c) const {
  const std::pair<const char*, std::string*> outputs[] = {
      {"--json", &c.jsonPath},     {"--nccl-tests-json", &c.ncclTestsJsonPath},
      {"--csv", &c.csvPath},       {"--trace", &c.tracePath},
      {"--record", &c.recordPath}, {"--flight-record", &c.flightRecordPath}};
  std::set<std::string> used;
  for (const auto& [flag, path] : outputs) {
    const auto v = opts_.get(flag);
    if (!v) continue;
    checkOutputPath(*v);
    if (!used.insert(v->text).second) throw refuse(*v, "names the same file as another output");
    *path = v->text;
  }
  if (const auto v = opts_.get("--per_iter_timing")) c.perIterTiming = parseInt(*v, 0, 1) == 1;
}

// Resolves every run of the sweep on a world of its ranks (one host: the coordinator checks
// again with the real hosts): each algorithm with each slice size at the smallest and the
// largest size, and each number of slices in flight. Local workers must also fit in memory.
// A port or link paced so slowly that even the smallest message takes longer than the stall
// timeout would be reported as a stall ("no rank made progress"): refused here, naming the
// flag and the time one message would take.
void BenchOptions::checkShapedProgress(const BenchArgs& a) const {
  const BenchConfig& c = a.cfg;
  double slowest = c.shaping.portBytesPerSecond;
  std::string flag = "--nic-bw";
  auto consider = [&](double rate, const char* from) {
    if (rate > 0 && (slowest == 0 || rate < slowest)) {
      slowest = rate;
      flag = from;
    }
  };
  for (const auto& [rank, rate] : c.shaping.rankPortBytesPerSecond) consider(rate, "--slow-rank");
  const char* linkFlag = c.topology.empty() ? "--slow-link" : "--topology";
  for (const auto& [link, rate] : c.shaping.linkBytesPerSecond) consider(rate, linkFlag);
  if (slowest == 0) return;
  const uint64_t slice = *std::min_element(c.sliceSizes.begin(), c.sliceSizes.end());
  const uint64_t message = std::min(slice, a.sizes.front());
  const double seconds = static_cast<double>(message) / slowest;
  if (seconds * 1000 <= static_cast<double>(c.stallTimeout.count())) return;
  const std::optional<Arg> given = flag == "--nic-bw" || flag == "--topology"
                                       ? opts_.get(flag)
                                       : std::optional<Arg>(opts_.getAll(flag).front());
  char took[64];
  if (seconds < 120) {
    std::snprintf(took, sizeof took, "%.1f s", seconds);
  } else if (seconds < 7200) {
    std::snprintf(took, sizeof took, "%.0f min", seconds / 60);
  } else {
    std::snprintf(took, sizeof took, "%.1f h", seconds / 3600);
  }
  throw refuse(given.value_or(Arg{flag, ""}),
               "one " + formatSize(message) + " message takes " + took +
                   " at that rate, longer than the stall timeout (" +
                   formatDuration(c.stallTimeout) +
                   "): every run would stop as stalled; raise the rate, or --stall-timeout");
}

void BenchOptions::checkRuns(const BenchArgs& a) const {
  checkShapedProgress(a);
  const BenchConfig& c = a.cfg;
  const std::vector<std::string> hosts(static_cast<size_t>(nranksOf(c)), "localhost");
  auto resolve = [&](const std::string& algo, uint64_t bytes, uint64_t slice, int inflight,
                     Schedule* s) {
    try {
      (void)resolveRunRequest(requestOf(c, algo, bytes, slice, inflight), hosts, s);
    } catch (const RunRequestError& e) {
      throw refuse(e, opts_, kRunFlags);
    } catch (const ConfigError& e) {
      throw refuse(opts_.getOr("--algo", algo),
                   algo + " at " + formatSize(bytes) + ": " + e.what());
    }
  };
  uint64_t needBytes = 0;  // per rank, at the largest size
  for (const std::string& algo : c.algorithms) {
    for (uint64_t slice : c.sliceSizes) {
      resolve(algo, a.sizes.front(), slice, c.inflights.front(), nullptr);
      Schedule s;
      resolve(algo, a.sizes.back(), slice, c.inflights.front(), &s);
      needBytes =
          std::max(needBytes, (s.inputElems + s.outputElems + s.scratchElems) * dtypeSize(c.dtype));
    }
  }
  for (int inflight : c.inflights) {
    resolve(c.algorithms.front(), a.sizes.front(), c.sliceSizes.front(), inflight, nullptr);
  }
  // Local workers hold their buffers plus a host copy of the input and of the expected
  // result; refuse what would not fit in half of this machine's memory.
  const long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGE_SIZE);
  const long double need = static_cast<long double>(needBytes) * 2 * c.workers;
  if (c.workers > 0 && pages > 0 && pageSize > 0 &&
      need > static_cast<long double>(pages) * pageSize / 2) {
    throw refuse(opts_.getOr("--maxbytes", formatSize(c.maxBytes)),
                 "needs about " + std::to_string(static_cast<uint64_t>(need / (1 << 20))) +
                     " MiB on " + std::to_string(c.workers) +
                     " local workers, more than half of this machine's memory");
  }
}

}  // namespace arl::app
