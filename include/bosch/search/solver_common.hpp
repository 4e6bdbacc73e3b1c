// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file search/solver_common.hpp
/// What the inner solvers share: the per-solve budget, the best-point
/// tracker, the result and the count-preserving random swap.

#include <bosch/objective.hpp>
#include <bosch/options.hpp>
#include <bosch/search/rng.hpp>
#include <bosch/search/subproblem.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

namespace bosch::search {

namespace detail {

/// New evaluations the solver may spend on its next step, at most `want`
/// (its own budget minus `hold`, then the objective's total budget).
template <class O>
std::size_t allowance(O& obj, const SubProblem& p, std::size_t e0, std::size_t want,
                      std::size_t hold = 0) {
  const std::size_t used = obj.evaluations() - e0;
  const std::size_t own = used + hold >= p.budget ? 0 : p.budget - used - hold;
  return obj.allow(std::min(own, want));
}

/// Tracks the best feasible point of a solve (first one on ties).
struct best_tracker {
  std::vector<std::uint8_t> state;
  double score = -std::numeric_limits<double>::infinity();
  bool any = false;
  void offer(const std::vector<std::uint8_t>& s, double v) {
    if (!any || v > score) {
      state = s;
      score = v;
      any = true;
    }
  }
};

inline SubResult finish(const SubProblem& p, const best_tracker& b, std::size_t used,
                        std::vector<std::pair<std::vector<std::uint8_t>, double>> history) {
  SubResult r;
  r.best = b.any ? apply_state(p, b.state) : p.start;
  r.score = b.any ? b.score : std::numeric_limits<double>::quiet_NaN();
  r.evaluated = b.any;
  r.evaluations = used;
  r.history = std::move(history);
  return r;
}

/// Apply one random count-preserving swap in a swappable group.
inline void random_swap(const SubProblem& p, const std::vector<int>& swappable,
                        std::vector<std::uint8_t>& s, engine& g) {
  const auto& grp = p.groups[static_cast<std::size_t>(swappable[static_cast<std::size_t>(
      uniform_int(g, 0, static_cast<int>(swappable.size()) - 1))])];
  std::vector<int> on, off;
  for (int u : grp.units) (s[static_cast<std::size_t>(u)] ? on : off).push_back(u);
  const int a = on[static_cast<std::size_t>(uniform_int(g, 0, static_cast<int>(on.size()) - 1))];
  const int b = off[static_cast<std::size_t>(uniform_int(g, 0, static_cast<int>(off.size()) - 1))];
  s[static_cast<std::size_t>(a)] = 0;
  s[static_cast<std::size_t>(b)] = 1;
}

}  // namespace detail

}  // namespace bosch::search
