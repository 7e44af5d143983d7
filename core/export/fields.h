// How the exporters write one value as text (private to export/): a number in CSV, a CSV field,
// a 64-bit digest in JSON.
#pragma once

#include <cstdint>
#include <string>

namespace arl {

// Shortest text that reads back as exactly `d`; "null" when not finite, as in the JSON.
std::string csvNumber(double d);

// `s` as one CSV field: quoted (RFC 4180) when it holds a comma, a quote or a line break.
std::string csvField(const std::string& s);

// 16 lower-case hex digits, most significant first ("00000000deadbeef").
std::string hexDigest(uint64_t v);

}  // namespace arl
