#include "cli_util.h"

#include <sys/stat.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdint>

#include "base/endpoint.h"
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

void Options::repeated(const std::string& names, const std::string& type, const std::string& help) {
  CLI::Option* o = app_->add_option(names)->description(wrap(help, kHelpWidth));
  o->type_name(type)->group(group_)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  values_["--" + o->get_lnames().front()] = o;
}

std::vector<Arg> Options::getAll(const std::string& longName) const {
  std::vector<Arg> out;
  const auto it = values_.find(longName);
  if (it == values_.end()) return out;
  for (const std::string& v : it->second->results()) out.push_back({spelling(*it->second), v});
  return out;
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
  // A name never declared is the code's mistake, and would ignore what the user typed.
  ARL_ENFORCE(it != values_.end(), "Options::get(" << longName << "): no such option declared");
  if (it->second->count() == 0) return std::nullopt;
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

namespace arl::app {

namespace {

constexpr const char* kRateRule =
    "must be a rate in bytes per second above 0, e.g. 500M (K, M, G = 1e3, 1e6, 1e9)";

int rankOf(const Arg& whole, std::string_view t, int nranks) {
  const std::string range =
      " for " + std::to_string(nranks) + " ranks (0.." + std::to_string(nranks - 1) + ")";
  int r = 0;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), r);
  if (t.empty() || p != t.data() + t.size() || ec != std::errc()) {
    throw refuse(whole, "'" + std::string(t) + "' is not a rank" + range);
  }
  if (r < 0 || r >= nranks) {
    throw refuse(whole, "rank " + std::to_string(r) + " is out of range" + range);
  }
  return r;
}

// "X:RATE" split at its last colon into X and the rate.
std::pair<std::string, double> withRate(const Arg& a, const std::string& form) {
  const size_t colon = a.text.rfind(':');
  if (colon == std::string::npos) throw refuse(a, "expected " + form);
  try {
    return {a.text.substr(0, colon), parseRate(Arg{a.flag, a.text.substr(colon + 1)})};
  } catch (const UsageError&) {
    throw refuse(a, "'" + a.text.substr(colon + 1) + "' " + std::string(kRateRule));
  }
}

}  // namespace

double parseRate(const Arg& a) {
  const std::optional<double> r = parseRateText(a.text);
  if (!r) throw refuse(a, kRateRule);
  return *r;
}

// "tcp://HOST:PORT" with a numeric port (or '*': any free port).
void checkListen(const Arg& a) {
  const std::string expected = "expected tcp://ADDR:PORT, PORT in 1..65535 or *";
  const auto ep = splitTcp(a.text);
  if (!ep) throw refuse(a, expected);
  const std::string& port = ep->port;
  if (port == "*") return;
  if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit) ||
      std::stoi(port) < 1 || std::stoi(port) > 65535) {
    throw refuse(a, expected);
  }
}

void declareSecurity(Options& o, bool* insecure) {
  o.value("--keys", "DIR",
          "the lab's key pair (allreduce-lab keys; default $XDG_CONFIG_HOME/allreduce-lab or "
          "~/.config/allreduce-lab): a listen on a non-loopback address serves with it, "
          "encrypted, and admits the workers of --allow; given, a loopback listen uses it too");
  o.value("--allow", "FILE",
          "public keys of the workers admitted, one a line (default allowed_workers in the "
          "keys folder)");
  o.flag("--insecure", insecure,
         "listen on a non-loopback address in the clear, without keys: anyone who reaches the "
         "port may join and read the data (a trusted network only)");
}

