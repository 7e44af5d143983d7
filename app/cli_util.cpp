#include "cli_util.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>

#include "schedule/generators.h"

namespace arl::app {

namespace {

// Characters of an option's help on one line, right of CLI11's 30-column names.
constexpr size_t kHelpWidth = 66;

template <typename Known>
std::string joinNames(const Known& values) {
  std::string s;
  for (auto v : values) s += (s.empty() ? "" : ", ") + std::string(toString(v));
  return s;
}

// The comma-separated items of `a`, each as an Arg of its own; an empty item is refused.
std::vector<Arg> items(const Arg& a) {
  std::vector<Arg> out;
  size_t p = 0;
  while (p <= a.text.size()) {
    const size_t comma = std::min(a.text.find(',', p), a.text.size());
    out.push_back({a.flag, a.text.substr(p, comma - p)});
    if (out.back().text.empty()) throw refuse(a, "an empty item in the list");
    p = comma + 1;
  }
  return out;
}

}  // namespace

std::string wrap(const std::string& text, size_t width) {
  std::string out;
  size_t lineStart = 0;  // in out
  size_t p = 0;
  while (p < text.size()) {
    const size_t end = std::min(text.find_first_of(" \n", p), text.size());
    const std::string word = text.substr(p, end - p);
    if (out.size() > lineStart && out.size() - lineStart + 1 + word.size() > width) {
      out += '\n';
      lineStart = out.size();
    } else if (out.size() > lineStart) {
      out += ' ';
    }
    out += word;
    if (end < text.size() && text[end] == '\n') {
      out += '\n';
      lineStart = out.size();
    }
    p = end + 1;
  }
  return out;
}

UsageError refuse(const Arg& a, const std::string& rule) {
  return UsageError{a.flag + " " + a.text + ": " + rule};
}

void Options::value(const std::string& names, const std::string& type, const std::string& help,
                    bool wrapHelp) {
  CLI::Option* o = app_->add_option(names)->description(wrapHelp ? wrap(help, kHelpWidth) : help);
  o->type_name(type)->group(group_);
  values_["--" + o->get_lnames().front()] = o;
}

void Options::flag(const std::string& names, bool* out, const std::string& help) {
  app_->add_flag(names, *out)->description(wrap(help, kHelpWidth))->group(group_);
}

std::string Options::spelling(const CLI::Option& o) const {
  std::string used = "--" + o.get_lnames().front();
  for (const std::string& a : args_) {
    for (const std::string& l : o.get_lnames()) {
      const std::string name = "--" + l;
      if (a == name || a.rfind(name + "=", 0) == 0) used = name;
    }
    for (const std::string& s : o.get_snames()) {
      const std::string name = "-" + s;
      if (a.rfind(name, 0) == 0 && a.rfind("--", 0) != 0) used = name;
    }
  }
  return used;
}

std::optional<Arg> Options::get(const std::string& longName) const {
  const auto it = values_.find(longName);
  if (it == values_.end() || it->second->count() == 0) return std::nullopt;
  return Arg{spelling(*it->second), it->second->results().back()};
}

Arg Options::getOr(const std::string& longName, const std::string& fallback) const {
  if (auto a = get(longName)) return *a;
  return Arg{longName, fallback};
}

int parseInt(const Arg& a, int lo, int hi) {
  int x = 0;
  const char* end = a.text.data() + a.text.size();
  auto [p, ec] = std::from_chars(a.text.data(), end, x);
  const std::string range = "must be in " + std::to_string(lo) + ".." + std::to_string(hi);
  if (a.text.empty() || p != end) throw refuse(a, "not an integer; " + range);
  if (ec == std::errc::result_out_of_range || x < lo || x > hi) throw refuse(a, range);
  return x;
}

int parseInteger(const Arg& a) {
  int64_t x = 0;
  const char* end = a.text.data() + a.text.size();
  auto [p, ec] = std::from_chars(a.text.data(), end, x);
  if (a.text.empty() || p != end) throw refuse(a, "not an integer");
  if (ec == std::errc::result_out_of_range) x = a.text.front() == '-' ? INT64_MIN : INT64_MAX;
  return static_cast<int>(std::clamp<int64_t>(x, INT_MIN, INT_MAX));
}

uint64_t parseSize(const Arg& a) {
  const auto x = arl::parseSize(a.text);
  if (!x) {
    throw refuse(a,
                 "not a whole number with an optional K, M or G suffix (2^10, 2^20, 2^30) "
                 "that fits in 64 bits");
  }
  return *x;
}

std::chrono::milliseconds parseMillis(const Arg& a, int64_t maxMs) {
  const auto ns = arl::parseDurationNs(a.text);
  if (!ns)
    throw refuse(a, "not a duration: a whole number with a unit, us, ms or s (e.g. 500ms, 30s)");
  if (*ns < 1'000'000 || *ns % 1'000'000 != 0 || *ns / 1'000'000 > maxMs) {
    throw refuse(a, "must be whole milliseconds from 1ms to " + std::to_string(maxMs / 1000) + "s");
  }
  return std::chrono::milliseconds(*ns / 1'000'000);
}

std::vector<uint64_t> parseSizeList(const Arg& a) {
  std::vector<uint64_t> out;
  for (const Arg& i : items(a)) out.push_back(parseSize(i));
  return out;
}

std::vector<int> parseIntegerList(const Arg& a) {
  std::vector<int> out;
  for (const Arg& i : items(a)) out.push_back(parseInteger(i));
  return out;
}

std::string algorithmList() {
  std::string s;
  for (const std::string& a : algorithmNames()) s += (s.empty() ? "" : ", ") + a;
  return s;
}

std::vector<std::string> parseNameList(const Arg& a) {
  std::vector<std::string> out;
  for (const Arg& i : items(a)) {
    if (std::find(out.begin(), out.end(), i.text) != out.end()) {
      throw refuse(a, "names " + i.text + " twice");
    }
    out.push_back(i.text);
  }
  return out;
}

Collective parseCollective(const Arg& a) {
  if (auto c = arl::parseCollective(a.text)) return *c;
  throw refuse(a, "unknown collective (known: " + joinNames(kAllCollectives) + ")");
}

DataType parseDataType(const Arg& a) {
  if (auto t = arl::parseDataType(a.text)) return *t;
  throw refuse(a, "unknown type (known: " + joinNames(kAllDataTypes) + ")");
}

RedOp parseRedOp(const Arg& a) {
  if (auto o = arl::parseRedOp(a.text)) return *o;
  throw refuse(a, "unknown reduction (known: " + joinNames(kAllRedOps) + ")");
}

UsageError refuse(const RunRequestError& e, const std::optional<Arg>& given,
                  const std::string& longName) {
  if (given && given->text.find(',') == std::string::npos) return refuse(*given, e.rule);
  return refuse(Arg{given ? given->flag : longName, e.value}, e.rule);
}

}  // namespace arl::app
