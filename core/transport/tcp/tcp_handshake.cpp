#include "transport/tcp/tcp_handshake.h"

#include <sodium.h>

#include <cstring>

#include "base/errors.h"
#include "transport/zmq/curve_keys.h"

namespace arl {

namespace {

constexpr uint32_t kHelloMagic = 0x41524C48;  // "ARLH"
constexpr uint32_t kReplyMagic = 0x41524C52;  // "ARLR"
constexpr uint32_t kProofMagic = 0x41524C50;  // "ARLP"
constexpr uint32_t kVersion = 1;

static_assert(crypto_auth_BYTES == kTcpMacBytes &&
              crypto_auth_KEYBYTES == crypto_kx_SESSIONKEYBYTES);

void put32(std::string& s, size_t at, uint32_t v) { std::memcpy(s.data() + at, &v, 4); }
uint32_t get32(const std::string& s, size_t at) {
  uint32_t v = 0;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}
const unsigned char* bytes(const std::string& s, size_t at = 0) {
  return reinterpret_cast<const unsigned char*>(s.data() + at);
}

// Which way a MAC goes: the acceptor's (in Reply) and the dialer's (in Proof) never match,
// so neither can be sent back as the other.
enum class Way : unsigned char { Acceptor = 'A', Dialer = 'D' };

std::string transcript(Way way, const TcpHello& h, const TcpNonce& acceptorNonce) {
  std::string t = "arl-tcp-1";
  t.push_back(static_cast<char>(way));
  t.resize(t.size() + 8);
  put32(t, t.size() - 8, static_cast<uint32_t>(h.from));
  put32(t, t.size() - 4, static_cast<uint32_t>(h.to));
  t.append(reinterpret_cast<const char*>(h.nonce.data()), h.nonce.size());
  t.append(reinterpret_cast<const char*>(acceptorNonce.data()), acceptorNonce.size());
  return t;
}

// The key `self` MACs with (tx) or checks the other end's MAC with (rx).
std::array<unsigned char, crypto_kx_SESSIONKEYBYTES> sessionKey(const TcpKeys& k, const TcpHello& h,
                                                                bool dialer, bool transmit) {
  std::array<unsigned char, crypto_kx_SESSIONKEYBYTES> rx{}, tx{};
  const int self = dialer ? h.from : h.to;
  const int other = dialer ? h.to : h.from;
  const auto* pk = bytes(k.publicKeys[static_cast<size_t>(self)]);
  const auto* sk = bytes(k.secretKey);
  const auto* theirs = bytes(k.publicKeys[static_cast<size_t>(other)]);
  const int rc = dialer ? crypto_kx_client_session_keys(rx.data(), tx.data(), pk, sk, theirs)
                        : crypto_kx_server_session_keys(rx.data(), tx.data(), pk, sk, theirs);
  if (rc != 0) rx.fill(0), tx.fill(0);  // a degenerate public key: every MAC then fails
  return transmit ? tx : rx;
}

std::string mac(const TcpKeys& k, Way way, const TcpHello& h, const TcpNonce& acceptorNonce) {
  std::string out(kTcpMacBytes, '\0');
  if (k.empty()) return out;
  const auto key = sessionKey(k, h, way == Way::Dialer, true);
  const std::string t = transcript(way, h, acceptorNonce);
  crypto_auth(reinterpret_cast<unsigned char*>(out.data()), bytes(t), t.size(), key.data());
  return out;
}

bool macGood(const TcpKeys& k, Way way, const TcpHello& h, const TcpNonce& acceptorNonce,
             const std::string& msg, size_t at) {
  if (k.empty()) return true;
  // The checker is the other end: the acceptor checks the dialer's MAC and the other way.
  const auto key = sessionKey(k, h, way == Way::Acceptor, false);
  const std::string t = transcript(way, h, acceptorNonce);
  return crypto_auth_verify(bytes(msg, at), bytes(t), t.size(), key.data()) == 0;
}

}  // namespace

TcpKeys tcpKeysFromZ85(const std::string& secretKey, const std::vector<std::string>& publicKeys) {
  if (sodium_init() < 0) throw ConfigError("libsodium failed to initialise");
  TcpKeys k;
  if (publicKeys.empty() && secretKey.empty()) return k;
  k.secretKey = z85KeyBytes(secretKey);
  if (k.secretKey.empty()) throw ConfigError("the data-plane secret key is not Z85");
  for (size_t r = 0; r < publicKeys.size(); ++r) {
    k.publicKeys.push_back(z85KeyBytes(publicKeys[r]));
    if (k.publicKeys.back().empty()) {
      throw ConfigError("the data-plane key of rank " + std::to_string(r) + " is not Z85");
    }
  }
  return k;
}

TcpNonce randomNonce() {
  TcpNonce n{};
  randombytes_buf(n.data(), n.size());
  return n;
}

std::string tcpHello(int from, int to, const TcpNonce& nonce) {
  std::string m(kTcpHelloBytes, '\0');
  put32(m, 0, kHelloMagic);
  put32(m, 4, kVersion);
  put32(m, 8, static_cast<uint32_t>(from));
  put32(m, 12, static_cast<uint32_t>(to));
  std::memcpy(m.data() + 16, nonce.data(), nonce.size());
  return m;
}

std::optional<std::string> readTcpHello(const std::string& msg, int nranks, TcpHello& out) {
  if (msg.size() != kTcpHelloBytes || get32(msg, 0) != kHelloMagic) {
    return "not an allreduce-lab data-plane hello";
  }
  if (get32(msg, 4) != kVersion) {
    return "handshake version " + std::to_string(get32(msg, 4)) + ", expected " +
           std::to_string(kVersion);
  }
  out.from = static_cast<int>(get32(msg, 8));
  out.to = static_cast<int>(get32(msg, 12));
  if (out.from < 0 || out.from >= nranks || out.to < 0 || out.to >= nranks) {
    return "hello names rank " + std::to_string(out.from) + " -> " + std::to_string(out.to) +
           ", not in [0, " + std::to_string(nranks) + ")";
  }
  std::memcpy(out.nonce.data(), msg.data() + 16, out.nonce.size());
  return std::nullopt;
}

std::string tcpReply(const TcpKeys& keys, const TcpHello& hello, const TcpNonce& mine) {
  std::string m(kTcpReplyBytes, '\0');
  put32(m, 0, kReplyMagic);
  put32(m, 4, static_cast<uint32_t>(hello.to));
  std::memcpy(m.data() + 16, mine.data(), mine.size());
  const std::string tag = mac(keys, Way::Acceptor, hello, mine);
  std::memcpy(m.data() + 48, tag.data(), tag.size());
  return m;
}

std::optional<std::string> checkTcpReply(const TcpKeys& keys, const TcpHello& hello,
                                         const std::string& msg, TcpNonce& theirs) {
  if (msg.size() != kTcpReplyBytes || get32(msg, 0) != kReplyMagic) {
    return "rank " + std::to_string(hello.to) + "'s address answered with no handshake reply";
  }
  if (static_cast<int>(get32(msg, 4)) != hello.to) {
    return "the reply names rank " + std::to_string(static_cast<int>(get32(msg, 4))) +
           ", expected rank " + std::to_string(hello.to);
  }
  std::memcpy(theirs.data(), msg.data() + 16, theirs.size());
  if (!macGood(keys, Way::Acceptor, hello, theirs, msg, 48)) {
    return "the reply does not prove rank " + std::to_string(hello.to) + "'s key";
  }
  return std::nullopt;
}

std::string tcpProof(const TcpKeys& keys, const TcpHello& hello, const TcpNonce& acceptorNonce) {
  std::string m(kTcpProofBytes, '\0');
  put32(m, 0, kProofMagic);
  const std::string tag = mac(keys, Way::Dialer, hello, acceptorNonce);
  std::memcpy(m.data() + 16, tag.data(), tag.size());
  return m;
}

std::optional<std::string> checkTcpProof(const TcpKeys& keys, const TcpHello& hello,
                                         const TcpNonce& acceptorNonce, const std::string& msg) {
  if (msg.size() != kTcpProofBytes || get32(msg, 0) != kProofMagic) {
    return "no handshake proof from the connection claiming rank " + std::to_string(hello.from);
  }
  if (!macGood(keys, Way::Dialer, hello, acceptorNonce, msg, 16)) {
    return "the connection claiming rank " + std::to_string(hello.from) + " does not hold its key";
  }
  return std::nullopt;
}

}  // namespace arl
