// Basic vocabulary of the lab: collectives, element types, reduction operators.
// Names follow NCCL / nccl-tests so that users recognise them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace arl {

enum class Collective : uint8_t { AllReduce, ReduceScatter, AllGather, Reduce, Broadcast };
enum class DataType : uint8_t { Float, Double, Half, BFloat16, Int32, Int64, Uint8 };
enum class RedOp : uint8_t { Sum, Prod, Min, Max, Avg };

inline constexpr Collective kAllCollectives[] = {Collective::AllReduce, Collective::ReduceScatter,
                                                 Collective::AllGather, Collective::Reduce,
                                                 Collective::Broadcast};
inline constexpr DataType kAllDataTypes[] = {DataType::Float,    DataType::Double, DataType::Half,
                                             DataType::BFloat16, DataType::Int32,  DataType::Int64,
                                             DataType::Uint8};
inline constexpr RedOp kAllRedOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max, RedOp::Avg};

// Size of one element in bytes.
size_t dtypeSize(DataType t);

// Canonical names ("allreduce", "float", "sum", ...) and their inverses.
// Parsers return nullopt for names they do not know.
std::string_view toString(Collective c);
std::string_view toString(DataType t);
std::string_view toString(RedOp op);
std::optional<Collective> parseCollective(std::string_view s);
std::optional<DataType> parseDataType(std::string_view s);
std::optional<RedOp> parseRedOp(std::string_view s);

// Does the collective reduce (and therefore take a RedOp)?
bool collectiveReduces(Collective c);

// Parses "1M", "64K", "4096", "1G" (binary multiples: K=1024). Returns nullopt on
// malformed text or on overflow of uint64.
std::optional<uint64_t> parseSize(std::string_view s);

// Parses a duration with its unit: "250us", "2ms", "30s" (a whole number; units us, ms, s).
// Returns nanoseconds, or nullopt on malformed text, a missing unit or overflow of int64.
std::optional<int64_t> parseDurationNs(std::string_view s);

// Formats a byte count the way nccl-tests' users read it ("64K", "1M", "1000003").
std::string formatSize(uint64_t bytes);

}  // namespace arl
