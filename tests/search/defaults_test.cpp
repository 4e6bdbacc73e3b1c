// The default search against the former default on an entangled planted
// problem with a known optimum (test::CircuitEvaluator): evaluations needed to
// come within 3% (normalized score) of the optimum, over 10 seeds per ratio.
#include <doctest/doctest.h>

#include "planted.hpp"
#include "test_support.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <vector>

using bosch::HeadLayout;
using bosch::Options;

namespace {

/// The defaults before head-level probes, completion probes, the surrogate
/// solver and the refinement: whole-layer probes and levels {2, 3} of 3 at
/// rho >= 0.75, the swap solver with 64 evaluations per chunk, no refinement.
Options former_default(double rho) {
  Options o;
  o.inner_solver = bosch::InnerSolver::swap;
  o.chunk_budget = 64;
  o.refine_budget = 0;
  if (rho > 0.7) {
    o.probe_heads = 3;
    o.ratio_levels = {2.0 / 3.0, 1.0};
  }
  return o;
}

struct Outcome {
  std::size_t to_3pct = 0;  ///< evaluations until within 3% (cap when never)
  bool reached = false;
  double gap = 0;           ///< normalized optimum minus normalized result
  std::size_t evaluations = 0;
};

Outcome run(Options o, double rho, std::uint64_t seed, std::size_t cap) {
  const HeadLayout lay{30, 9, 3};  // SmolLM2-135M's layout
  bosch::test::CircuitEvaluator e(lay, 12, 12, 1000 + seed);
  o.target_ratio = rho;
  o.seed = seed;
  o.max_evaluations = cap;
  const bosch::Result r = bosch::select(e, o);
  const double full = r.anchors.full, swa = r.anchors.swa;
  auto norm = [&](double v) { return (v - swa) / (full - swa); };
  const double opt = norm(e.optimum(r.target_count));
  Outcome out;
  out.to_3pct = cap;
  out.evaluations = r.evaluations;
  out.gap = opt - norm(r.score);
  double best = -1e300;
  for (const auto& rec : r.log) {
    if (rec.mask.count() == r.target_count) best = std::max(best, rec.score);
    if (!out.reached && opt - norm(best) <= 0.03) {
      out.reached = true;
      out.to_3pct = rec.index + 1;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the default search comes within 3% of a planted optimum in fewer evaluations than the former default") {
  constexpr int seeds = 10;
  constexpr std::size_t cap = 400;
  for (double rho : {0.25, 0.5, 0.75, 0.875}) {
    CAPTURE(rho);
    double new_sum = 0, old_sum = 0, new_gap = 0, old_gap = 0;
    int new_reached = 0, old_reached = 0;
    std::size_t new_evals = 0;
    for (std::uint64_t s = 0; s < seeds; ++s) {
      const Outcome n = run(Options{}, rho, bosch::test::seed(s), cap);
      const Outcome f = run(former_default(rho), rho, bosch::test::seed(s), cap);
      new_sum += static_cast<double>(n.to_3pct);
      old_sum += static_cast<double>(f.to_3pct);
      new_gap += n.gap / seeds;
      old_gap += f.gap / seeds;
      new_reached += n.reached;
      old_reached += f.reached;
      new_evals = std::max(new_evals, n.evaluations);
    }
    char line[200];
    std::snprintf(line, sizeof line,
                  "rho %.3f: within 3%% on %d/%d seeds (former %d/%d), mean evaluations to 3%% %.0f vs %.0f "
                  "(ratio %.2f; %zu = never), mean gap %.4f vs %.4f, most evaluations %zu",
                  rho, new_reached, seeds, old_reached, seeds, new_sum / seeds, old_sum / seeds, new_sum / old_sum, cap,
                  new_gap, old_gap, new_evals);
    MESSAGE(line);
    // The default reaches the optimum's neighbourhood on every seed, never
    // ends further from it than the former default, and stays within the
    // former default's budget at rho = 0.5 (220 evaluations on 30 x 3).
    CHECK(new_reached == seeds);
    CHECK(new_gap <= old_gap + 1e-9);
    CHECK(new_evals <= 220);
    // Fewer evaluations to 3% where the former default struggles (rho 0.5 and
    // 0.75: it misses on some or all seeds). At 0.875 whole-layer probes cost
    // one evaluation per layer and usually suffice on this problem; the
    // default's head-level and completion probes cost 4 per layer (see
    // docs/algorithm.md §Stage 1) and buy a smaller final gap instead.
    if (rho == 0.5 || rho == 0.75) CHECK(new_sum < old_sum);
  }
}
