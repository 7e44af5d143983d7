// TCP endpoints as the lab writes them: "tcp://HOST:PORT", HOST a name, an IPv4 address or an
// IPv6 address in brackets ("tcp://[::1]:5555", as ZeroMQ takes it). The one reading of them
// for the control endpoint (coordinator and worker), the data planes and the command lines.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace arl {

struct TcpEndpoint {
  std::string host;  // as written: an IPv6 address keeps its brackets, so "tcp://" + host + ":"
                     // + port is an endpoint again
  std::string port;  // as written, unchecked: digits, "*" (any free port when binding), or ""
};

// "tcp://HOST:PORT" split at its last colon. nullopt when `endpoint` is not tcp://, has no
// colon after the scheme, has an empty host, or a host whose brackets do not pair.
std::optional<TcpEndpoint> splitTcp(std::string_view endpoint);

// The host of a tcp:// endpoint as an address to look up: an IPv6 address without its
// brackets ("::1" of "tcp://[::1]:5555"). "" for anything splitTcp refuses (ipc://, ...).
std::string tcpHostOf(std::string_view endpoint);

// Whether `host` names every interface ("*", "0.0.0.0", "::", "[::]"): an address to bind,
// never one a peer can connect to.
bool isWildcardHost(std::string_view host);

// Whether `host` reaches this machine alone ("localhost", 127.0.0.0/8, "::1", "[::1]"): a
// listen there needs no keys (docs/security.md). Any other name or address counts as one
// other machines may reach, a wildcard included.
bool isLoopbackHost(std::string_view host);

}  // namespace arl
