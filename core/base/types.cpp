#include "base/types.h"

#include <array>
#include <limits>
#include <utility>

namespace arl {

namespace {
constexpr std::array<std::pair<Collective, std::string_view>, 5> kCollNames{{
    {Collective::AllReduce, "allreduce"},
    {Collective::ReduceScatter, "reducescatter"},
    {Collective::AllGather, "allgather"},
    {Collective::Reduce, "reduce"},
    {Collective::Broadcast, "broadcast"},
}};
constexpr std::array<std::pair<DataType, std::string_view>, 7> kTypeNames{{
    {DataType::Float, "float"},
    {DataType::Double, "double"},
    {DataType::Half, "half"},
    {DataType::BFloat16, "bfloat16"},
    {DataType::Int32, "int32"},
    {DataType::Int64, "int64"},
    {DataType::Uint8, "uint8"},
}};
constexpr std::array<std::pair<RedOp, std::string_view>, 5> kOpNames{{
    {RedOp::Sum, "sum"},
    {RedOp::Prod, "prod"},
    {RedOp::Min, "min"},
    {RedOp::Max, "max"},
    {RedOp::Avg, "avg"},
}};

template <typename E, size_t N>
std::string_view nameOf(const std::array<std::pair<E, std::string_view>, N>& table, E v) {
  for (const auto& [e, n] : table) {
    if (e == v) return n;
  }
  return "?";
}

template <typename E, size_t N>
std::optional<E> parseName(const std::array<std::pair<E, std::string_view>, N>& table,
                           std::string_view s) {
  for (const auto& [e, n] : table) {
    if (n == s) return e;
  }
  return std::nullopt;
}
}  // namespace

size_t dtypeSize(DataType t) {
  switch (t) {
    case DataType::Float:
    case DataType::Int32: return 4;
    case DataType::Double:
    case DataType::Int64: return 8;
    case DataType::Half:
    case DataType::BFloat16: return 2;
    case DataType::Uint8: return 1;
  }
  return 0;
}

std::string_view toString(Collective c) { return nameOf(kCollNames, c); }
std::string_view toString(DataType t) { return nameOf(kTypeNames, t); }
std::string_view toString(RedOp op) { return nameOf(kOpNames, op); }
std::optional<Collective> parseCollective(std::string_view s) { return parseName(kCollNames, s); }
std::optional<DataType> parseDataType(std::string_view s) {
  // nccl-tests also accepts these aliases.
  if (s == "fp32" || s == "float32") return DataType::Float;
  if (s == "fp64" || s == "float64") return DataType::Double;
  if (s == "fp16" || s == "float16") return DataType::Half;
  if (s == "bf16") return DataType::BFloat16;
  if (s == "int") return DataType::Int32;
  return parseName(kTypeNames, s);
}
std::optional<RedOp> parseRedOp(std::string_view s) { return parseName(kOpNames, s); }

bool collectiveReduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
}

std::optional<uint64_t> parseSize(std::string_view s) {
  if (s.empty()) return std::nullopt;
  uint64_t mult = 1;
  char last = s.back();
  switch (last) {
    case 'K':
    case 'k': mult = 1ULL << 10; break;
    case 'M':
    case 'm': mult = 1ULL << 20; break;
    case 'G':
    case 'g': mult = 1ULL << 30; break;
    default: break;
  }
  if (mult != 1) s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(ch - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  if (v != 0 && v > std::numeric_limits<uint64_t>::max() / mult) return std::nullopt;
  return v * mult;
}

std::optional<int64_t> parseDurationNs(std::string_view s) {
  int64_t unit = 0;
  if (s.ends_with("us")) {
    unit = 1'000;
    s.remove_suffix(2);
  } else if (s.ends_with("ms")) {
    unit = 1'000'000;
    s.remove_suffix(2);
  } else if (s.ends_with("s")) {
    unit = 1'000'000'000;
    s.remove_suffix(1);
  } else {
    return std::nullopt;
  }
  const auto v = parseSize(s);  // digits only: the K/M/G suffixes are letters it would take
  if (!v || s.empty() || s.back() < '0' || s.back() > '9') return std::nullopt;
  if (*v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / unit)) return std::nullopt;
  return static_cast<int64_t>(*v) * unit;
}

std::string formatSize(uint64_t bytes) {
  if (bytes >= (1ULL << 30) && bytes % (1ULL << 30) == 0) return std::to_string(bytes >> 30) + "G";
  if (bytes >= (1ULL << 20) && bytes % (1ULL << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes >= (1ULL << 10) && bytes % (1ULL << 10) == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

}  // namespace arl
