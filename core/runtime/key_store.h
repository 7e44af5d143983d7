// Where the lab keeps its CurveZMQ keys (docs/security.md): a folder per user, by default
// $XDG_CONFIG_HOME/allreduce-lab (else ~/.config/allreduce-lab), holding
//   curve.key        this user's secret key (Z85), mode 0600: the lab's server key, and the key
//                    its workers (local and remote) authenticate with
//   curve.pub        its public key: what a worker gives as --server-key, what an allow-list lists
//   allowed_workers  the public keys a listening lab admits, one Z85 key a line, # comments
// The coordinator and the worker read them here; `allreduce-lab keys` writes the pair.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "transport/zmq/curve_keys.h"

namespace arl {

inline constexpr const char* kSecretKeyFile = "curve.key";
inline constexpr const char* kPublicKeyFile = "curve.pub";
inline constexpr const char* kAllowListFile = "allowed_workers";

// $XDG_CONFIG_HOME/allreduce-lab, else $HOME/.config/allreduce-lab. Throws ConfigError when
// neither variable is set.
std::string configFolder();

// `dir`, or the config folder when it is empty.
std::string keysFolder(const std::string& dir);

struct KeyFiles {
  std::string secretPath;
  std::string publicPath;
};

// Writes `keys` into `dir` (created with mode 0700 when missing): the secret with mode 0600,
// the public key with 0644. Refuses (ConfigError) to replace either file unless `force`.
KeyFiles writeKeyPair(const std::string& dir, const CurveKeyPair& keys, bool force);

// The key pair in `dir`; nullopt when it holds no secret key. Throws ConfigError when the
// secret is not a Z85 key, or when others than its owner may read it (as ssh refuses).
std::optional<CurveKeyPair> loadKeyPair(const std::string& dir);

// A server key given as its 40 Z85 characters, or as a file holding it (curve.pub of the lab).
// Throws ConfigError naming what is wrong.
std::string readServerKey(const std::string& keyOrFile);

// The keys of an allow-list file: one Z85 public key a line; blank lines and '#' comments
// skipped. nullopt when the file does not exist; ConfigError naming the line of a bad key.
std::optional<std::set<std::string>> loadAllowList(const std::string& path);

}  // namespace arl
