// CURVE on the ZeroMQ data plane (BindOptions::curveSecretKey, docs/security.md): the ranks of
// a run exchange chunks over tcp:// as usual, and a process that is not a member cannot get
// a chunk in, with or without a key pair of its own.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "base/errors.h"
#include "transport/zmq/curve_keys.h"
#include "transport/zmq/zmq_transport.h"
#include "transport_test_util.h"

namespace arl {
namespace {

using arl::transport_test::headerFor;
using arl::transport_test::onThreads;
using arl::transport_test::pattern;
using arl::transport_test::samePayload;
using std::chrono::milliseconds;

BindOptions curveOptions(const CurveKeyPair& mine, const std::vector<std::string>& members) {
  BindOptions o;
  o.kind = BindOptions::Kind::Tcp;
  o.curveSecretKey = mine.secretKey;
  o.curvePeerKeys = members;
  return o;
}

// The first handshake event of `s` within `timeout` (its monitor's event and value); 0 when
// none came.
std::pair<uint16_t, int32_t> firstHandshakeEvent(zmq::context_t& ctx, zmq::socket_t& s,
                                                 const std::string& endpoint,
                                                 milliseconds timeout) {
  const std::string addr = "inproc://stray-monitor";
  zmq_socket_monitor(s.handle(), addr.c_str(),
                     ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                         ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL);
  zmq::socket_t mon(ctx, zmq::socket_type::pair);
  mon.set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout.count()));
  mon.connect(addr);
  s.connect(endpoint);
  zmq::message_t event, address;
  if (!mon.recv(event) || event.size() < 6 || !mon.recv(address)) return {0, 0};
  uint16_t id = 0;
  int32_t value = 0;
  std::memcpy(&id, event.data(), 2);
  std::memcpy(&value, static_cast<const char*>(event.data()) + 2, 4);
  zmq_socket_monitor(s.handle(), nullptr, 0);
  return {id, value};
}

void inject(zmq::socket_t& s, const std::vector<unsigned char>& payload) {
  ChunkHeader h = headerFor(0);
  h.src = 1;  // as rank 1 would send it
  h.length = payload.size();
  (void)s.send(zmq::buffer(&h, sizeof h), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  (void)s.send(zmq::buffer(payload), zmq::send_flags::dontwait);
}

TEST(ZmqCurve, MembersExchangeChunksAndAStrayClientCannotInjectOne) {
  ASSERT_TRUE(curveAvailable()) << "this libzmq has no CURVE";
  const CurveKeyPair k0 = makeCurveKeyPair(), k1 = makeCurveKeyPair();
  const std::vector<std::string> members = {k0.publicKey, k1.publicKey};
  ZmqDataPlane dp0(0, 2), dp1(1, 2);
  const std::vector<std::string> eps = {dp0.bind(curveOptions(k0, members)),
                                        dp1.bind(curveOptions(k1, members))};
  dp0.connect(eps, {});
  dp1.connect(eps, {0});

  // A stray without keys, and one with a key pair of its own that knows rank 0's public key
  // (RunConfig carries it): the first fails the greeting (NULL against CURVE), the second the
  // ZAP handler (status 400: not a member's key). Both send a chunk that claims to be rank
  // 1's step 0, before rank 1 sends its own.
  zmq::context_t ctx(1);
  zmq::socket_t clear(ctx, zmq::socket_type::push), keyed(ctx, zmq::socket_type::push);
  for (zmq::socket_t* s : {&clear, &keyed}) s->set(zmq::sockopt::linger, 0);
  const CurveKeyPair stray = makeCurveKeyPair();
  keyed.set(zmq::sockopt::curve_serverkey, k0.publicKey);
  keyed.set(zmq::sockopt::curve_publickey, stray.publicKey);
  keyed.set(zmq::sockopt::curve_secretkey, stray.secretKey);
  const auto refused = firstHandshakeEvent(ctx, keyed, eps[0], milliseconds(5000));
  EXPECT_EQ(refused.first, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
  EXPECT_EQ(refused.second, 400);
  clear.connect(eps[0]);
  const auto injected = pattern(9, 0, 64);
  inject(clear, injected);
  inject(keyed, injected);
  std::this_thread::sleep_for(
      milliseconds(300));  // room for a stray chunk to arrive, were it let in
  EXPECT_FALSE(dp0.arrived(1));

  const auto sent = pattern(1, 0, 64);
  dp1.send(0, headerFor(0), sent.data(), sent.size())->wait();
  auto m = dp0.recv(1, 0, milliseconds(5000));
  ASSERT_TRUE(m);
  EXPECT_TRUE(samePayload(*m, sent));
  EXPECT_EQ(dp0.queued(1), 0u);
  EXPECT_THROW(dp0.recv(1, 1, milliseconds(200)), PeerError);
  clear.close();
  keyed.close();
  std::vector<ZmqDataPlane*> planes = {&dp0, &dp1};
  onThreads(2, [&](int r) { planes[static_cast<size_t>(r)]->close(); });
}

TEST(ZmqCurve, KeysThatDoNotFitTheWorldAreRefused) {
  const CurveKeyPair k = makeCurveKeyPair();
  ZmqDataPlane dp(0, 2);
  EXPECT_THROW(dp.bind(curveOptions(k, {k.publicKey})), ConfigError);
  ZmqDataPlane other(0, 2);
  EXPECT_THROW(other.bind(curveOptions(k, {k.publicKey, "not a key"})), ConfigError);
}

TEST(CurveKeys, FingerprintIsTheGroupedStartOfTheKeysSha256) {
  // 40 Z85 zeros are 32 zero bytes (RFC 32), whose SHA-256 starts 66687aadf862bd77.
  const std::string zeros(40, '0');
  EXPECT_EQ(keyFingerprint(zeros), "6668 7aad f862 bd77");
  EXPECT_EQ(keyFingerprint(std::string(32, '\0')), "6668 7aad f862 bd77");
  EXPECT_EQ(keyFingerprint("short"), "");
  const CurveKeyPair k = makeCurveKeyPair();
  EXPECT_EQ(keyFingerprint(k.publicKey), keyFingerprint(z85KeyBytes(k.publicKey)));
  EXPECT_EQ(z85OfKeyBytes(z85KeyBytes(k.publicKey)), k.publicKey);
  EXPECT_EQ(curvePublicOf(k.secretKey), k.publicKey);
  EXPECT_FALSE(isZ85Key(k.publicKey.substr(1)));
}

}  // namespace
}  // namespace arl
