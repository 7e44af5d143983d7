// The ZAP handler (zap_handler.h). Request and reply frames as RFC 27 lays them out.
#include "transport/zmq/zap_handler.h"

#include <vector>
#include <zmq_addon.hpp>

#include "base/errors.h"
#include "transport/zmq/curve_keys.h"

namespace arl {

namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
// How long the destructor may wait for the thread to notice: a data plane closes once a run.
constexpr std::chrono::milliseconds kStopCheck{20};

std::string bytesOf(const std::string& z85) {
  std::string raw = z85KeyBytes(z85);
  if (raw.empty()) throw ConfigError("'" + z85 + "' is not a Z85 CURVE public key");
  return raw;
}

}  // namespace

ZapHandler::ZapHandler(zmq::context_t& ctx, const std::set<std::string>& allowed,
                       OnRefused onRefused)
    : sock_(ctx, zmq::socket_type::rep), onRefused_(std::move(onRefused)) {
  for (const auto& k : allowed) allowed_.insert(bytesOf(k));
  sock_.set(zmq::sockopt::linger, 0);
  try {
    sock_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    throw ConfigError(std::string("cannot start the ZAP handler: ") + e.what());
  }
  // The thread owns the socket from here on (a thread start is a full memory barrier).
  thread_ = std::thread([this] { serve(); });
}

ZapHandler::~ZapHandler() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  sock_.close();
}

void ZapHandler::allow(const std::string& z85) {
  std::string raw = bytesOf(z85);
  std::lock_guard<std::mutex> lock(mu_);
  allowed_.insert(std::move(raw));
}

bool ZapHandler::admits(const std::string& mechanism, const std::string& keyBytes) {
  if (mechanism != "CURVE") return false;
  std::lock_guard<std::mutex> lock(mu_);
  return allowed_.count(keyBytes) > 0;
}

// Request: version, request id, domain, address, routing id, mechanism, credentials (CURVE:
// the client's 32-byte public key). Reply: version, request id, status code, status text,
// user id, metadata.
void ZapHandler::serve() {
  while (!stop_.load()) {
    zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&item, 1, kStopCheck) == 0) continue;
      std::vector<zmq::message_t> req;
      if (!zmq::recv_multipart(sock_, std::back_inserter(req))) continue;
      if (req.size() < 6) continue;  // not ZAP: libzmq is the only one on this endpoint
      const std::string mechanism = req[5].to_string();
      const std::string key = req.size() >= 7 ? req[6].to_string() : std::string();
      const bool ok = admits(mechanism, key);
      const std::string fingerprint = mechanism == "CURVE" ? keyFingerprint(key) : std::string();
      if (!ok && onRefused_) onRefused_(fingerprint, req[3].to_string());
      std::vector<zmq::message_t> reply;
      reply.emplace_back(std::string("1.0"));
      reply.emplace_back(req[1].data(), req[1].size());
      reply.emplace_back(std::string(ok ? "200" : "400"));
      reply.emplace_back(std::string(ok ? "OK" : "key not allowed"));
      reply.emplace_back(ok ? fingerprint : std::string());
      reply.emplace_back();
      zmq::send_multipart(sock_, reply);
    } catch (const zmq::error_t&) {
      return;  // the context is ending
    }
  }
}

}  // namespace arl
