#include "export/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/errors.h"

namespace arl {
namespace {

TEST(Json, WritesNestedObjectsAndArrays) {
  JsonWriter w;
  w.beginObject()
      .key("name")
      .value("ring")
      .key("ranks")
      .value(8)
      .key("count")
      .value(uint64_t{18446744073709551615u})
      .key("ok")
      .value(true)
      .key("none")
      .null()
      .key("list")
      .beginArray()
      .value(1)
      .beginObject()
      .endObject()
      .beginArray()
      .endArray()
      .endArray()
      .endObject();
  EXPECT_TRUE(w.complete());
  EXPECT_EQ(w.str(),
            R"({"name":"ring","ranks":8,"count":18446744073709551615,"ok":true,"none":null,)"
            R"("list":[1,{},[]]})");
}

TEST(Json, EscapesStrings) {
  EXPECT_EQ(jsonQuote("a\"b\\c\n\t\r\b\f"), R"("a\"b\\c\n\t\r\b\f")");
  EXPECT_EQ(jsonQuote(std::string("\x01\x1f", 2)), R"("\u0001\u001f")");
  EXPECT_EQ(jsonQuote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");  // UTF-8 passes through
}

TEST(Json, NumbersRoundTripAndNonFiniteIsNull) {
  for (double d : {0.0, -0.5, 1e-300, 3.141592653589793, 1e21, 123456789.125}) {
    const JsonValue v = parseJson(jsonNumber(d));
    EXPECT_EQ(v.number, d) << jsonNumber(d);
  }
  EXPECT_EQ(jsonNumber(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(jsonNumber(std::numeric_limits<double>::infinity()), "null");
}

TEST(Json, ParsesWhatItWrites) {
  JsonWriter w;
  w.beginObject().key("s").value("x\"y\n\x02").key("d").value(2.5).key("i").value(-42);
  w.key("a").beginArray().value(false).null().endArray().endObject();
  const JsonValue v = parseJson(w.str());
  ASSERT_EQ(v.type, JsonValue::Type::Object);
  EXPECT_EQ(v.at("s").string, "x\"y\n\x02");
  EXPECT_EQ(v.at("d").number, 2.5);
  EXPECT_FALSE(v.at("d").isInteger);
  EXPECT_TRUE(v.at("i").isInteger);
  EXPECT_EQ(v.at("i").integer, -42);
  ASSERT_EQ(v.at("a").array.size(), 2u);
  EXPECT_EQ(v.at("a").array[0].type, JsonValue::Type::Bool);
  EXPECT_EQ(v.at("a").array[1].type, JsonValue::Type::Null);
  EXPECT_THROW(v.at("missing"), JsonParseError);
}

TEST(Json, ParsesEscapesAndSurrogates) {
  const JsonValue v = parseJson(R"( ["\u00e9\ud83d\ude00\/"] )");
  EXPECT_EQ(v.array.at(0).string, "\xc3\xa9\xf0\x9f\x98\x80/");
}

TEST(Json, RejectsMalformedText) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", "-", "tru", "\"abc", "\"\\x\"",
                          "{\"a\":1}x", "\"\\ud800\"", "[1 2]", "\"a\nb\""}) {
    EXPECT_THROW(parseJson(bad), JsonParseError) << bad;
  }
}

TEST(Json, MisuseIsABug) {
  JsonWriter w;
  w.beginObject();
  EXPECT_THROW(w.value(1), EnforceError);  // value without key
  JsonWriter a;
  a.beginArray();
  EXPECT_THROW(a.key("k"), EnforceError);
  EXPECT_THROW(a.endObject(), EnforceError);
  JsonWriter r;
  r.value(1);
  EXPECT_THROW(r.value(2), EnforceError);  // two roots
}

}  // namespace
}  // namespace arl
