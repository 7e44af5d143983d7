// NCCL's unique id as the control protocol carries it: rank 0's Ready endpoint
// "nccl://id/TOKEN", TOKEN the id's bytes in base64url without padding (RFC 4648, section 5:
// printable ASCII, no '/', so it is one valid endpoint; 128 bytes give 171 characters).
// Plain C++: no CUDA or NCCL header, so it is tested on any machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace arl::gpu {

inline constexpr std::string_view kNcclIdPrefix = "nccl://id/";

// "nccl://id/" + base64url(bytes).
std::string encodeNcclToken(const void* bytes, size_t n);

// The bytes of a token encodeNcclToken() made; nullopt for anything else (another scheme,
// a character outside base64url, a length no byte count encodes to, or not `expect` bytes).
std::optional<std::vector<uint8_t>> decodeNcclToken(std::string_view token, size_t expect);

}  // namespace arl::gpu
