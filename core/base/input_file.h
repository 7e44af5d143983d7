// Files from outside (recordings, calibrations, lesson files, training records, imports):
// read with a bound on what is read, not on what the file says of itself, and only when the
// path names a regular file, so that /dev/zero, a FIFO or a folder is refused at once with a
// line saying what it is, instead of filling memory or blocking forever. Files the lab
// writes go to a temporary name beside the target and are renamed over it once complete, so
// that a failed write (a full disk, a kill) never leaves a truncated file under the name.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace arl {

// Why a file could not be read: "is a FIFO, not a regular file", "is over the 64 MiB limit",
// "cannot be opened: No such file or directory". The message names the path.
class InputFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What kind of thing `path` is when it is not a regular file ("a folder", "a FIFO", "a
// character device", ...), empty when it is one; "missing" when nothing is there.
std::string nonRegularKind(const std::string& path);

// The whole of regular file `path`, at most `maxBytes` of it: a file that holds more is
// refused, having read no more than maxBytes + 1 bytes. Throws InputFileError.
std::string readInputFile(const std::string& path, size_t maxBytes);

// Writes `text` to `path` through a temporary file in the same folder, renamed over `path`
// once written and flushed; on any failure the temporary is removed and `path` is untouched.
// Throws std::runtime_error naming the path and the reason.
void writeFileAtomically(const std::string& path, std::string_view text);

// "64 MiB", "1 MiB", "512 KiB", "100 bytes": a limit as users read it.
std::string byteLimitText(size_t bytes);

}  // namespace arl
