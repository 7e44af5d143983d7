// The lab's key files (key_store.h).
#include "runtime/key_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "base/errors.h"

namespace arl {

namespace {

std::string joinPath(const std::string& dir, const char* file) {
  return dir.empty() || dir.back() == '/' ? dir + file : dir + "/" + file;
}

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// A key file's line: its first word, or "" for a blank line or a comment. Z85 has '#' among
// its characters, so a word that is a key is one even when it starts with '#'; a comment
// after a key is set off by white space.
std::string keyWord(const std::string& line) {
  const std::string t = trimmed(line);
  const std::string word = t.substr(0, t.find_first_of(" \t"));
  if (isZ85Key(word) || t.empty() || t.front() != '#') return word;
  return {};
}

// The first key word of `path` ("" when none); nullopt when the file cannot be opened.
std::optional<std::string> firstKeyLine(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  while (std::getline(in, line)) {
    if (std::string w = keyWord(line); !w.empty()) return w;
  }
  return std::string();
}

void makeFolder(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) throw ConfigError("'" + dir + "' is not a folder");
    return;
  }
  const auto slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) makeFolder(dir.substr(0, slash));
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw ConfigError("cannot create '" + dir + "': " + std::strerror(errno));
  }
}

void writeFile(const std::string& path, const std::string& text, mode_t mode, bool force) {
  const int flags = O_WRONLY | O_CREAT | (force ? O_TRUNC : O_EXCL);
  const int fd = ::open(path.c_str(), flags, mode);
  if (fd < 0) {
    if (errno == EEXIST) {
      throw ConfigError("'" + path + "' exists; give --force to replace the key pair");
    }
    throw ConfigError("cannot write '" + path + "': " + std::strerror(errno));
  }
  // An existing file kept its mode through O_TRUNC: set it.
  const bool ok = ::fchmod(fd, mode) == 0 &&
                  ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int err = errno;
  ::close(fd);
  if (!ok) throw ConfigError("cannot write '" + path + "': " + std::strerror(err));
}

}  // namespace

std::string configFolder() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/allreduce-lab";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') return std::string(home) + "/.config/allreduce-lab";
  throw ConfigError("neither XDG_CONFIG_HOME nor HOME is set: give the keys folder (--keys DIR)");
}

std::string keysFolder(const std::string& dir) { return dir.empty() ? configFolder() : dir; }

KeyFiles writeKeyPair(const std::string& dir, const CurveKeyPair& keys, bool force) {
  makeFolder(dir);
  KeyFiles f{joinPath(dir, kSecretKeyFile), joinPath(dir, kPublicKeyFile)};
  if (!force) {
    for (const auto& p : {f.secretPath, f.publicPath}) {
      if (::access(p.c_str(), F_OK) == 0) {
        throw ConfigError("'" + p + "' exists; give --force to replace the key pair");
      }
    }
  }
  writeFile(f.secretPath,
            "# allreduce-lab CURVE secret key: keep it to yourself\n" + keys.secretKey + "\n", 0600,
            force);
  writeFile(f.publicPath,
            "# allreduce-lab CURVE public key, fingerprint " + keyFingerprint(keys.publicKey) +
                "\n" + keys.publicKey + "\n",
            0644, force);
  return f;
}

std::optional<CurveKeyPair> loadKeyPair(const std::string& dir) {
  const std::string path = joinPath(dir, kSecretKeyFile);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  if ((st.st_mode & 077) != 0) {
    throw ConfigError("'" + path + "' may be read by others than its owner; chmod 600 it");
  }
  const auto line = firstKeyLine(path);
  if (!line) throw ConfigError("cannot read '" + path + "'");
  if (!isZ85Key(*line)) throw ConfigError("'" + path + "' holds no Z85 CURVE secret key");
  return CurveKeyPair{curvePublicOf(*line), *line};
}

std::string readServerKey(const std::string& keyOrFile) {
  // A file first: a path can be 40 characters of Z85's alphabet too ("/tmp/.../lab/curve.pub").
  if (isZ85Key(keyOrFile) && ::access(keyOrFile.c_str(), F_OK) != 0) return keyOrFile;
  const auto line = firstKeyLine(keyOrFile);
  if (!line) {
    throw ConfigError("'" + keyOrFile +
                      "' is neither a Z85 key (40 characters) nor a file that can be read");
  }
  if (!isZ85Key(*line)) throw ConfigError("'" + keyOrFile + "' holds no Z85 CURVE public key");
  return *line;
}

std::optional<std::set<std::string>> loadAllowList(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (::access(path.c_str(), F_OK) != 0) return std::nullopt;
    throw ConfigError("cannot read the allow-list '" + path + "'");
  }
  std::set<std::string> keys;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string word = keyWord(line);
    if (word.empty()) continue;
    const std::string rest = trimmed(trimmed(line).substr(word.size()));
    if (!isZ85Key(word) || (!rest.empty() && rest.front() != '#')) {
      throw ConfigError(path + ":" + std::to_string(n) +
                        ": not a Z85 CURVE public key (40 characters, then an optional # comment)");
    }
    keys.insert(word);
  }
  return keys;
}

}  // namespace arl
