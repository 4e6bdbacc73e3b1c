// Inner solvers: exhaustive, swap, penalized; counts, budgets, optima.
#include <doctest/doctest.h>

#include "planted.hpp"
#include "test_support.hpp"

#include <cmath>

using bosch::HeadLayout;
using bosch::HeadMask;
namespace bs = bosch::search;

namespace {

/// One group per layer over all heads of `layers`, with `count` SWA heads each.
bs::SubProblem layer_problem(const HeadLayout& lay, const std::vector<int>& layers, int count,
                             std::size_t budget, std::uint64_t seed) {
  bs::SubProblem p;
  p.start = HeadMask(lay);
  p.budget = budget;
  p.stream = seed;
  for (int l : layers) {
    bs::Group g;
    g.count = count;
    for (int k = 0; k < lay.num_kv_heads; ++k) {
      g.units.push_back(static_cast<int>(p.units.size()));
      p.units.push_back({p.start.index(l, k)});
    }
    p.groups.push_back(std::move(g));
  }
  bs::engine g(seed);
  p.start = bs::apply_state(p, bs::random_state(p, g));
  return p;
}

}  // namespace

TEST_CASE("binomial and feasible space") {
  CHECK(bs::binomial(8, 4) == 70.0);
  CHECK(bs::binomial(8, 0) == 1.0);
  CHECK(bs::binomial(4, 5) == 0.0);
  const HeadLayout lay{3, 4, 4};
  CHECK(bs::feasible_space(layer_problem(lay, {0, 1}, 2, 10, 1)) == 36.0);
}

TEST_CASE("exhaustive enumeration finds the optimum and evaluates each point once") {
  const HeadLayout lay{3, 4, 4};
  bosch::test::SeparableEvaluator e(lay, 3);
  bosch::Objective obj(e, 4);
  auto p = layer_problem(lay, {0, 2}, 2, 36, 9);
  const auto r = bs::solve_exhaustive(obj, p);
  CHECK(r.evaluations == 36);
  CHECK(e.calls == 36);
  CHECK(r.score == doctest::Approx(e.best_for_counts({2, 0, 2})));
  CHECK(r.best.count_in_layer(0) == 2);
  CHECK(r.best.count_in_layer(1) == 0);
  CHECK(r.best.count_in_layer(2) == 2);
}

TEST_CASE("swap search: exact counts, within budget, improves on the start") {
  const HeadLayout lay{6, 8, 8};
  for (std::uint64_t s = 0; s < 4; ++s) {
    bosch::test::SeparableEvaluator e(lay, 100 + s);
    bosch::Objective obj(e, 0);
    bosch::Options o;
    auto p = layer_problem(lay, {0, 1, 2, 3, 4, 5}, 3, 300, s);
    const double start = e.evaluate(p.start);
    e.calls = 0;
    const auto r = bs::solve_swap(obj, p, o);
    CHECK(r.evaluations <= 300);
    CHECK(e.calls == r.evaluations);
    for (int l = 0; l < 6; ++l) CHECK(r.best.count_in_layer(l) == 3);
    CHECK(r.score >= start);
    // A separable problem is easy for local search: from a random start (gap
    // about 4.5) to within 0.2 of the optimum (18 costs ~ U(0.1, 1)) in 300
    // evaluations, about 3 sweeps of the 90 single swaps.
    const double gap = e.best_for_counts(std::vector<int>(6, 3)) - r.score;
    MESSAGE("swap search gap after 300 evaluations: " << gap);
    CHECK(gap <= 0.2);
  }
}

TEST_CASE("swap search terminates when the whole feasible set is known") {
  const HeadLayout lay{1, 4, 4};
  bosch::test::SeparableEvaluator e(lay, 1);
  bosch::Objective obj(e, 0);
  bosch::Options o;
  auto p = layer_problem(lay, {0}, 2, 1000, 2);  // only 6 feasible points
  const auto r = bs::solve_swap(obj, p, o);
  CHECK(r.evaluations <= 6);
  CHECK(r.score == doctest::Approx(e.best_for_counts({2})));
}

TEST_CASE("penalized search: result has exact counts, budget held, repair used") {
  const HeadLayout lay{4, 8, 8};
  for (std::uint64_t s = 0; s < 4; ++s) {
    bosch::test::SeparableEvaluator e(lay, 200 + s);
    bosch::Objective obj(e, 0);
    obj.set_anchors(0.0, e.evaluate(HeadMask::filled(lay, true)));
    e.calls = 0;
    bosch::Options o;
    for (auto scope : {bosch::PenaltyScope::global, bosch::PenaltyScope::per_layer}) {
      o.penalty_scope = scope;
      auto p = layer_problem(lay, {0, 1, 2, 3}, 4, 60, s + 10 * static_cast<int>(scope));
      const std::size_t before = obj.evaluations();
      const auto r = bs::solve_penalized(obj, p, o);
      CHECK(r.evaluations <= 60);
      CHECK(obj.evaluations() - before == r.evaluations);
      for (int l = 0; l < 4; ++l) CHECK(r.best.count_in_layer(l) == 4);
      CHECK(std::isfinite(r.score));
      CHECK(r.score >= e.evaluate(p.start));
    }
  }
}

TEST_CASE("solve dispatches: exhaustive when it fits, otherwise the chosen solver") {
  const HeadLayout lay{2, 4, 4};
  bosch::test::SeparableEvaluator e(lay, 4);
  bosch::Objective obj(e, 0);
  bosch::Options o;
  auto p = layer_problem(lay, {0, 1}, 2, 36, 3);
  auto r = bs::solve(obj, p, o);
  CHECK(r.evaluations == 36);  // every point: exhaustive
  CHECK(r.score == doctest::Approx(e.best_for_counts({2, 2})));
  o.exhaustive_when_fits = false;
  bosch::test::SeparableEvaluator e2(lay, 4);
  bosch::Objective obj2(e2, 0);
  p.budget = 10;
  r = bs::solve(obj2, p, o);
  CHECK(r.evaluations <= 10);
}

TEST_CASE("malformed sub-problems are rejected") {
  const HeadLayout lay{2, 4, 4};
  bosch::test::SeparableEvaluator e(lay, 4);
  bosch::Objective obj(e, 0);
  bosch::Options o;
  auto p = layer_problem(lay, {0}, 2, 10, 3);
  auto bad = p;
  bad.groups[0].count = 5;
  CHECK_THROWS_AS(bs::solve(obj, bad, o), bosch::invalid_argument);
  bad = p;
  bad.start = HeadMask(lay);  // 0 SWA heads, group wants 2
  CHECK_THROWS_AS(bs::solve(obj, bad, o), bosch::invalid_argument);
  bad = p;
  bad.groups[0].units.pop_back();  // a unit in no group
  CHECK_THROWS_AS(bs::solve(obj, bad, o), bosch::invalid_argument);
}