ControlSecurity parseSecurity(const Options& o, bool insecure) {
  ControlSecurity s;
  s.insecure = insecure;
  if (auto v = o.get("--keys")) {
    struct stat st {};
    if (::stat(v->text.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      throw refuse(*v, "is not a folder (make a key pair there with: allreduce-lab keys --dir " +
                           v->text + ")");
    }
    s.keysDir = v->text;
    s.keysAsked = true;
  }
  if (auto v = o.get("--allow")) {
    if (v->text.empty()) throw refuse(*v, "needs a file name");
    s.allowFile = v->text;
  }
  if (insecure && s.keysAsked) {
    throw refuse(*o.get("--keys"), "and --insecure contradict each other; give one");
  }
  return s;
}

void declareShaping(Options& o) {
  o.group(
      "Network shaping (the data planes pace every transfer; RATE in bytes/s, K, M, G = "
      "1e3, 1e6, 1e9)");
  o.value("--nic-bw", "RATE", "every rank's port, each direction (full duplex), e.g. 500M");
  o.value("--link-latency", "TIME", "added to every message, e.g. 50us, 2ms");
  o.repeated("--slow-rank", "R:RATE", "rank R's port at RATE, each direction (repeatable)");
  o.repeated("--slow-link", "A-B:RATE", "the directed link A -> B at RATE (repeatable)");
  o.value("--topology", "NAME",
          "a named network (docs/topologies.md): torus:RxC[@RATE] (ranks row-major on an R x C "
          "grid with wrap-around, a path at RATE / hops) or fat-tree:K[:O][@RATE] (leaves of K "
          "ranks, uplinks O:1); RATE is one link's, else --nic-bw's; --link-latency is then "
          "per hop");
}

std::optional<Topology> parseTopologyFlag(const Options& o, int nranks) {
  const auto v = o.get("--topology");
  if (!v) return std::nullopt;
  try {
    const Topology t = parseTopology(v->text);
    checkTopology(t, nranks);
    return t;
  } catch (const TopologyError& e) {
    throw refuse(*v, e.what());
  }
}

namespace {

// The shaping of --topology over `base` (ports and added latency from the other flags); the
// latency given is per hop. A slow link would compete with the topology's own links: refused.
LinkShaping withTopology(const Options& o, const Topology& t, LinkShaping base, int nranks) {
  if (const std::vector<Arg> links = o.getAll("--slow-link"); !links.empty()) {
    throw refuse(links.front(), "--topology sets every link's rate; give one or the other");
  }
  const double hop = base.addedLatencySeconds;
  base.addedLatencySeconds = 0;
  try {
    return expandTopology(t, nranks, std::move(base), hop);
  } catch (const TopologyError& e) {
    throw refuse(*o.get("--topology"), e.what());
  }
}

}  // namespace

LinkShaping parseUniformShaping(const Options& o) {
  LinkShaping s;
  if (auto v = o.get("--nic-bw")) s.portBytesPerSecond = parseRate(*v);
  if (auto v = o.get("--link-latency")) {
    const auto ns = parseDurationNs(v->text);
    if (!ns || *ns < 0) throw refuse(*v, "must be a duration with its unit, e.g. 50us, 2ms, 1s");
    s.addedLatencySeconds = static_cast<double>(*ns) / 1e9;
  }
  return s;
}

LinkShaping parseShaping(const Options& o, int nranks) {
  LinkShaping s = parseUniformShaping(o);
  for (const Arg& a : o.getAll("--slow-rank")) {
    const auto [who, rate] = withRate(a, "R:RATE, e.g. 2:50M");
    const int r = rankOf(a, who, nranks);
    if (!s.rankPortBytesPerSecond.emplace(r, rate).second) {
      throw refuse(a, "rank " + std::to_string(r) + " is already slowed");
    }
  }
  for (const Arg& a : o.getAll("--slow-link")) {
    const auto [link, rate] = withRate(a, "A-B:RATE, e.g. 1-2:50M");
    const size_t dash = link.find('-');
    if (dash == std::string::npos) throw refuse(a, "expected A-B:RATE, e.g. 1-2:50M");
    const int from = rankOf(a, std::string_view(link).substr(0, dash), nranks);
    const int to = rankOf(a, std::string_view(link).substr(dash + 1), nranks);
    if (from == to) throw refuse(a, "a link joins two different ranks");
    if (!s.linkBytesPerSecond.emplace(std::pair{from, to}, rate).second) {
      throw refuse(a, "link " + link + " is already slowed");
    }
  }
  if (const auto t = parseTopologyFlag(o, nranks)) return withTopology(o, *t, std::move(s), nranks);
  return s;
}

std::optional<Arg> givenFor(const Options& o, const std::string& flag, const RunRequestError& e) {
  if (e.field != RunField::SlowRank && e.field != RunField::SlowLink) return o.get(flag);
  for (const Arg& a : o.getAll(flag)) {
    if (a.text.substr(0, a.text.rfind(':')) == e.value) return a;
  }
  return std::nullopt;
}

std::string flagOf(RunField f, const RunFieldFlags& own) {
  switch (f) {
    case RunField::Ranks: return std::string(own.ranks);
    case RunField::Algorithm: return "--algo";
    case RunField::Collective: return "--collective";
    case RunField::Count: return std::string(own.count);
    case RunField::SliceBytes: return "--slice";
    case RunField::Root: return "--root";
    case RunField::RanksPerHost: return "--ranks-per-host";
    case RunField::RingOrder: return "--ring-order";
    case RunField::Inflight: return "--inflight";
    case RunField::Warmup: return std::string(own.warmup);
    case RunField::Iterations: return "--iters";
    case RunField::StallTimeout: return "--stall-timeout";
    case RunField::PortRate: return "--nic-bw";
    case RunField::AddedLatency: return "--link-latency";
    case RunField::SlowRank: return "--slow-rank";
    case RunField::SlowLink: return "--slow-link";
    case RunField::MismatchRank: return "--mismatch-rank";
    case RunField::Radix: return "--radix";
    case RunField::Window: return "--window";
  }
  return std::string(describe(f));
}

UsageError refuse(const RunRequestError& e, const Options& o, const RunFieldFlags& own) {
  const std::string flag = flagOf(e.field, own);
  return refuse(e, givenFor(o, flag, e), flag);
}

std::string printfString(const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  va_list again;
  va_copy(again, ap);
  const int n = std::vsnprintf(nullptr, 0, format, ap);
  va_end(ap);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  return out;
}

}  // namespace arl::app
