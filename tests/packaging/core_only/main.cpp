// SPDX-License-Identifier: Apache-2.0
// Includes only the core's one header and links nothing: a search on a
// planted separable objective must find its optimum (packaging test
// core_only, tests/packaging/core_only.cmake).
#include <bosch/bosch.hpp>

#include <cstdio>

namespace {
struct Planted {
  bosch::HeadLayout layout() const { return {4, 4, 2}; }
  // Heads (l, 0) are free to make SWA, heads (l, 1) cost 1 each.
  double evaluate(const bosch::HeadMask& m) const {
    double s = 0;
    for (int l = 0; l < 4; ++l) s -= m.swa(l, 1) ? 1.0 : 0.0;
    return s;
  }
};
}  // namespace

int main() {
  Planted e;
  bosch::Options o;
  o.target_ratio = 0.5;
  o.seed = 3;
  const bosch::Result r = bosch::select(e, o);
  if (r.score != 0.0) {
    std::fprintf(stderr, "core_only: score %g, expected the optimum 0\n", r.score);
    return 1;
  }
  std::printf("core_only: optimum found in %zu evaluations\n", r.evaluations);
  return 0;
}
