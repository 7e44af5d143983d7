#include "gpu/nccl_token.h"

namespace arl::gpu {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int valueOf(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

}  // namespace

std::string encodeNcclToken(const void* bytes, size_t n) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  std::string out(kNcclIdPrefix);
  // Each 3 bytes give 4 characters; a tail of 1 or 2 bytes gives 2 or 3 (no padding).
  for (size_t i = 0; i < n; i += 3) {
    const size_t left = n - i;
    const uint32_t b = (uint32_t{p[i]} << 16) | (left > 1 ? uint32_t{p[i + 1]} << 8 : 0u) |
                       (left > 2 ? uint32_t{p[i + 2]} : 0u);
    out += kAlphabet[(b >> 18) & 63];
    out += kAlphabet[(b >> 12) & 63];
    if (left > 1) out += kAlphabet[(b >> 6) & 63];
    if (left > 2) out += kAlphabet[b & 63];
  }
  return out;
}

std::optional<std::vector<uint8_t>> decodeNcclToken(std::string_view token, size_t expect) {
  if (token.substr(0, kNcclIdPrefix.size()) != kNcclIdPrefix) return std::nullopt;
  const std::string_view t = token.substr(kNcclIdPrefix.size());
  if (t.size() % 4 == 1) return std::nullopt;  // no byte count encodes to this length
  std::vector<uint8_t> out;
  out.reserve(t.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : t) {
    const int v = valueOf(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>(acc >> bits));
      acc &= (1u << bits) - 1u;
    }
  }
  if (acc != 0) return std::nullopt;  // the unused low bits of a tail must be zero
  if (out.size() != expect) return std::nullopt;
  return out;
}

}  // namespace arl::gpu
