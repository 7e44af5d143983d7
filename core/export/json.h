// JSON through nlohmann/json (Debian's nlohmann-json3-dev). Every JSON the lab writes is built
// as a Json value and turned into text by jsonText(); JSON from elsewhere (a recording shared
// between classrooms) is read only through parseJsonLimited(), which bounds what it may cost.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace arl {

// Objects keep their keys in the order they were written, so a file reads as the code that
// wrote it (config first, results last).
using Json = nlohmann::ordered_json;

// Compact text of `j`. Bytes that are not UTF-8 (a host name, an OS error message) are written
// as U+FFFD instead of failing the export; NaN and infinities are written as null.
std::string jsonText(const Json& j);

// What one JSON text from elsewhere may hold. Recordings nest 7 levels deep and hold a few
// values per rank and iteration (their events are one string per run).
struct JsonLimits {
  size_t maxBytes = size_t{1} << 30;  // 1 GiB: about 20 million events
  int maxDepth = 32;                  // objects and arrays nested in each other
  size_t maxValues = 20'000'000;      // values, objects and arrays counted together
};

// Malformed JSON, or JSON beyond the limits. what() says what was wrong and where (line and
// column for malformed text, the limit's value for a limit).
struct JsonInputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses one JSON value (RFC 8259, UTF-8 checked) within `limits`. Objects are plain
// nlohmann::json objects: keys sorted, a repeated key keeps its last value.
nlohmann::json parseJsonLimited(std::string_view text, const JsonLimits& limits = {});

}  // namespace arl
