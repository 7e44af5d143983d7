// The parts of `allreduce-lab soak` that need no coordinator: drawing random valid run
// requests, reading a process's resources from /proc, keeping those readings as series and
// checking their bounds, and finding what a session left behind.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "exec/run_request.h"

namespace arl::app {

// Which data planes the soak's runs use.
// The data planes a soak's runs take: one, or in turn (Both: shm and zmq; All: shm, zmq, tcp).
enum class SoakPlanes { Shm, Zmq, Tcp, Both, All };

// One drawn run: the request and the number of ranks it runs on.
struct SoakDraw {
  RunRequest req;
  int nranks = 0;
};

// Draws run requests at random, each one that resolveRunRequest accepts for `nranks` ranks
// on one host: algorithm (those valid for the rank count), collective, element type,
// reduction, count (edge counts 0..n+1 and odd counts among them), slice, slices in flight,
// light link shaping, telemetry level, data plane.
class SoakDrawer {
 public:
  SoakDrawer(uint64_t seed, int maxRanks, SoakPlanes planes);
  // A checked run: a few iterations, each checked, short enough for a soak.
  SoakDraw next();
  // A run that goes on until it is ended (a fault's): many iterations, none checked.
  SoakDraw endless();
  // Draws refused by resolveRunRequest and drawn again (they say which draws the lab refuses).
  uint64_t refusedDraws() const { return refused_; }
  std::mt19937_64& rng() { return rng_; }

 private:
  SoakDraw drawOnce();
  uint64_t drawCount(int nranks, DataType t);
  DataPlaneKind drawPlane();

  std::mt19937_64 rng_;
  int maxRanks_;
  SoakPlanes planes_;
  uint64_t refused_ = 0;
  uint64_t drawn_ = 0;
};

// What /proc says of one process now; nullopt when it is gone.
struct ProcessSample {
  uint64_t rssKb = 0;    // VmRSS
  uint64_t anonKb = 0;   // RssAnon: the process's own memory
  uint64_t shmemKb = 0;  // RssShmem: shared memory it maps (the data planes' rings)
  int threads = 0;       // Threads
  int fds = 0;           // entries of /proc/PID/fd
};
std::optional<ProcessSample> sampleProcess(int64_t pid);

// The readings of every process the soak watches, one series per process and quantity.
class SoakSeries {
 public:
  // `run`: the runs completed when the sample was taken.
  void add(const std::string& process, uint64_t run, const ProcessSample& s);

  // The bounds of the samples taken after `warmup` runs: RSS may grow by at most its limit (the
  // median reading of the second half of the samples over that of the first: a leak raises it,
  // a reading taken while a large run's buffers were still held does not), threads and fds may
  // spread (max - min) by at most theirs.
  struct Limits {
    uint64_t warmup = 0;
    uint64_t coordinatorRssKb = 0;
    uint64_t workerRssKb = 0;
    int threads = 0;
    int fds = 0;
  };
  // One line per series over its limit, naming the process and the series; empty when all
  // hold. A series with fewer than two samples after the warm-up has no spread or growth.
  std::vector<std::string> violations(const Limits& lim) const;
  // The table: per process, samples after the warm-up, RSS min, max and growth, threads' and
  // fds' min and max.
  std::string table(uint64_t warmup) const;
  // Largest RSS growth and thread and fd spread over the workers, and the coordinator's.
  struct Spreads {
    uint64_t coordinatorRssKb = 0, workerRssKb = 0;
    int coordinatorThreads = 0, workerThreads = 0, coordinatorFds = 0, workerFds = 0;
    size_t workerSeries = 0;  // workers with two or more samples after the warm-up
  };
  Spreads spreads(uint64_t warmup) const;
  // Every sample as CSV: process, runs, rss_kib, anon_kib, shmem_kib, threads, fds.
  std::string csv() const;

 private:
  struct Sample {
    uint64_t run;
    ProcessSample s;
  };
  std::map<std::string, std::vector<Sample>> byProcess_;
};

// Names under /dev/shm of shared-memory segments made by any of `pids` (arl-dp-<pid>-...).
std::vector<std::string> shmSegmentsOf(const std::vector<int64_t>& pids);
// Every entry of `dir`, recursively, as paths relative to it.
std::vector<std::string> entriesUnder(const std::string& dir);

}  // namespace arl::app
