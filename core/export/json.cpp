#include "export/json.h"

#include "export/json_in.h"

#include <string>

namespace arl {

std::string jsonText(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

namespace {

// nlohmann's messages start with an id ("[json.exception.parse_error.101] "); the rest names
// the line, the column and what was expected, and echoes what it last read, which may be a
// whole megabyte of a damaged file or raw binary: that echo is cut to a few printable
// characters so that the message stays one short line in a terminal or a banner.
std::string withoutId(const char* what) {
  std::string s = what;
  const size_t close = s.find("] ");
  if (s.rfind("[json.exception.", 0) == 0 && close != std::string::npos) s = s.substr(close + 2);
  constexpr size_t kEcho = 40;
  const std::string lastRead = "last read: '";
  const size_t at = s.find(lastRead);
  if (at != std::string::npos) {
    const size_t from = at + lastRead.size();
    const size_t end = s.rfind('\'');
    std::string echo = s.substr(from, end > from ? end - from : std::string::npos);
    const bool cut = echo.size() > kEcho;
    if (cut) echo = echo.substr(0, kEcho);
    for (char& c : echo) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    }
    s = s.substr(0, from) + echo + (cut ? "...'" : "'") +
        (end != std::string::npos && end >= from ? s.substr(end + 1) : "");
  }
  return s;
}

}  // namespace

nlohmann::json parseJsonLimited(std::string_view text, const JsonLimits& limits) {
  using nlohmann::json;
  if (text.size() > limits.maxBytes) {
    throw JsonInputError("JSON text of " + std::to_string(text.size()) + " bytes is over the " +
                         std::to_string(limits.maxBytes) + "-byte limit");
  }
  size_t values = 0;
  // Called as each value starts or ends; `depth` counts the objects and arrays around it.
  // Throwing here stops the parser before it allocates past the limit.
  const json::parser_callback_t bound = [&](int depth, json::parse_event_t ev, json&) {
    if (ev == json::parse_event_t::object_end || ev == json::parse_event_t::array_end ||
        ev == json::parse_event_t::key) {
      return true;
    }
    if (depth >= limits.maxDepth) {
      throw JsonInputError("JSON nested deeper than " + std::to_string(limits.maxDepth) +
                           " levels");
    }
    if (++values > limits.maxValues) {
      throw JsonInputError("JSON holds more than " + std::to_string(limits.maxValues) + " values");
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), bound);
  } catch (const json::exception& e) {
    throw JsonInputError("not valid JSON: " + withoutId(e.what()));
  }
}

const char* jsonTypeName(const JsonIn& v) {
  switch (v.type()) {
    case JsonIn::value_t::null: return "null";
    case JsonIn::value_t::boolean: return "a boolean";
    case JsonIn::value_t::number_integer:
    case JsonIn::value_t::number_unsigned:
    case JsonIn::value_t::number_float: return "a number";
    case JsonIn::value_t::string: return "a string";
    case JsonIn::value_t::array: return "an array";
    case JsonIn::value_t::object: return "an object";
    default: return "something else";
  }
}

}  // namespace arl
