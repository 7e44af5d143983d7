// Checked reading of JSON from elsewhere (recordings, calibration files): a value with its
// path in the document ("recording.runs[2].request.dtype") and typed access that reports what
// is missing, mistyped or out of range through the reader's own error, naming that path.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace arl {

using JsonIn = nlohmann::json;

// "a number", "a string", ...: the type of `v` as an error message names it.
const char* jsonTypeName(const JsonIn& v);

// Raises the reader's error for the value at `path`; must throw, never return.
using JsonFail = std::function<void(const std::string& path, const std::string& what)>;

class In {
 public:
  // `fail` must outlive the In and every In taken from it.
  In(const JsonIn& v, std::string path, const JsonFail& fail)
      : v_(v), path_(std::move(path)), fail_(&fail) {}
  const std::string& path() const { return path_; }
  In operator[](std::string_view k) const {
    const std::string p = path_ + "." + std::string(k);
    auto it = v_.find(k);
    if (it == v_.end()) fail(p, "missing");
    return In(*it, p, *fail_);
  }
  In operator[](size_t i) const { return In(v_[i], path_ + "[" + std::to_string(i) + "]", *fail_); }
  bool has(std::string_view k) const { return v_.contains(k); }
  const JsonIn& raw() const { return v_; }

  const JsonIn& expect(bool ok, const char* want) const {
    if (!ok) fail(path_, std::string("expected ") + want + ", found " + jsonTypeName(v_));
    return v_;
  }
  In object() const { return In(expect(v_.is_object(), "an object"), path_, *fail_); }
  size_t size() const { return expect(v_.is_array(), "an array").size(); }
  const std::string& str() const {
    return expect(v_.is_string(), "a string").get_ref<const std::string&>();
  }
  bool boolean() const { return expect(v_.is_boolean(), "a boolean").get<bool>(); }
  // Any number; null reads as NaN (non-finite numbers are written as null).
  double num() const {
    if (v_.is_null()) return std::numeric_limits<double>::quiet_NaN();
    return expect(v_.is_number(), "a number").get<double>();
  }
  int64_t i64(int64_t lo = std::numeric_limits<int64_t>::min(),
              int64_t hi = std::numeric_limits<int64_t>::max()) const {
    expect(v_.is_number_integer(), "an integer");
    constexpr auto kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    const bool huge = v_.is_number_unsigned() && v_.get<uint64_t>() > kInt64Max;
    const int64_t x = huge ? 0 : v_.get<int64_t>();
    if (huge || x < lo || x > hi) outOfRange(std::to_string(lo), std::to_string(hi));
    return x;
  }
  uint64_t u64(uint64_t hi = std::numeric_limits<uint64_t>::max()) const {
    expect(v_.is_number_integer(), "an integer");
    if (!v_.is_number_unsigned() || v_.get<uint64_t>() > hi) outOfRange("0", std::to_string(hi));
    return v_.get<uint64_t>();
  }
  int i32(int lo = std::numeric_limits<int>::min(),
          int hi = std::numeric_limits<int>::max()) const {
    return static_cast<int>(i64(lo, hi));
  }
  template <typename T, typename Parse>
  T parsed(Parse parse) const {
    const std::string& s = str();
    auto x = parse(s);
    if (!x) fail(path_, "unknown value '" + s + "'");
    return *x;
  }
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    (*fail_)(path, what);
    std::abort();  // JsonFail must throw
  }

 private:
  [[noreturn]] void outOfRange(const std::string& lo, const std::string& hi) const {
    fail(path_, v_.dump() + " is out of range (accepted: " + lo + ".." + hi + ")");
  }
  const JsonIn& v_;
  std::string path_;
  const JsonFail* fail_;
};

template <typename T, typename F>
std::vector<T> readArray(const In& a, F item) {
  std::vector<T> out;
  const size_t n = a.size();
  for (size_t i = 0; i < n; ++i) out.push_back(item(a[i]));
  return out;
}

}  // namespace arl
