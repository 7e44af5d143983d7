// CurveZMQ keys (curve_keys.h). The hash is libsodium's SHA-256, the library libzmq itself
// uses for CURVE on Debian.
#include "transport/zmq/curve_keys.h"

#include <sodium.h>
#include <zmq.h>

#include <array>
#include <cstdio>

#include "base/errors.h"

namespace arl {

bool curveAvailable() { return zmq_has("curve") != 0; }

CurveKeyPair makeCurveKeyPair() {
  std::array<char, kZ85KeyChars + 1> pub{}, sec{};
  if (!curveAvailable() || zmq_curve_keypair(pub.data(), sec.data()) != 0) {
    throw ConfigError("this libzmq was built without CURVE (zmq_has(\"curve\") is false)");
  }
  return {std::string(pub.data(), kZ85KeyChars), std::string(sec.data(), kZ85KeyChars)};
}

std::string curvePublicOf(std::string_view secretKey) {
  if (!isZ85Key(secretKey)) throw ConfigError("not a Z85 CURVE key (40 characters)");
  const std::string sec(secretKey);
  std::array<char, kZ85KeyChars + 1> pub{};
  if (zmq_curve_public(pub.data(), sec.c_str()) != 0) {
    throw ConfigError("this libzmq was built without CURVE (zmq_has(\"curve\") is false)");
  }
  return std::string(pub.data(), kZ85KeyChars);
}

std::string z85KeyBytes(std::string_view key) {
  if (key.size() != kZ85KeyChars) return {};
  const std::string text(key);
  std::array<uint8_t, 32> bytes{};
  if (zmq_z85_decode(bytes.data(), text.c_str()) == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

bool isZ85Key(std::string_view key) { return !z85KeyBytes(key).empty(); }

std::string z85OfKeyBytes(std::string_view bytes) {
  if (bytes.size() != 32) return {};
  std::array<char, kZ85KeyChars + 1> text{};
  zmq_z85_encode(text.data(), reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return std::string(text.data(), kZ85KeyChars);
}

std::string keyFingerprint(std::string_view key) {
  const std::string raw = key.size() == 32 ? std::string(key) : z85KeyBytes(key);
  if (raw.size() != 32) return {};
  std::array<unsigned char, crypto_hash_sha256_BYTES> digest{};
  crypto_hash_sha256(digest.data(), reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
  std::string out;
  char hex[3];
  for (size_t i = 0; i < 8; ++i) {
    if (i > 0 && i % 2 == 0) out += ' ';
    std::snprintf(hex, sizeof hex, "%02x", digest[i]);
    out += hex;
  }
  return out;
}

}  // namespace arl
