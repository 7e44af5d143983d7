// CurveZMQ keys (RFC 26, http://rfc.zeromq.org/spec/26): a key pair is two 32-byte Curve25519
// keys, written as 40 characters of Z85 (RFC 32), the form libzmq's ZMQ_CURVE_* options and
// zmq_curve_keypair() use. The lab shows a public key as a fingerprint people can read aloud
// and compare: the first 16 hex digits of the SHA-256 of its 32 bytes, in groups of four.
#pragma once

#include <string>
#include <string_view>

namespace arl {

inline constexpr size_t kZ85KeyChars = 40;

struct CurveKeyPair {
  std::string publicKey;  // Z85, kZ85KeyChars
  std::string secretKey;  // Z85, kZ85KeyChars
};

// Whether this libzmq was built with CURVE (zmq_has("curve")).
bool curveAvailable();

// A fresh key pair (zmq_curve_keypair). Throws ConfigError when libzmq has no CURVE.
CurveKeyPair makeCurveKeyPair();

// The public key of a Z85 secret key (zmq_curve_public). Throws ConfigError when `secretKey`
// is not a Z85 key.
std::string curvePublicOf(std::string_view secretKey);

// Whether `key` is 40 characters that decode as Z85 to 32 bytes.
bool isZ85Key(std::string_view key);

// The 32 bytes of a Z85 key; "" when it is not one.
std::string z85KeyBytes(std::string_view key);
// The Z85 text of 32 key bytes.
std::string z85OfKeyBytes(std::string_view bytes);

// "3f2a 9c01 b7e4 0d55": the first 16 hex digits of SHA-256 over the key's 32 bytes. Takes
// the key as Z85, or as its 32 bytes (what a ZAP request carries). "" for anything else.
std::string keyFingerprint(std::string_view key);

}  // namespace arl
