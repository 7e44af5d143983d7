// Lesson files (lesson/lesson.h: parseLesson), which teachers write and pass around. What is
// refused is refused with a ConfigError; an accepted lesson's answer names one of its options.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/errors.h"
#include "fuzz_check.h"
#include "lesson/lesson.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace arl;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Lesson l;
  try {
    l = parseLesson(text, "fuzz", "fuzz.json");
  } catch (const ConfigError&) {
    return 0;
  }
  (void)isFact(l);
  const bool answered = std::any_of(l.options.begin(), l.options.end(),
                                    [&](const LessonOption& o) { return o.id == l.answer; });
  ARL_FUZZ_CHECK(answered, "an accepted lesson's answer \"" + l.answer + "\" names no option");
  return 0;
}
