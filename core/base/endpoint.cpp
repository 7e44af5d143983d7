#include "base/endpoint.h"

namespace arl {

std::optional<TcpEndpoint> splitTcp(std::string_view endpoint) {
  constexpr std::string_view kScheme = "tcp://";
  if (endpoint.substr(0, kScheme.size()) != kScheme) return std::nullopt;
  const std::string_view rest = endpoint.substr(kScheme.size());
  // The port holds no colon, so the last one ends the host, bracketed or not ("[::1]:5555",
  // and ZeroMQ's unbracketed ":::5555").
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  const std::string_view host = rest.substr(0, colon);
  const bool opens = host.front() == '[', closes = host.back() == ']';
  if (opens != closes || (opens && host.size() < 3)) return std::nullopt;
  return TcpEndpoint{std::string(host), std::string(rest.substr(colon + 1))};
}

std::string tcpHostOf(std::string_view endpoint) {
  const auto ep = splitTcp(endpoint);
  if (!ep) return {};
  if (ep->host.front() == '[') return ep->host.substr(1, ep->host.size() - 2);
  return ep->host;
}

bool isWildcardHost(std::string_view host) {
  return host == "*" || host == "0.0.0.0" || host == "::" || host == "[::]";
}

bool isLoopbackHost(std::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.starts_with("127.");
}

}  // namespace arl
