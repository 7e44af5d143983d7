#include "export/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "base/errors.h"

namespace arl {

// ---- writing ----

std::string jsonQuote(std::string_view s) {
  std::string o;
  o.reserve(s.size() + 2);
  o.push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\b': o += "\\b"; break;
      case '\f': o += "\\f"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o.push_back(ch);  // UTF-8 passes through unchanged
        }
    }
  }
  o.push_back('"');
  return o;
}

std::string jsonNumber(double d) {
  if (!std::isfinite(d)) return "null";
  char buf[64];
  // Shortest representation that round-trips (C++17 to_chars).
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  ARL_ENFORCE(ec == std::errc(), "to_chars failed for " << d);
  return std::string(buf, end);
}

void JsonWriter::beforeValue() {
  if (stack_.empty()) {
    ARL_ENFORCE(!wroteRoot_, "JSON text already has a root value");
    wroteRoot_ = true;
    return;
  }
  if (stack_.back() == '{') {
    ARL_ENFORCE(keyPending_, "value inside a JSON object without key()");
    keyPending_ = false;
    return;
  }
  if (!first_.back()) out_.push_back(',');
  first_.back() = false;
}

JsonWriter& JsonWriter::beginObject() {
  beforeValue();
  out_.push_back('{');
  stack_.push_back('{');
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::endObject() {
  ARL_ENFORCE(!stack_.empty() && stack_.back() == '{' && !keyPending_, "unbalanced endObject()");
  out_.push_back('}');
  stack_.pop_back();
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::beginArray() {
  beforeValue();
  out_.push_back('[');
  stack_.push_back('[');
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::endArray() {
  ARL_ENFORCE(!stack_.empty() && stack_.back() == '[', "unbalanced endArray()");
  out_.push_back(']');
  stack_.pop_back();
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  ARL_ENFORCE(!stack_.empty() && stack_.back() == '{' && !keyPending_,
              "key('" << k << "') outside a JSON object or after another key");
  if (!first_.back()) out_.push_back(',');
  first_.back() = false;
  out_ += jsonQuote(k);
  out_.push_back(':');
  keyPending_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  beforeValue();
  out_ += jsonQuote(s);
  return *this;
}

JsonWriter& JsonWriter::value(bool b) {
  beforeValue();
  out_ += b ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::value(double d) {
  beforeValue();
  out_ += jsonNumber(d);
  return *this;
}

JsonWriter& JsonWriter::value(int64_t i) {
  beforeValue();
  out_ += std::to_string(i);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t u) {
  beforeValue();
  out_ += std::to_string(u);
  return *this;
}

JsonWriter& JsonWriter::null() {
  beforeValue();
  out_ += "null";
  return *this;
}

// ---- reading ----

const JsonValue& JsonValue::at(std::string_view k) const {
  auto it = object.find(k);
  if (type != Type::Object || it == object.end()) {
    throw JsonParseError("JSON object has no member '" + std::string(k) + "'");
  }
  return it->second;
}

namespace {

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  JsonValue parseDocument() {
    JsonValue v = parseValue(0);
    skipSpace();
    if (pos_ != t_.size()) fail("trailing characters after the JSON value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 256;

  [[noreturn]] void fail(const std::string& what) const {
    throw JsonParseError("JSON parse error at byte " + std::to_string(pos_) + ": " + what);
  }

  void skipSpace() {
    while (pos_ < t_.size() &&
           (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\n' || t_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool consume(std::string_view lit) {
    if (t_.substr(pos_, lit.size()) == lit) {
      pos_ += lit.size();
      return true;
    }
    return false;
  }

  JsonValue parseValue(int depth) {
    if (depth > kMaxDepth) fail("nesting too deep");
    skipSpace();
    if (pos_ >= t_.size()) fail("unexpected end of input");
    JsonValue v;
    const char c = t_[pos_];
    if (c == '{') {
      v.type = JsonValue::Type::Object;
      ++pos_;
      skipSpace();
      if (pos_ < t_.size() && t_[pos_] == '}') {
        ++pos_;
        return v;
      }
      for (;;) {
        skipSpace();
        if (pos_ >= t_.size() || t_[pos_] != '"') fail("expected a string key");
        std::string k = parseString();
        skipSpace();
        if (pos_ >= t_.size() || t_[pos_] != ':') fail("expected ':'");
        ++pos_;
        v.object[k] = parseValue(depth + 1);
        skipSpace();
        if (pos_ < t_.size() && t_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < t_.size() && t_[pos_] == '}') {
          ++pos_;
          return v;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.type = JsonValue::Type::Array;
      ++pos_;
      skipSpace();
      if (pos_ < t_.size() && t_[pos_] == ']') {
        ++pos_;
        return v;
      }
      for (;;) {
        v.array.push_back(parseValue(depth + 1));
        skipSpace();
        if (pos_ < t_.size() && t_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < t_.size() && t_[pos_] == ']') {
          ++pos_;
          return v;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.type = JsonValue::Type::String;
      v.string = parseString();
      return v;
    }
    if (consume("true")) {
      v.type = JsonValue::Type::Bool;
      v.boolean = true;
      return v;
    }
    if (consume("false")) {
      v.type = JsonValue::Type::Bool;
      return v;
    }
    if (consume("null")) return v;
    return parseNumber();
  }

  JsonValue parseNumber() {
    // Validate the RFC 8259 grammar first; from_chars is laxer (it accepts "01", "1.").
    const size_t start = pos_;
    auto digits = [&] {
      const size_t b = pos_;
      while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') ++pos_;
      return pos_ - b;
    };
    bool integral = true;
    if (pos_ < t_.size() && t_[pos_] == '-') ++pos_;
    if (pos_ < t_.size() && t_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      fail("invalid value");
    }
    if (pos_ < t_.size() && t_[pos_] == '.') {
      ++pos_;
      integral = false;
      if (digits() == 0) fail("expected digits after '.'");
    }
    if (pos_ < t_.size() && (t_[pos_] == 'e' || t_[pos_] == 'E')) {
      ++pos_;
      integral = false;
      if (pos_ < t_.size() && (t_[pos_] == '+' || t_[pos_] == '-')) ++pos_;
      if (digits() == 0) fail("expected digits in the exponent");
    }
    const std::string_view text = t_.substr(start, pos_ - start);
    JsonValue v;
    v.type = JsonValue::Type::Number;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v.number);
    if (ec == std::errc::result_out_of_range) {
      v.number = text[0] == '-' ? -std::numeric_limits<double>::infinity()
                                : std::numeric_limits<double>::infinity();
    } else if (ec != std::errc() || p != text.data() + text.size()) {
      fail("invalid number");
    }
    if (integral) {
      int64_t i = 0;
      auto [q, iec] = std::from_chars(text.data(), text.data() + text.size(), i);
      if (iec == std::errc() && q == text.data() + text.size()) {
        v.isInteger = true;
        v.integer = i;
      }
    }
    return v;
  }

  unsigned hex4() {
    if (pos_ + 4 > t_.size()) fail("truncated \\u escape");
    unsigned u = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = t_[pos_++];
      u <<= 4;
      if (h >= '0' && h <= '9') {
        u |= static_cast<unsigned>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        u |= static_cast<unsigned>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        u |= static_cast<unsigned>(h - 'A' + 10);
      } else {
        fail("bad hex digit in \\u escape");
      }
    }
    return u;
  }

  static void appendUtf8(std::string& o, unsigned cp) {
    if (cp < 0x80) {
      o.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      o.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      o.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      o.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      o.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      o.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      o.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      o.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      o.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      o.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  std::string parseString() {
    ++pos_;  // opening quote
    std::string o;
    for (;;) {
      if (pos_ >= t_.size()) fail("unterminated string");
      const char c = t_[pos_++];
      if (c == '"') return o;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        o.push_back(c);
        continue;
      }
      if (pos_ >= t_.size()) fail("unterminated escape");
      const char e = t_[pos_++];
      switch (e) {
        case '"': o.push_back('"'); break;
        case '\\': o.push_back('\\'); break;
        case '/': o.push_back('/'); break;
        case 'b': o.push_back('\b'); break;
        case 'f': o.push_back('\f'); break;
        case 'n': o.push_back('\n'); break;
        case 'r': o.push_back('\r'); break;
        case 't': o.push_back('\t'); break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (!consume("\\u")) fail("lone high surrogate");
            const unsigned lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("bad low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("lone low surrogate");
          }
          appendUtf8(o, cp);
          break;
        }
        default: fail("unknown escape");
      }
    }
  }

  std::string_view t_;
  size_t pos_ = 0;
};

}  // namespace

JsonValue parseJson(std::string_view text) { return Parser(text).parseDocument(); }

}  // namespace arl
