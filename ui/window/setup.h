// What the window's setup panel describes: the workers, the collective, the sizes and the
// sweeps, the ring order and the network's shaping. A plain value (no Qt), turned into the
// SweepSpec the runtime drives and checked field by field with core's own validation
// (resolveRunRequest, checkShaping) so that the panel marks a bad field before Run is pressed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/shaping.h"
#include "base/types.h"
#include "export/export.h"
#include "runtime/sweep.h"

namespace arl::ui {

// A value swept geometrically (min, min*factor, ... <= max), or a single value when off.
struct SweepRange {
  bool on = false;
  uint64_t single = 0;
  uint64_t min = 0, max = 0, factor = 2;
  // The values, in increasing order (at most `limit`; more is a mistake the check reports).
  std::vector<uint64_t> values(size_t limit = 1000) const;
  bool operator==(const SweepRange&) const = default;
};

struct SessionSetup {
  // Workers: local child processes, remote ones awaited on the control endpoint.
  int localWorkers = 4;
  int remoteWorkers = 0;
  std::string listen;  // empty: tcp://127.0.0.1 on a free port
  std::string backend = "cpu";
  // The local workers' GPUs with a device backend: one index for all, or one per local
  // worker; empty: the backend's default (cuda: 0; nccl: 0, 1, ...).
  std::vector<int> devices;
  // The collective. algorithm "all": every algorithm that implements the collective and runs
  // on the backend (the lab's own, and NCCL's beside them on a device backend).
  std::string algorithm = "ring";
  // An MSCCL algorithm file's text when `algorithm` is its "msccl:NAME" (gui --schedule;
  // RunRequest::scheduleXml), else empty.
  std::string scheduleXml;
  Collective collective = Collective::AllReduce;
  DataType dtype = DataType::Float;
  RedOp op = RedOp::Sum;
  int root = 0;
  SweepRange size{true, uint64_t{1} << 20, uint64_t{4} << 10, uint64_t{16} << 20, 4};
  SweepRange slice{false, uint64_t{256} << 10, uint64_t{16} << 10, uint64_t{1} << 20, 4};
  SweepRange inflight{false, 4, 1, 8, 2};
  int window = 1;  // ring's window of slices (RunRequest::window); 1: slice by slice
  int iterations = 5;
  int warmup = 1;
  int ranksPerHost = 0;        // 0: from the workers' host names
  int radix = 0;               // knomial's k (RunRequest::radix); 0: its default
  std::vector<int> ringOrder;  // empty: 0, 1, ..., n-1
  // Link shaping, field by field (0 or -1: not set).
  double portMBps = 0;        // every rank's port, each direction
  double latencyUs = 0;       // added to every message
  int slowRank = -1;          // one slow rank ...
  double slowRankMBps = 100;  // ... at this port rate
  int slowLinkFrom = -1;      // one slow directed link ...
  int slowLinkTo = -1;
  double slowLinkMBps = 100;  // ... at this rate
  // A named topology (base/topology.h, --topology's NAME; empty: none): every link's rate,
  // and latencyUs is then per hop.
  std::string topology;

  bool operator==(const SessionSetup&) const = default;
  int nranks() const { return localWorkers + remoteWorkers; }
  std::vector<std::string> algorithms() const;
  // `devices`, or the backend's default for the local workers.
  std::vector<int> localDevices() const;
  LinkShaping shaping() const;
};

// The parts of the setup a problem can be about (one control each in the panel).
enum class SetupField {
  LocalWorkers,
  RemoteWorkers,
  Backend,
  Devices,
  Algorithm,
  Collective,
  Root,
  Size,
  Slice,
  Inflight,
  Window,
  Iterations,
  Warmup,
  RanksPerHost,
  Radix,
  RingOrder,
  PortRate,
  Latency,
  SlowRank,
  SlowLink,
  Topology,
};

struct SetupProblem {
  SetupField field;
  std::string rule;  // what is wrong, with the accepted range
};

// Every problem of `s` on a world whose ranks are on `hosts` (one entry per rank; empty:
// every rank on one host), at most one per field, each found by the check the coordinator
// itself applies. Empty: Run will be accepted.
std::vector<SetupProblem> checkSetup(const SessionSetup& s, std::vector<std::string> hosts = {});

// The sweep the setup asks for: what `bench` builds from benchConfigOf(s) (export/bench_sweep.h),
// keeping each run's telemetry, for the charts' per-run views and for export.
SweepSpec sweepSpecOf(const SessionSetup& s);

// The setup as the bench's configuration (what the sweep, exports and the charts read). What
// the panel does not set is bench's default: the data plane (auto), CUDA IPC (on), the stall
// timeout (20 s), the telemetry level (chunks) and its limit of events per run, the check and
// out-of-place buffers.
BenchConfig benchConfigOf(const SessionSetup& s);

// "0,1", "2": device indices. Throws ConfigError naming the bad token.
std::vector<int> parseDevices(const std::string& text);

// "0 2 1 3", "0,2,1,3": the ranks of a ring order. Throws ConfigError naming the bad token.
std::vector<int> parseRingOrder(const std::string& text);
std::string formatRingOrder(const std::vector<int>& order);

}  // namespace arl::ui
