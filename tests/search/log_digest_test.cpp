// The search's decisions, held fixed: a digest of every evaluation (mask,
// stage, eliminated or not) and of the result of a whole select() on a planted problem,
// recorded before the solvers became policies of one loop (search/solver_loop.hpp).
// A refactor must keep them; a change that means to alter the search updates
// the digests here and says why. The digest holds the decisions (which masks,
// in which order, by which stage), not the scores' last bits, which depend on
// floating-point contraction (compilers, -march); racing is left out for the
// same reason (its statistics decide on sums of products).
#include <doctest/doctest.h>

#include "planted.hpp"

#include <cstdint>
#include <cstdio>
#include <string>

namespace {

struct Fnv {
  std::uint64_t h = 1469598103934665603ull;
  void add(const void* p, std::size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) {
      h ^= c[i];
      h *= 1099511628211ull;
    }
  }
  void add(const bosch::HeadMask& m) {
    for (std::size_t i = 0; i < m.size(); ++i) {
      const unsigned char b = m[i];
      add(&b, 1);
    }
  }
};

std::string digest(const bosch::Result& r) {
  Fnv f;
  for (const auto& rec : r.log) {
    f.add(rec.mask);
    const unsigned char e = rec.eliminated;
    f.add(&e, 1);
    const int st = static_cast<int>(rec.stage);
    f.add(&st, sizeof st);
  }
  f.add(r.mask);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(f.h));
  return buf;
}

std::string run(bosch::InnerSolver solver, double rho) {
  const bosch::HeadLayout lay{8, 8, 4};
  bosch::Options o;
  o.target_ratio = rho;
  o.seed = 1;
  o.inner_solver = solver;
  o.max_evaluations = 300;
  bosch::test::EntangledEvaluator e(lay, 1, 1);
  return digest(bosch::select(e, o));
}

}  // namespace

TEST_CASE("a whole search's evaluations and result are those recorded before the solver loop refactor") {
  using bosch::InnerSolver;
  CHECK(run(InnerSolver::swap, 0.5) == "3dec00a651da3a5f");
  CHECK(run(InnerSolver::swap, 0.75) == "f73758ad9a2e6a8b");
  CHECK(run(InnerSolver::penalized, 0.5) == "046d3dd071b68623");
  CHECK(run(InnerSolver::penalized, 0.75) == "a6bc4aacbfe0eb0e");
}
