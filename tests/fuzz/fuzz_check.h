// What a fuzz target reports besides crashes and sanitizer errors: a broken invariant of what
// a decoder accepted. It aborts, so libFuzzer saves the input as a crash.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#define ARL_FUZZ_CHECK(cond, what)                                                           \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "broken invariant at %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                               \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)
