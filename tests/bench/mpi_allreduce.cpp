// The reference side of scripts/compare-mpi: MPI_Allreduce of floats (sum) measured the way
// nccl-tests measures, so that its figures sit beside `allreduce-lab bench`'s.
//
//   mpirun -np 4 arl_mpi_allreduce -b 4K -e 64M -f 4 -n 20 -w 5 --json out.json
//
// The MPI library picks its own algorithm (Open MPI's default "tuned" decision on one host,
// over its shared-memory transport). Send and receive buffers are allocated and touched once
// for the largest size and reused by every call. Per size: an untimed checked call when -c 1
// (its result is compared element by element with the exact sum, nccl-tests' #wrong), then
// -w warm-up calls, a barrier, and -n timed calls back to back, each timed on its own. The
// reported time is the lab's (arl/metrics.h): the mean over the calls of the slowest rank's
// time for that call; beside it, time_rank_mean_us is each rank's mean with the largest taken
// (what timing the whole loop on every rank gives; lower when the ranks take turns being
// slowest, as they do with more ranks than cores). algbw and busbw follow nccl-tests
// (busbw = algbw * 2(n-1)/n, GB = 1e9 bytes), from time_us.
//
// Rank 0 prints nccl-tests' table and, with --json FILE, writes
// {"config": {...}, "results": [{"size_bytes", "count", "algorithm", "time_us",
// "time_rank_mean_us", "algbw_gbps", "busbw_gbps", "wrong"}, ...]} with the field names
// `allreduce-lab bench --json` uses.
// Exit status: 0 when every element was right, 1 when some were wrong, 2 on bad arguments.
#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "base/types.h"
#include "model/metrics.h"

namespace {

struct Args {
  uint64_t minBytes = 32ull << 20;
  uint64_t maxBytes = 32ull << 20;
  uint64_t factor = 2;
  int iters = 20;
  int warmup = 5;
  int check = 1;
  std::string json;
};

struct Row {
  uint64_t bytes = 0;
  uint64_t count = 0;
  arl::Metrics m;
  double rankMeanUs = 0;  // slowestOfRankMeansUs
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: mpirun -np N arl_mpi_allreduce [options]\n"
               "MPI_Allreduce (float, sum, the library's default algorithm) timed as nccl-tests\n"
               "times it.\n"
               "  -b, --minbytes SIZE    smallest size in bytes (K, M, G = 2^10, 2^20, 2^30;\n"
               "                         default 32M)\n"
               "  -e, --maxbytes SIZE    largest size (default 32M)\n"
               "  -f, --stepfactor F     multiply the size by F (>= 2) between runs (default 2)\n"
               "  -n, --iters N          timed calls per size (default 20)\n"
               "  -w, --warmup_iters N   untimed calls before them (default 5)\n"
               "  -c, --check 0|1        check every element of one extra call (default 1)\n"
               "  --json FILE            results as JSON (written by rank 0)\n"
               "  -h, --help             this help\n");
}

// Returns false with `err` set when `s` is not a count with an optional K/M/G suffix.
bool parseSize(const char* s, uint64_t* out, std::string* err) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (end == s || errno != 0 || *s == '-') {
    *err = std::string("not a size: '") + s + "'";
    return false;
  }
  uint64_t mul = 1;
  switch (*end) {
    case 'K':
    case 'k': mul = 1ull << 10; break;
    case 'M':
    case 'm': mul = 1ull << 20; break;
    case 'G':
    case 'g': mul = 1ull << 30; break;
    default: break;
  }
  if (mul != 1) ++end;
  if (*end != '\0') {
    *err = std::string("not a size: '") + s + "'";
    return false;
  }
  if (v > std::numeric_limits<uint64_t>::max() / mul) {
    *err = std::string("size too large: '") + s + "'";
    return false;
  }
  *out = v * mul;
  return true;
}

bool parseInt(const char* s, int lo, int hi, int* out) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

// Stores `msg` in `err` and returns 2, parseArgs' code for bad arguments.
int bad(std::string* err, std::string msg) {
  *err = std::move(msg);
  return 2;
}

