// Protocol 12: the run's rendezvous store on the coordinator (StoreSet, StoreGet, StoreValue)
// through the codec, with its bounds, and a Gloo rank's Ready endpoint.
#include <gtest/gtest.h>

#include <string>

#include "runtime/protocol.h"

namespace arl {
namespace {

template <class T>
T roundTrip(const T& m) {
  const Frames f = m.encode();
  auto back = T::decode(f[0], f[1]);
  EXPECT_TRUE(back.ok()) << back.error().message();
  return back.ok() ? *back : T{};
}

// Why the codec refuses `m` ("" when it takes it).
std::string refusal(const Message& m) {
  const auto why = validate(m);
  return why ? *why : "";
}

TEST(StoreProtocol, MessagesRoundTripWithBinaryValues) {
  std::string bytes(kMaxStoreValueBytes, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  const StoreSet set{3, 2, "rank_2", bytes};
  EXPECT_EQ(roundTrip(set), set);
  const StoreGet get{3, 1, 77, "rank_2"};
  EXPECT_EQ(roundTrip(get), get);
  const StoreValue found{3, 77, true, bytes};
  EXPECT_EQ(roundTrip(found), found);
  const StoreValue missing{3, 78, false, ""};
  EXPECT_EQ(roundTrip(missing), missing);
  EXPECT_TRUE(isRunScoped(MsgType::StoreSet) && isRunScoped(MsgType::StoreValue));
  EXPECT_TRUE(sentByWorker(MsgType::StoreGet) && !sentByCoordinator(MsgType::StoreGet));
  EXPECT_TRUE(sentByCoordinator(MsgType::StoreValue) && !sentByWorker(MsgType::StoreValue));
}

TEST(StoreProtocol, BoundsAndFieldsAreChecked) {
  EXPECT_EQ(refusal(StoreSet{3, 0, "k", std::string(kMaxStoreValueBytes + 1, 'x')}),
            "StoreSet: store value of 65537 bytes, more than 65536");
  EXPECT_EQ(refusal(StoreValue{3, 1, true, std::string(kMaxStoreValueBytes + 1, 'x')}),
            "StoreValue: store value of 65537 bytes, more than 65536");
  EXPECT_EQ(refusal(StoreSet{3, 0, "", "v"}), "StoreSet: key is empty");
  EXPECT_EQ(refusal(StoreGet{3, 0, 1, "a key"}),
            "StoreGet: key \"a key\" is not printable ASCII without spaces");
  EXPECT_EQ(refusal(StoreGet{3, 0, 1, std::string(kMaxNameBytes + 1, 'k')}),
            "StoreGet: key is 256 bytes, more than 255");
  EXPECT_EQ(refusal(StoreSet{3, -1, "k", ""}).substr(0, 14), "StoreSet: rank");
  EXPECT_EQ(refusal(StoreValue{3, 1, false, "v"}), "StoreValue: a value for a key not found");
  EXPECT_NE(refusal(StoreGet{0, 0, 1, "k"}), "");  // runs start at epoch 1
  EXPECT_THROW((void)StoreSet({3, 0, "k", std::string(kMaxStoreValueBytes + 1, 'x')}).encode(),
               EnforceError);
}

// A peer's oversized value is refused when decoded, not only when encoded.
TEST(StoreProtocol, DecodeRefusesAnOversizedValue) {
  StoreValue v{3, 1, true, std::string(kMaxStoreValueBytes, 'x')};
  Frames f = v.encode();
  // The value is the body's last field: grow its length prefix and bytes by one.
  Bytes body;
  body.push_back(0x08);  // seq = 1
  body.push_back(0x01);
  body.push_back(0x10);  // found = true
  body.push_back(0x01);
  body.push_back(0x1a);  // value, length 65537 as a varint
  const uint64_t n = kMaxStoreValueBytes + 1;
  body.push_back(static_cast<uint8_t>((n & 0x7f) | 0x80));
  body.push_back(static_cast<uint8_t>(((n >> 7) & 0x7f) | 0x80));
  body.push_back(static_cast<uint8_t>(n >> 14));
  body.insert(body.end(), n, 'x');
  auto r = decode(f[0], body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, DecodeErrc::InvalidField);
  EXPECT_NE(r.error().reason.find("more than 65536"), std::string::npos) << r.error().reason;
}

TEST(StoreProtocol, AGlooRankReportsTheStoreAsItsEndpoint) {
  EXPECT_TRUE(validEndpoint("gloo://store"));
  EXPECT_FALSE(validEndpoint("gloo://"));
  EXPECT_FALSE(validEndpoint("gloo://other"));
}

}  // namespace
}  // namespace arl
