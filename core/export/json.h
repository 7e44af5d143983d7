// A small JSON writer (RFC 8259) and a matching reader, for machine-readable output of the
// command line tools and exporters, and for tests that read that output back.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace arl {

// Builds compact JSON text. Calls must nest correctly: inside an object every value is
// preceded by key(); misuse is a bug and throws EnforceError. Non-finite doubles are written
// as null (JSON has no NaN or infinity).
class JsonWriter {
 public:
  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b);
  JsonWriter& value(double d);
  JsonWriter& value(int64_t i);
  JsonWriter& value(uint64_t u);
  JsonWriter& value(int i) { return value(static_cast<int64_t>(i)); }
  JsonWriter& value(unsigned u) { return value(static_cast<uint64_t>(u)); }
  JsonWriter& null();

  // The text written so far; complete once every object and array is closed.
  const std::string& str() const { return out_; }
  bool complete() const { return stack_.empty() && wroteRoot_; }

 private:
  void beforeValue();
  std::string out_;
  std::vector<char> stack_;  // '{' or '['
  std::vector<bool> first_;  // no element written yet at this level
  bool keyPending_ = false;
  bool wroteRoot_ = false;
};

// `s` as a JSON string literal, quotes included.
std::string jsonQuote(std::string_view s);
// Shortest text that reads back as exactly `d` ("null" when not finite).
std::string jsonNumber(double d);

struct JsonParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A parsed JSON value. Numbers are kept as double and, when they are integers that fit, as
// int64 too, so counts survive exactly.
struct JsonValue {
  enum class Type { Null, Bool, Number, String, Array, Object };
  Type type = Type::Null;
  bool boolean = false;
  double number = 0;
  bool isInteger = false;
  int64_t integer = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue, std::less<>> object;

  bool has(std::string_view k) const { return object.find(k) != object.end(); }
  // Member `k` of an object; throws JsonParseError naming the key when absent.
  const JsonValue& at(std::string_view k) const;
};

// Parses one JSON value (surrounding whitespace allowed). Throws JsonParseError with the
// byte offset on malformed input.
JsonValue parseJson(std::string_view text);

}  // namespace arl