// 0 on success, 1 when help was asked for, 2 with `err` set on bad arguments.
int parseArgs(int argc, char** argv, Args* a, std::string* err) {
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "-h" || f == "--help") return 1;
    if (i + 1 >= argc) return bad(err, f + " needs a value");
    const char* v = argv[++i];
    std::string why;
    int n = 0;
    if (f == "-b" || f == "--minbytes") {
      if (!parseSize(v, &a->minBytes, &why)) return bad(err, f + ": " + why);
    } else if (f == "-e" || f == "--maxbytes") {
      if (!parseSize(v, &a->maxBytes, &why)) return bad(err, f + ": " + why);
    } else if (f == "-f" || f == "--stepfactor") {
      if (!parseInt(v, 2, 1 << 20, &n)) return bad(err, f + " expects an integer >= 2");
      a->factor = static_cast<uint64_t>(n);
    } else if (f == "-n" || f == "--iters") {
      if (!parseInt(v, 1, 1'000'000, &a->iters)) return bad(err, f + " expects 1..1000000");
    } else if (f == "-w" || f == "--warmup_iters") {
      if (!parseInt(v, 0, 1'000'000, &a->warmup)) return bad(err, f + " expects 0..1000000");
    } else if (f == "-c" || f == "--check") {
      if (!parseInt(v, 0, 1, &a->check)) return bad(err, f + " expects 0 or 1");
    } else if (f == "--json") {
      a->json = v;
      if (a->json.empty()) return bad(err, "--json needs a file name");
    } else {
      return bad(err, "unknown argument '" + f + "'");
    }
  }
  if (a->minBytes < sizeof(float)) return bad(err, "-b must be at least 4 bytes (one float)");
  if (a->maxBytes < a->minBytes) return bad(err, "-e must not be smaller than -b");
  // MPI counts are ints.
  if (a->maxBytes / sizeof(float) > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    return bad(err, "-e is too large for an MPI count of floats");
  }
  return 0;
}

// Element i of rank r's input: a small integer, so that every partial sum is exact in float
// whatever order the library reduces in, and the result can be checked bit for bit.
float inputValue(uint64_t i, int r) {
  return static_cast<float>((i + static_cast<uint64_t>(r)) % 13 + 1);
}

float expectedValue(uint64_t i, int nranks) {
  uint64_t s = 0;
  for (int r = 0; r < nranks; ++r) s += (i + static_cast<uint64_t>(r)) % 13 + 1;
  return static_cast<float>(s);
}

std::string libraryVersion() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, static_cast<size_t>(std::max(len, 0)));
  const auto nl = s.find_first_of("\r\n,");
  if (nl != std::string::npos) s.resize(nl);
  return s;
}

std::string jsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += c;
    }
  }
  return o;
}

bool writeJson(const std::string& path, const Args& a, int nranks, const std::vector<Row>& rows) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  std::fprintf(f,
               "{\"config\": {\"implementation\": \"%s\", \"algorithm\": \"mpi-default\", "
               "\"ranks\": %d, \"dtype\": \"float\", \"op\": \"sum\", \"iters\": %d, "
               "\"warmup\": %d, \"check\": %d},\n \"results\": [",
               jsonEscape(libraryVersion()).c_str(), nranks, a.iters, a.warmup, a.check);
  for (size_t k = 0; k < rows.size(); ++k) {
    const Row& r = rows[k];
    std::fprintf(f,
                 "%s\n  {\"size_bytes\": %" PRIu64 ", \"count\": %" PRIu64
                 ", \"algorithm\": \"mpi-default\", \"ranks\": %d, \"time_us\": %.3f, "
                 "\"time_rank_mean_us\": %.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, "
                 "\"wrong\": ",
                 k == 0 ? "" : ",", r.bytes, r.count, nranks, r.m.timeUs, r.rankMeanUs,
                 r.m.algbwGBps, r.m.busbwGBps);
    if (a.check) {
      std::fprintf(f, "%" PRIu64 "}", r.m.wrong);
    } else {
      std::fprintf(f, "null}");
    }
  }
  std::fprintf(f, "\n]}\n");
  return std::fclose(f) == 0;
}

