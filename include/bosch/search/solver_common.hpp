// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file search/solver_common.hpp
/// What every inner solver shares: the per-solve budget, the best-point
/// tracker and the result.

#include <bosch/search/subproblem.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace bosch::search {

namespace detail {

/// New evaluations the solver may spend on its next step, at most `want`
/// (its own budget minus `hold`, then the objective's total budget). `e0` is
/// the log size when the solve began; every record counts, a candidate a race
/// eliminated (Options::race) included.
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

/// The result of a solve: its best point (the start, unscored, when there is
/// none), the new evaluations it spent and every state it obtained.
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

}  // namespace detail

}  // namespace bosch::search
