// The JSON layer (export/json.h): what every writer relies on (key order, UTF-8 repair,
// non-finite numbers, exact integers) and the bounds of the reader of files from elsewhere.
#include "export/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace arl {
namespace {

std::string errorOf(std::string_view text, const JsonLimits& limits = {}) {
  try {
    parseJsonLimited(text, limits);
  } catch (const JsonInputError& e) {
    return e.what();
  }
  return "";
}

TEST(Json, WritesKeysInOrderAndExactNumbers) {
  const Json j{{"name", "ring"},
               {"count", uint64_t{18446744073709551615u}},
               {"neg", int64_t{-42}},
               {"half", 2.5},
               {"ok", true},
               {"none", nullptr},
               {"list", Json::array({1, Json::object(), Json::array()})}};
  EXPECT_EQ(jsonText(j),
            R"({"name":"ring","count":18446744073709551615,"neg":-42,"half":2.5,"ok":true,)"
            R"("none":null,"list":[1,{},[]]})");
}

TEST(Json, NonFiniteIsNullAndDoublesRoundTrip) {
  EXPECT_EQ(jsonText(Json(std::numeric_limits<double>::quiet_NaN())), "null");
  EXPECT_EQ(jsonText(Json(std::numeric_limits<double>::infinity())), "null");
  for (double d : {0.0, -0.5, 1e-300, 3.141592653589793, 1e21, 123456789.125, 12.3455}) {
    EXPECT_EQ(parseJsonLimited(jsonText(Json(d))).get<double>(), d) << jsonText(Json(d));
  }
  EXPECT_EQ(jsonText(Json(12.3455)), "12.3455") << "the trace's timestamps rely on this";
}

TEST(Json, EscapesStringsAndRepairsBrokenUtf8) {
  EXPECT_EQ(jsonText(Json("a\"b\\c\n\t\x01")), R"("a\"b\\c\n\t\u0001")");
  EXPECT_EQ(jsonText(Json("caf\xc3\xa9")), "\"caf\xc3\xa9\"");
  // A host name or an OS message that is not UTF-8 is written, not thrown on.
  EXPECT_EQ(jsonText(Json("bad\xff")), "\"bad\xef\xbf\xbd\"");
}

TEST(Json, ReadsWhatItWrites) {
  const Json j{{"s", "x\"y\n\x02"}, {"i", -42}, {"u", uint64_t{1} << 63}, {"a", {false, nullptr}}};
  const nlohmann::json v = parseJsonLimited(jsonText(j));
  EXPECT_EQ(v.at("s").get<std::string>(), "x\"y\n\x02");
  EXPECT_EQ(v.at("i").get<int64_t>(), -42);
  EXPECT_EQ(v.at("u").get<uint64_t>(), uint64_t{1} << 63);
  EXPECT_TRUE(v.at("a")[1].is_null());
  EXPECT_EQ(parseJsonLimited(R"( ["\u00e9\ud83d\ude00\/"] )")[0].get<std::string>(),
            "\xc3\xa9\xf0\x9f\x98\x80/");
}

TEST(Json, RefusesMalformedTextNamingWhere) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", "-", "tru", "\"abc", "\"\\x\"",
                          "{\"a\":1}x", "\"\\ud800\"", "[1 2]", "\"a\nb\"", "\"\xff\"", "1e999"}) {
    EXPECT_NE(errorOf(bad).find("not valid JSON"), std::string::npos) << bad;
  }
  EXPECT_NE(errorOf("{\n  \"a\": tru}").find("line 2, column"), std::string::npos)
      << errorOf("{\n  \"a\": tru}");
}

// A damaged file's error stays one short printable line: what the parser last read is cut.
TEST(Json, ErrorsEchoOnlyAFewPrintableCharactersOfWhatWasRead) {
  const std::string e = errorOf("{\"format\":\"" + std::string(30'000, 'a') + "\n");
  EXPECT_LT(e.size(), 300u) << e.size();
  EXPECT_NE(e.find("last read: '\"aaaa"), std::string::npos) << e;
  EXPECT_NE(e.find("...'"), std::string::npos) << e;
  const std::string binary = errorOf(std::string("[\"\x01\x02\xfe"));
  for (char c : binary) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << binary;
}

TEST(Json, RefusesTextBeyondItsLimits) {
  JsonLimits small;
  small.maxBytes = 10;
  EXPECT_NE(errorOf("[1,2,3,4,5,6]", small).find("13 bytes is over the 10-byte limit"),
            std::string::npos);
  // Nesting is refused as it is read, so a deep document costs no deep recursion or memory.
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  EXPECT_NE(errorOf(deep).find("nested deeper than 32 levels"), std::string::npos);
  EXPECT_NO_THROW(parseJsonLimited(std::string(32, '[') + std::string(32, ']')));
  JsonLimits few;
  few.maxValues = 100;
  std::string many = "[0";
  for (int i = 0; i < 200; ++i) many += ",0";
  many += "]";
  EXPECT_NE(errorOf(many, few).find("more than 100 values"), std::string::npos);
}

}  // namespace
}  // namespace arl
