// Hostile texts for the JSON readers' fuzz tests: edits of a good text, and random bytes.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace arl::test {

// `good` with 1 to 4 random edits (variant `i` of the stream `rng`): a JSON character
// replaced, inserted or deleted, or any byte written.
inline std::string mutatedJson(const std::string& good, int i, std::mt19937& rng) {
  static const std::string alphabet =
      std::string("0123456789-+.eE\"\\{}[],: \n") + '\0' + "\xff" + "abcdefnrtux";
  std::uniform_int_distribution<size_t> pos(0, good.size() - 1), pick(0, alphabet.size() - 1);
  std::string t = good;
  const int edits = 1 + i % 4;
  for (int k = 0; k < edits; ++k) {
    const size_t p = pos(rng) % t.size();
    switch (rng() % 4) {
      case 0: t[p] = alphabet[pick(rng)]; break;  // replace
      case 1: t.insert(t.begin() + static_cast<long>(p), alphabet[pick(rng)]); break;
      case 2: t.erase(p, 1); break;                     // delete
      default: t[p] = static_cast<char>(rng()); break;  // any byte
    }
  }
  return t;
}

// Up to 299 random bytes, every other one behind `head` (a document's first field).
inline std::string randomText(int i, std::mt19937& rng, const std::string& head) {
  std::string t(rng() % 300, '\0');
  for (char& c : t) c = static_cast<char>(rng());
  if (i % 2) t.insert(0, head);
  return t;
}

}  // namespace arl::test
