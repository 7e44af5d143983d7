// Builds of different protocol versions meeting: each side is told, in its own version, with a
// line naming both versions, and nobody is half-admitted. The other build is played by frames
// written as that build writes them (protocol.h: the header layout, Hello's and Shutdown's
// type numbers and Shutdown's body never change between versions).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "../run_binary.h"
#include "local_workers.h"
#include "runtime/coordinator.h"
#include "runtime/protocol.h"

namespace arl {
namespace {

using namespace std::chrono_literals;
using test::localOptions;
using test::waitForWorkers;

zmq::message_t messageOf(const Bytes& b) { return zmq::message_t(b.data(), b.size()); }

ByteView viewOf(const zmq::message_t& m) {
  return ByteView(static_cast<const uint8_t*>(m.data()), m.size());
}

// A Hello as a worker of protocol version `version` sends it.
Frames helloInVersion(uint16_t version) {
  Frames f = encode(Hello{"old-worker", "old-host", 4242, "cpu", -1, version});
  f[0] = encodeHeader(FrameHeader{version, MsgType::Hello, 0});
  return f;
}

TEST(VersionSkew, AnOlderWorkerIsToldInItsOwnVersionAndNotAdmitted) {
  Coordinator coord(localOptions(2));
  ASSERT_TRUE(waitForWorkers(coord, 2));
  zmq::context_t ctx;
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect(coord.endpoint());
  const uint16_t old = kProtocolVersion - 1;
  const Frames hello = helloInVersion(old);
  dealer.send(messageOf(hello[0]), zmq::send_flags::sndmore);
  dealer.send(messageOf(hello[1]), zmq::send_flags::none);

  zmq::message_t header;
  zmq::message_t body;
  ASSERT_TRUE(dealer.recv(header)) << "no answer within 5 s: the older worker would wait";
  ASSERT_TRUE(header.more());
  ASSERT_TRUE(dealer.recv(body));
  EXPECT_EQ(headerVersion(viewOf(header)), old) << "an answer the older worker cannot read";
  const auto reason = shutdownReasonAnyVersion(viewOf(header), viewOf(body));
  ASSERT_TRUE(reason.has_value()) << "the answer is not a Shutdown";
  EXPECT_NE(reason->find("version " + std::to_string(old)), std::string::npos) << *reason;
  EXPECT_NE(reason->find("version " + std::to_string(kProtocolVersion)), std::string::npos)
      << *reason;

  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(coord.workers().size(), 2u) << "the older worker was admitted";
}

// A stand-in coordinator of another version: answers the first Hello with `reply` (frames
// already in that version) and returns what the worker printed and its exit status.
testutil::Result workerAgainst(const Frames& reply) {
  zmq::context_t ctx;
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::rcvtimeo, 10000);
  router.bind("tcp://127.0.0.1:*");
  const std::string ep = router.get(zmq::sockopt::last_endpoint);
  std::thread answer([&] {
    zmq::message_t id;
    if (!router.recv(id)) return;
    zmq::message_t part;
    while (router.recv(part) && part.more()) {
    }
    router.send(std::move(id), zmq::send_flags::sndmore);
    router.send(messageOf(reply[0]), zmq::send_flags::sndmore);
    router.send(messageOf(reply[1]), zmq::send_flags::none);
  });
  const testutil::Result r =
      testutil::runBinary(ARL_WORKER_BINARY, "--connect " + ep + " --name skewed");
  answer.join();
  return r;
}

TEST(VersionSkew, AWorkerLeavesNamingBothVersionsWhenTheCoordinatorSpeaksAnother) {
  const uint16_t newer = kProtocolVersion + 1;
  Frames welcome = encode(Welcome{0, 2, 250, 4});
  welcome[0] = encodeHeader(FrameHeader{newer, MsgType::Welcome, 0});
  const auto start = std::chrono::steady_clock::now();
  const testutil::Result r = workerAgainst(welcome);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s);
  EXPECT_EQ(r.rc, 7) << r.err;
  EXPECT_NE(r.err.find("version " + std::to_string(newer)), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("version " + std::to_string(kProtocolVersion)), std::string::npos) << r.err;
}

TEST(VersionSkew, AWorkerPrintsTheRefusalOfACoordinatorOfAnotherVersion) {
  const testutil::Result r =
      workerAgainst(shutdownInVersion(kProtocolVersion + 1, "the lab speaks something newer"));
  EXPECT_EQ(r.rc, 7) << r.err;
  EXPECT_NE(r.err.find("refused by the coordinator: the lab speaks something newer"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace arl
