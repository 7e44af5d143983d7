// The control socket's keys (coordinator.h's ControlSecurity, docs/security.md). A listen
// that other machines may reach is a CURVE server (RFC 26): the traffic is encrypted, the lab
// proves it holds the secret of the key workers were given, and a ZAP handler (RFC 27) admits
// only the workers whose public keys the allow-list names, plus the lab's own key, which its
// local workers use. A loopback listen stays in the clear unless keys are asked for: only
// this machine's users reach it, as for MPI's and NCCL's bootstrap sockets, which assume a
// trusted network everywhere.
#include <algorithm>
#include <cstdio>
#include <functional>

#include "base/endpoint.h"
#include "base/errors.h"
#include "runtime/coordinator_impl.h"
#include "runtime/key_store.h"

namespace arl {
namespace {

// The control socket's handshakes that fail before the ZAP handler sees a key, read from its
// monitor (zmq_socket_monitor) on the coordinator's thread. A CURVE server that cannot open a
// client's HELLO (the client was given another server key) reports
// ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC; a client without keys, mismatched mechanisms. The
// monitor names the listening endpoint, not the peer: libzmq reports a bound socket's events
// under the address it bound.
class HandshakeLog final : public zmq::monitor_t {
 public:
  using Report = std::function<void(std::string)>;
  HandshakeLog(zmq::socket_t& router, std::string serverKey, Report report)
      : serverKey_(std::move(serverKey)), report_(std::move(report)) {
    init(router, "inproc://arl-coordinator-monitor", ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL);
  }

 private:
  void on_event_handshake_failed_protocol(const zmq_event_t& e, const char* addr) override {
    const std::string at = "refused a connection to " + std::string(addr ? addr : "?");
    std::string why;
    if (e.value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC) {
      why = " before its key could be checked: its CURVE hello is not sealed for this lab's key " +
            keyFingerprint(serverKey_) +
            " (a worker given another --server-key than the one the join command shows)";
    } else if (e.value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
      why =
          ": it offered no CURVE key (a worker started without --keys and --server-key, or a "
          "client that is not a worker)";
    } else {
      char code[16];
      std::snprintf(code, sizeof code, "0x%08x", static_cast<unsigned>(e.value));
      why = ": its handshake broke the ZeroMQ protocol (error " + std::string(code) + ")";
    }
    report_(at + why);
  }

  std::string serverKey_;
  Report report_;
};

}  // namespace

void Coordinator::Impl::secure(const std::string& listen) {
  const ControlSecurity& want = opt.security;
  const auto tcp = splitTcp(listen);
  const bool loopback = !tcp || isLoopbackHost(tcp->host);
  if (loopback && !want.keysAsked) return;
  if (!loopback && want.insecure && !want.keysAsked) {
    security.clearOnNetwork = true;
    return;
  }
  if (!curveAvailable()) {
    throw ConfigError("listening on " + listen +
                      " needs CURVE keys, but this libzmq was built without CURVE; pass "
                      "--insecure to listen in the clear on a trusted network");
  }
  const std::string dir = keysFolder(want.keysDir);
  keys = loadKeyPair(dir);
  if (!keys) {
    throw ConfigError("listening on " + listen + " needs keys, and " + dir +
                      " has none: run 'allreduce-lab keys' (and list the workers' public keys "
                      "in " +
                      dir + "/" + kAllowListFile +
                      "), or pass --insecure to listen in the clear on a trusted network");
  }
  security.curve = true;
  security.serverKey = keys->publicKey;
  security.keysDir = dir;
  security.allowFile = want.allowFile.empty() ? dir + "/" + kAllowListFile : want.allowFile;
  std::set<std::string> allowed =
      loadAllowList(security.allowFile).value_or(std::set<std::string>{});
  security.allowed = allowed.size();
  allowed.insert(keys->publicKey);  // the local workers'
  zap = std::make_unique<ZapHandler>(
      ctx, allowed,
      [this, file = security.allowFile](const std::string& fp, const std::string& address) {
        noteRefusal("refused a worker from " + address + ": its key " +
                    (fp.empty() ? std::string("(none)") : fp) + " is not in the allow-list " +
                    file);
      });
  router.set(zmq::sockopt::curve_server, true);
  router.set(zmq::sockopt::curve_secretkey, keys->secretKey);
  router.set(zmq::sockopt::zap_domain, "allreduce-lab");
  handshakes = std::make_unique<HandshakeLog>(router, keys->publicKey,
                                              [this](std::string line) { noteRefusal(line); });
}

std::vector<std::string> Coordinator::Impl::keyArgs() const {
  if (!security.curve) return {};
  return {"--keys", security.keysDir, "--server-key", security.serverKey};
}

void Coordinator::Impl::noteRefusal(std::string line) {
  std::lock_guard<std::mutex> lock(refusedMu);
  if (refused.size() < 1000) refused.push_back(std::move(line));
}

void Coordinator::Impl::logRefusals() {
  if (handshakes) {
    while (handshakes->check_event(0)) {
    }
  }
  std::vector<std::string> lines;
  {
    std::lock_guard<std::mutex> lock(refusedMu);
    lines.swap(refused);
  }
  for (const auto& l : lines) logLimited(1, l);
}

}  // namespace arl
