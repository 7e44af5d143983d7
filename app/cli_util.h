// What the allreduce-lab subcommands share on top of CLI11: options whose text is kept and
// checked after the parse, so that every refusal, whatever the option, is one line naming
// the flag as the user wrote it, the value and what is accepted ("--inflight 2000: must be
// in 1..1024"), printed as "<prog>: <message>" with exit code 2 before anything starts.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/shaping.h"
#include "base/topology.h"
#include "base/types.h"
#include "exec/run_request.h"
#include "runtime/run_types.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace arl::app {

// Bad user input.
struct UsageError {
  std::string message;
};

// A flag's value as given, under the name it was given with ("-n" or "--iters").
struct Arg {
  std::string flag;
  std::string text;
};

// `text` with its lines broken at spaces to at most `width` characters (CLI11 indents the
// lines after the first of an option's help; it wraps nothing itself).
std::string wrap(const std::string& text, size_t width);

// "<flag> <text>: <rule>".
UsageError refuse(const Arg& a, const std::string& rule);

// The options of one subcommand. Valued options keep their text; the subcommand converts
// and checks it after the parse with the parse functions below.
class Options {
 public:
  // `args`: the command line as given (without argv[0]), read to name a flag as the user
  // spelt it. Both must outlive this object.
  Options(CLI::App* app, const std::vector<std::string>& args) : app_(app), args_(args) {}

  // Options declared after this show under `name` in the help.
  void group(std::string name) { group_ = std::move(name); }
  // A valued option under CLI11's `names` ("-b,--minbytes"); `type` names its value in the
  // help ("SIZE"). Its first long name ("--minbytes") is its key for get(). The help is
  // wrapped unless `wrapHelp` is false (a line that scripts read).
  void value(const std::string& names, const std::string& type, const std::string& help,
             bool wrapHelp = true);
  void flag(const std::string& names, bool* out, const std::string& help);
  // A valued option that may be given several times; getAll() returns every value.
  void repeated(const std::string& names, const std::string& type, const std::string& help);

  // The value given to the option keyed `longName` ("--iters"), if it was given.
  std::optional<Arg> get(const std::string& longName) const;
  // Every value given to a repeated() option, in order.
  std::vector<Arg> getAll(const std::string& longName) const;
  // The value given, or `fallback` under the option's long name.
  Arg getOr(const std::string& longName, const std::string& fallback) const;

 private:
  std::string spelling(const CLI::Option& o) const;

  CLI::App* app_;
  const std::vector<std::string>& args_;
  std::string group_ = "Options";
  std::map<std::string, CLI::Option*> values_;  // by long name
};

// A control endpoint to listen on: "tcp://HOST:PORT" with a numeric port (or '*': any free
// port); refuses anything else.
void checkListen(const Arg& a);
// An integer in [lo, hi].
int parseInt(const Arg& a, int lo, int hi);
// A count with an optional K, M or G suffix (binary multiples) that fits in 64 bits.
uint64_t parseSize(const Arg& a);
// A duration with its unit ("500ms", "30s") in whole milliseconds, in [1 ms, maxMs].
std::chrono::milliseconds parseMillis(const Arg& a, int64_t maxMs);
// An integer for a field that resolveRunRequest checks (it names the accepted range): values
// beyond int saturate, which that check refuses as out of range.
int parseInteger(const Arg& a);
// Comma-separated lists: "64K,256K,1M", "0,2,1,3".
std::vector<uint64_t> parseSizeList(const Arg& a);
std::vector<int> parseIntegerList(const Arg& a);
// A comma-separated list of names, each once, none empty.
std::vector<std::string> parseNameList(const Arg& a);

// A rate in bytes per second: a positive number with an optional K, M or G suffix (powers of
// ten: 500M = 500e6 B/s).
double parseRate(const Arg& a);
// The network shaping flags that `bench`, `plan`, `train` and `gui` share (base/shaping.h):
// --nic-bw RATE, --link-latency TIME, --slow-rank R:RATE, --slow-link A-B:RATE and
// --topology NAME (base/topology.h).
void declareShaping(Options& o);

// The control socket's keys when the lab listens (docs/security.md), as bench and gui take
// them: --keys DIR, --allow FILE, --insecure (into *insecure).
void declareSecurity(Options& o, bool* insecure);
// Checks them: --keys must be a folder. Giving --keys asks for keys on a loopback listen too.
ControlSecurity parseSecurity(const Options& o, bool insecure);
// Their values for a world of `nranks` ranks, checked: a refusal names the flag and value
// ("--slow-rank 7:50M: rank 7 is out of range for 4 ranks (0..3)"). With --topology every
// link is the topology's and --link-latency is per hop.
LinkShaping parseShaping(const Options& o, int nranks);
// --nic-bw and --link-latency alone, checked (they hold for any number of ranks).
LinkShaping parseUniformShaping(const Options& o);
// --topology's value checked for a world of `nranks` ranks ("--topology torus:4x4:
// torus:4x4 has 16 ranks, the run has 8"); none when not given.
std::optional<Topology> parseTopologyFlag(const Options& o, int nranks);
// The value given to `flag` that refusal `e` is about: for --slow-rank and --slow-link, the
// occurrence that names e.value's rank or link (none when no occurrence spells it so); for
// other flags, the value given.
std::optional<Arg> givenFor(const Options& o, const std::string& flag, const RunRequestError& e);

// "ring, tree, ...": the known algorithms, for help texts.
std::string algorithmList();

Collective parseCollective(const Arg& a);
DataType parseDataType(const Arg& a);
RedOp parseRedOp(const Arg& a);

// A refused run request as a refusal of the flag that set the field: `flag` (the user's
// spelling when given) and its text when it is one value, else the request's value.
UsageError refuse(const RunRequestError& e, const std::optional<Arg>& given,
                  const std::string& longName);

// The flags of a command for the run request's fields that the commands name differently;
// every other field has the same flag in every command ("--inflight", "--slice", ...).
struct RunFieldFlags {
  std::string_view ranks;   // bench: --workers; plan: --ranks
  std::string_view count;   // bench: --maxbytes; plan: --count
  std::string_view warmup;  // bench: --warmup_iters; plan: --warmup
};

// The flag that sets field `f` of a command's run requests (its long name).
std::string flagOf(RunField f, const RunFieldFlags& own);

// A refused run request as a refusal of the flag of `o` that set the field (refuse() above,
// with the value given to it as givenFor() finds it).
UsageError refuse(const RunRequestError& e, const Options& o, const RunFieldFlags& own);

// Runs a command's check-then-run: a UsageError is printed as "<prog>: <message>" on stderr
// and gives exit code 2.
template <typename F>
int runChecked(const char* prog, F&& f) {
  try {
    return f();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n", prog, e.message.c_str());
    return 2;
  }
}

// printf into a std::string (of any length).
std::string printfString(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace arl::app
