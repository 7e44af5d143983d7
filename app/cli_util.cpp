#include "cli_util.h"

#include <algorithm>
#include <charconv>

#include "schedule/generators.h"

namespace arl::app {

std::string joinStrings(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

void FlagScanner::value(std::initializer_list<std::string_view> names,
                        std::optional<std::string>* out) {
  for (std::string_view n : names) values_[std::string(n)] = out;
}

void FlagScanner::flag(std::initializer_list<std::string_view> names, bool* out) {
  for (std::string_view n : names) flags_[std::string(n)] = out;
}

bool FlagScanner::scan(const std::vector<std::string>& args) const {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "-h" || arg == "--help") return false;
    if (auto f = flags_.find(arg); f != flags_.end()) {
      *f->second = true;
      continue;
    }
    std::optional<std::string> inlineValue;
    if (auto eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
      inlineValue = arg.substr(eq + 1);
      arg.resize(eq);
    }
    auto it = values_.find(arg);
    if (it == values_.end()) throw UsageError{"unknown argument '" + args[i] + "' (see --help)"};
    if (inlineValue) {
      *it->second = *inlineValue;
    } else {
      if (i + 1 >= args.size()) throw UsageError{arg + " needs a value"};
      *it->second = args[++i];
    }
  }
  return true;
}

int parseIntArg(std::string_view flag, const std::string& v, int lo, int hi) {
  int x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  // from_chars reports a number too large for int as out of range, having read all of it.
  const bool whole = !v.empty() && p == v.data() + v.size();
  if (!whole || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    throw UsageError{std::string(flag) + " expects an integer (got '" + v + "')"};
  }
  if (ec == std::errc::result_out_of_range || x < lo || x > hi) {
    throw UsageError{std::string(flag) + " must be between " + std::to_string(lo) + " and " +
                     std::to_string(hi) + " (got " + v + ")"};
  }
  return x;
}

uint64_t parseSizeArg(std::string_view flag, const std::string& v, std::string_view unit) {
  auto x = parseSize(v);
  if (!x) {
    throw UsageError{std::string(flag) + " expects a number of " + std::string(unit) +
                     " with an optional K, M or G suffix that fits in 64 bits (got '" + v + "')"};
  }
  return *x;
}

std::string parseAlgorithmArg(std::string_view flag, const std::string& v) {
  const auto& names = algorithmNames();
  if (std::find(names.begin(), names.end(), v) == names.end()) {
    throw UsageError{std::string(flag) + ": unknown algorithm '" + v +
                     "' (known: " + joinStrings(names) + ")"};
  }
  return v;
}

Collective parseCollectiveArg(std::string_view flag, const std::string& v) {
  auto c = parseCollective(v);
  if (!c) {
    throw UsageError{std::string(flag) + ": unknown collective '" + v +
                     "' (known: " + joinNames(kAllCollectives) + ")"};
  }
  return *c;
}

DataType parseDataTypeArg(std::string_view flag, const std::string& v) {
  auto t = parseDataType(v);
  if (!t) {
    throw UsageError{std::string(flag) + ": unknown type '" + v +
                     "' (known: " + joinNames(kAllDataTypes) + ")"};
  }
  return *t;
}

RedOp parseRedOpArg(std::string_view flag, const std::string& v) {
  auto o = parseRedOp(v);
  if (!o) {
    throw UsageError{std::string(flag) + ": unknown reduction '" + v +
                     "' (known: " + joinNames(kAllRedOps) + ")"};
  }
  return *o;
}

std::string collectivesOf(std::string_view algo) {
  std::string supported;
  for (Collective c : kAllCollectives) {
    if (algorithmSupports(algo, c)) {
      supported += (supported.empty() ? "" : ", ") + std::string(toString(c));
    }
  }
  return supported;
}

}  // namespace arl::app
