// A ZAP handler (ZeroMQ Authentication Protocol, RFC 27, http://rfc.zeromq.org/spec/27): the
// thread that libzmq asks, over inproc://zeromq.zap.01 in one context, whether a peer that
// completed a CURVE handshake with a server socket of that context may connect. It admits
// the public keys of its allow-list and nothing else (no NULL or PLAIN peers); an admitted
// peer's messages carry its key's fingerprint as their "User-Id" property (zmq_msg_gets).
//
// A refusal reaches the client as status 400 in a CurveZMQ ERROR command, which its socket
// monitor reports as ZMQ_EVENT_HANDSHAKE_FAILED_AUTH with the value 400.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <zmq.hpp>

namespace arl {

class ZapHandler {
 public:
  // Called on the handler's thread for each refused peer: its key's fingerprint ("" when it
  // offered no CURVE key) and its address as libzmq gives it. Must return at once.
  using OnRefused = std::function<void(const std::string& fingerprint, const std::string& address)>;

  // Binds inproc://zeromq.zap.01 in `ctx` and starts serving. Create it before any server
  // socket of `ctx` accepts a connection, and destroy it before `ctx` is closed. One per
  // context. `allowed`: Z85 public keys. Throws ConfigError when the bind fails or a key is
  // not Z85.
  ZapHandler(zmq::context_t& ctx, const std::set<std::string>& allowed, OnRefused onRefused = {});
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // Admits one more key from now on (thread-safe). Throws ConfigError when it is not Z85.
  void allow(const std::string& z85);

 private:
  void serve();
  bool admits(const std::string& mechanism, const std::string& keyBytes);

  zmq::socket_t sock_;
  OnRefused onRefused_;
  std::mutex mu_;
  std::set<std::string> allowed_;  // 32-byte keys
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace arl
