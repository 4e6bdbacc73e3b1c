// Exploration (issue 51): tests/search/planted.hpp's HiddenCriticalLayer, a
// layer whose worth shows only once the rest of the model is windowed, under
// the main job's search settings with and without layer restoration, over 8
// seeds; tests/search/restore_test.cpp asserts what this prints.
//   g++ -std=c++20 -O2 -I../../../include -I../../../tests/search planted.cpp -o planted
//   ./planted RESTORE_LAYERS LAYERS
#include "planted.hpp"

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const std::size_t restore = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 0;
  const int L = argc > 2 ? std::atoi(argv[2]) : 16;
  int kept = 0;
  double forwards = 0, gap = 0;
  std::printf("restore_layers %zu, %d layers: critical layer's SWA heads per seed:", restore, L);
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    bosch::test::HiddenCriticalLayer e(bosch::HeadLayout{L, 9, 3}, 100 + seed, 8);
    bosch::Options o = bosch::test::main_job_options(seed);
    o.restore_layers = restore;
    const auto r = bosch::select(e, o);
    int crit = 0;
    for (int k = 0; k < 3; ++k) crit += r.mask.swa(e.critical, k);
    kept += crit == 0;
    gap += e.optimum(r.mask.count()) - r.score;
    forwards += static_cast<double>(e.scored);
    std::printf(" %d", crit);
  }
  std::printf(" | critical layer kept full on %d/8 seeds, mean gap to the optimum %.4f, mean sample forwards %.0f\n",
              kept, gap / 8, forwards / 8);
}
