// Command-line helpers shared by the allreduce-lab subcommands: a flag scanner and parsers
// that turn bad input into one-line UsageErrors naming the flag, so that every subcommand
// refuses bad arguments the same way (one line on stderr, exit code 2) before doing anything.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/types.h"

namespace arl::app {

// Bad user input: the subcommand prints "<prog>: <message>" on one line and exits with 2.
struct UsageError {
  std::string message;
};

// "a, b, c" from the canonical names of `values` (toString of each).
template <typename Known>
std::string joinNames(const Known& values) {
  std::string s;
  for (auto v : values) s += (s.empty() ? "" : ", ") + std::string(toString(v));
  return s;
}

// "a, b, c".
std::string joinStrings(const std::vector<std::string>& items);

// Collects the values of a subcommand's flags. A valued flag takes the next argument, or the
// text after '=' when written "--flag=value"; a switch takes no value. The last occurrence
// of a flag wins. "-h" and "--help" end the scan.
class FlagScanner {
 public:
  // Declares a valued flag under one or more names (e.g. {"-b", "--minbytes"}).
  void value(std::initializer_list<std::string_view> names, std::optional<std::string>* out);
  // Declares a switch.
  void flag(std::initializer_list<std::string_view> names, bool* out);

  // Scans `args`. Returns false when help was asked for. Throws UsageError for an unknown
  // argument or a valued flag without its value.
  bool scan(const std::vector<std::string>& args) const;

 private:
  std::map<std::string, std::optional<std::string>*, std::less<>> values_;
  std::map<std::string, bool*, std::less<>> flags_;
};

// An integer in [lo, hi]; UsageError naming `flag` otherwise.
int parseIntArg(std::string_view flag, const std::string& v, int lo, int hi);

// A count with an optional K, M or G suffix (binary multiples) that fits in 64 bits; `unit`
// names what is counted in the error ("bytes", "elements").
uint64_t parseSizeArg(std::string_view flag, const std::string& v, std::string_view unit);

// A known algorithm name (generators.h); UsageError listing the known ones otherwise.
std::string parseAlgorithmArg(std::string_view flag, const std::string& v);
Collective parseCollectiveArg(std::string_view flag, const std::string& v);
DataType parseDataTypeArg(std::string_view flag, const std::string& v);
RedOp parseRedOpArg(std::string_view flag, const std::string& v);

// The collectives `algo` implements, as "allreduce, reduce, ...".
std::string collectivesOf(std::string_view algo);

}  // namespace arl::app
