// The shared doctest main. Prints the seed used by randomized tests and lets
// the caller set it (--seed=N, or BOSCH_TEST_SEED), ensmallen-style, so a
// failure can be replayed exactly.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "test_support.hpp"

namespace bosch::test {
std::uint64_t seed_value = 20260407;
}

int main(int argc, char** argv) {
  if (const char* env = std::getenv("BOSCH_TEST_SEED")) bosch::test::seed_value = std::stoull(env);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--seed=", 7) == 0) bosch::test::seed_value = std::stoull(argv[i] + 7);
  std::cout << "bosch tests: base seed " << bosch::test::seed_value << "\n";
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
