// The TCP data plane's handshake (docs/security.md): before a connection carries data, each
// end proves that it holds the secret key of the rank it claims, among the run's members
// (RunConfig::data_keys, the same X25519 key pairs as CURVE's). Three fixed-size messages:
//
//   dialer -> acceptor  Hello   its rank, the rank it dials, a fresh random nonce
//   acceptor -> dialer  Reply   its rank, a fresh nonce, a MAC over both ranks and nonces
//   dialer -> acceptor  Proof   a MAC over the same transcript, the other way
//
// The MAC keys are libsodium's crypto_kx session keys of the two ranks' pairs (the dialer is
// the client), so only the holder of the claimed rank's secret key computes its MAC, and the
// nonces make a recorded handshake useless on another connection. Without keys (a run whose
// data plane stays on one host) the messages name the ranks and carry no MAC.
//
// What this does not do: the data after the handshake goes in the clear, unauthenticated.
// A process that is not a member cannot connect, but an attacker on the path can read or
// alter the stream; zmq (CURVE) encrypts every message for such a network.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace arl {

// A rank's keys for the handshake: raw 32-byte X25519 keys (not Z85).
struct TcpKeys {
  std::string secretKey;                // this rank's
  std::vector<std::string> publicKeys;  // by rank
  bool empty() const { return publicKeys.empty(); }
};

inline constexpr size_t kTcpNonceBytes = 32;
inline constexpr size_t kTcpMacBytes = 32;
inline constexpr size_t kTcpHelloBytes = 48;
inline constexpr size_t kTcpReplyBytes = 80;
inline constexpr size_t kTcpProofBytes = 48;

using TcpNonce = std::array<unsigned char, kTcpNonceBytes>;

// Z85 CURVE keys (BindOptions::curveSecretKey, curvePeerKeys) as raw keys. Throws ConfigError.
TcpKeys tcpKeysFromZ85(const std::string& secretKey, const std::vector<std::string>& publicKeys);

TcpNonce randomNonce();

// The messages, and their checks. A check returns the one-line reason for a refusal, or
// nullopt when the message is good; it never throws.
std::string tcpHello(int from, int to, const TcpNonce& nonce);
struct TcpHello {
  int from = -1;
  int to = -1;
  TcpNonce nonce{};
};
std::optional<std::string> readTcpHello(const std::string& msg, int nranks, TcpHello& out);

std::string tcpReply(const TcpKeys& keys, const TcpHello& hello, const TcpNonce& mine);
// Checked by the dialer `hello.from`, which sent `hello`; sets the acceptor's nonce.
std::optional<std::string> checkTcpReply(const TcpKeys& keys, const TcpHello& hello,
                                         const std::string& msg, TcpNonce& theirs);

std::string tcpProof(const TcpKeys& keys, const TcpHello& hello, const TcpNonce& acceptorNonce);
// Checked by the acceptor `hello.to`.
std::optional<std::string> checkTcpProof(const TcpKeys& keys, const TcpHello& hello,
                                         const TcpNonce& acceptorNonce, const std::string& msg);

}  // namespace arl