// Elements of one checked call that differ from the exact sum, over all ranks.
uint64_t countWrong(const std::vector<float>& send, std::vector<float>& recv, uint64_t count,
                    int nranks) {
  // A value no correct sum has, so an element the library never wrote is counted.
  std::fill(recv.begin(), recv.begin() + static_cast<ptrdiff_t>(count), -1.0f);
  MPI_Allreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  uint64_t mine = 0;
  for (uint64_t i = 0; i < count; ++i) mine += recv[i] != expectedValue(i, nranks);
  uint64_t wrong = 0;
  MPI_Allreduce(&mine, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return wrong;
}

// Warm-up, then every timed call's time on every rank, gathered on rank 0 as the lab's
// coordinator gathers its workers' ([call][rank] in us; empty on the other ranks).
std::vector<std::vector<double>> timeCalls(const Args& a, const std::vector<float>& send,
                                           std::vector<float>& recv, uint64_t count, int rank,
                                           int nranks) {
  const int icount = static_cast<int>(count);
  for (int i = 0; i < a.warmup; ++i) {
    MPI_Allreduce(send.data(), recv.data(), icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  std::vector<double> callUs(static_cast<size_t>(a.iters));
  MPI_Barrier(MPI_COMM_WORLD);
  double prev = MPI_Wtime();
  for (int i = 0; i < a.iters; ++i) {
    MPI_Allreduce(send.data(), recv.data(), icount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double now = MPI_Wtime();
    callUs[static_cast<size_t>(i)] = (now - prev) * 1e6;
    prev = now;
  }
  const size_t iters = static_cast<size_t>(a.iters);
  std::vector<double> allUs(rank == 0 ? iters * static_cast<size_t>(nranks) : 0);
  MPI_Gather(callUs.data(), a.iters, MPI_DOUBLE, allUs.data(), a.iters, MPI_DOUBLE, 0,
             MPI_COMM_WORLD);
  std::vector<std::vector<double>> perCallPerRank(rank == 0 ? iters : 0,
                                                  std::vector<double>(static_cast<size_t>(nranks)));
  for (size_t r = 0; rank == 0 && r < static_cast<size_t>(nranks); ++r) {
    for (size_t i = 0; i < iters; ++i) perCallPerRank[i][r] = allUs[r * iters + i];
  }
  return perCallPerRank;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  Args a;
  std::string err;
  const int parsed = parseArgs(argc, argv, &a, &err);
  if (parsed != 0) {
    if (rank == 0) {
      if (parsed == 1) {
        usage(stdout);
      } else {
        std::fprintf(stderr, "arl_mpi_allreduce: %s\n", err.c_str());
      }
    }
    MPI_Finalize();
    return parsed == 1 ? 0 : 2;
  }

  const uint64_t maxCount = a.maxBytes / sizeof(float);
  std::vector<float> send(maxCount), recv(maxCount);
  for (uint64_t i = 0; i < maxCount; ++i) send[i] = inputValue(i, rank);
  // Touch the receive buffer too, so no call pays its first page faults.
  std::fill(recv.begin(), recv.end(), 0.0f);

  if (rank == 0) {
    std::printf("# arl_mpi_allreduce: %s, nranks %d, MPI_Allreduce float sum (library default)\n",
                libraryVersion().c_str(), nranks);
    std::printf("# minBytes %" PRIu64 " maxBytes %" PRIu64 " step: %" PRIu64
                "(factor) warmup iters: %d iters: %d validation: %d\n#\n",
                a.minBytes, a.maxBytes, a.factor, a.warmup, a.iters, a.check);
    std::printf("%s", arl::ncclTestsHeader().c_str());
  }

  std::vector<Row> rows;
  uint64_t wrongTotal = 0;
  for (uint64_t bytes = a.minBytes;;) {
    const uint64_t count = bytes / sizeof(float);

    const uint64_t wrong = a.check ? countWrong(send, recv, count, nranks) : 0;
    const auto perCallPerRank = timeCalls(a, send, recv, count, rank, nranks);

    Row row;
    row.bytes = count * sizeof(float);
    row.count = count;
    row.m = arl::metricsFromTime(arl::Collective::AllReduce, nranks, count, arl::DataType::Float,
                                 arl::slowestRankMeanUs(perCallPerRank), wrong);
    row.rankMeanUs = arl::slowestOfRankMeansUs(perCallPerRank);
    rows.push_back(row);
    wrongTotal += wrong;
    if (rank == 0) {
      std::printf("%s\n", arl::ncclTestsRow(arl::Collective::AllReduce, count, arl::DataType::Float,
                                            arl::RedOp::Sum, -1, row.m)
                              .c_str());
      std::fflush(stdout);
    }
    if (bytes > a.maxBytes / a.factor) break;
    bytes *= a.factor;
  }

  int rc = wrongTotal == 0 ? 0 : 1;
  if (rank == 0) {
    double sum = 0;
    for (const Row& r : rows) sum += r.m.busbwGBps;
    std::printf("# Wrong elements       : %" PRIu64 " %s\n", wrongTotal,
                !a.check          ? "(not checked)"
                : wrongTotal == 0 ? "OK"
                                  : "WRONG");
    std::printf("# Avg bus bandwidth    : %g\n#\n", sum / static_cast<double>(rows.size()));
    if (!a.json.empty() && !writeJson(a.json, a, nranks, rows)) {
      std::fprintf(stderr, "arl_mpi_allreduce: cannot write %s: %s\n", a.json.c_str(),
                   std::strerror(errno));
      rc = 1;
    }
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
