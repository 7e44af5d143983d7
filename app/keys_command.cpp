// allreduce-lab keys: makes this user's CurveZMQ key pair (runtime/key_store.h), with which a
// lab that listens for remote workers proves itself and a worker authenticates
// (docs/security.md), and prints the public key and its fingerprint.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "runtime/key_store.h"

namespace arl::app {
namespace {

constexpr const char* kProg = "allreduce-lab keys";

constexpr const char* kAbout =
    "Writes a new CURVE key pair into DIR (default $XDG_CONFIG_HOME/allreduce-lab, else "
    "~/.config/allreduce-lab): curve.key, the secret (mode 0600), and curve.pub. Prints the "
    "public key and its fingerprint, the first 16 hex digits of its SHA-256, to compare by "
    "voice or on a slide. A lab that listens for remote workers serves with this pair and "
    "admits the public keys listed in DIR/allowed_workers; a worker joins with it "
    "(allreduce-worker --server-key). An existing pair is kept unless --force is given "
    "(docs/security.md).\n"
    "Exit status: 0 when written, 1 when the files could not be written or exist, 2 on bad "
    "arguments.";

class KeysCommand final : public Command {
 public:
  KeysCommand(CLI::App& lab, const std::vector<std::string>& args)
      : opts_(lab.add_subcommand("keys", "make this user's key pair for encrypted workers"), args) {
    app = lab.get_subcommand("keys");
    app->footer(wrap(kAbout, 92) + "\n");
    opts_.value("--dir", "DIR", "where to write the pair (default: the config folder)");
    opts_.flag("--force", &force_, "replace an existing pair (workers given the old one fail)");
  }

  int run() override {
    std::string dir;
    CurveKeyPair keys;
    try {
      dir = keysFolder(opts_.getOr("--dir", "").text);
      keys = makeCurveKeyPair();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", kProg, e.what());
      return 2;
    }
    KeyFiles files;
    try {
      files = writeKeyPair(dir, keys, force_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", kProg, e.what());
      return 1;
    }
    std::printf("secret key: %s (mode 0600: keep it to yourself)\n", files.secretPath.c_str());
    std::printf("public key: %s\n", files.publicPath.c_str());
    std::printf("%s\n", keys.publicKey.c_str());
    std::printf("fingerprint: %s\n", keyFingerprint(keys.publicKey).c_str());
    return 0;
  }

 private:
  Options opts_;
  bool force_ = false;
};

}  // namespace

std::unique_ptr<Command> addKeysCommand(CLI::App& lab, const std::vector<std::string>& args) {
  return std::make_unique<KeysCommand>(lab, args);
}

}  // namespace arl::app
