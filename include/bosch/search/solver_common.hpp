// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file search/solver_common.hpp
/// What the inner solvers share: the per-solve budget, the best-point
/// tracker, the result, the count-preserving random swap and the walk of the
/// count-preserving local searches (swap and surrogate solvers).

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


/// The state of a count-preserving local search: the parent, its mask and
/// score, the best state so far and every evaluated state, in order.
struct walk {
  std::vector<std::pair<std::vector<std::uint8_t>, double>> history;
  best_tracker best;
  std::vector<std::uint8_t> parent;
  HeadMask parent_mask;
  double parent_score = 0;
  /// Logs an evaluated state.
  void record(const std::vector<std::uint8_t>& s, double v) {
    history.emplace_back(s, v);
    best.offer(s, v);
  }
  /// Logs an evaluated state and makes it the parent.
  void adopt(std::vector<std::uint8_t> s, HeadMask m, double v) {
    record(s, v);
    parent = std::move(s);
    parent_mask = std::move(m);
    parent_score = v;
  }
  SubResult finish(const SubProblem& p, std::size_t used) { return detail::finish(p, best, used, std::move(history)); }
};

/// Starts a walk at p.start, scored (free when already known). False when the
/// budget allows no evaluation.
template <class O>
bool start_walk(O& obj, const SubProblem& p, std::size_t e0, walk& w) {
  w.parent = unit_state(p, p.start);
  w.parent_mask = p.start;
  std::optional<double> ps;
  if (obj.known(p.start) || allowance(obj, p, e0, 1) > 0) ps = obj.evaluate(p.start, p.reference);
  if (!ps) return false;
  w.record(w.parent, *ps);
  w.parent_score = *ps;
  return true;
}

/// Where count-preserving swaps can move: the groups whose count leaves a
/// choice (0 < k < n), the most swaps one move can make in them (sum of
/// min(k, n - k)) and the number of single swaps (sum of k * (n - k)).
struct swap_space {
  std::vector<int> groups;
  int max_swaps = 0;
  std::size_t singles = 0;
};

inline swap_space swap_space_of(const SubProblem& p) {
  swap_space out;
  for (std::size_t i = 0; i < p.groups.size(); ++i) {
    const int n = static_cast<int>(p.groups[i].units.size()), k = p.groups[i].count;
    if (k > 0 && k < n) {
      out.groups.push_back(static_cast<int>(i));
      out.max_swaps += std::min(k, n - k);
      out.singles += static_cast<std::size_t>(k) * static_cast<std::size_t>(n - k);
    }
  }
  return out;
}

/// Outcome of restart_from_best.
enum class restart_outcome { moved, known, exhausted };

/// A restart: the best state perturbed by `kick` random swaps is evaluated
/// (hinted from the best) and becomes the parent. With `skip_known` a mask
/// already evaluated is not revisited (`known`); `exhausted` when the budget
/// allows no evaluation.
template <class O>
restart_outcome restart_from_best(O& obj, const SubProblem& p, std::size_t e0, walk& w,
                                  const std::vector<int>& swappable, int kick, engine& g, bool skip_known) {
  if (allowance(obj, p, e0, 1) == 0) return restart_outcome::exhausted;
  auto s = w.best.state;
  for (int k = 0; k < kick; ++k) random_swap(p, swappable, s, g);
  HeadMask rm = apply_state(p, s);
  if (skip_known && obj.known(rm)) return restart_outcome::known;
  const HeadMask from = apply_state(p, w.best.state);
  auto v = obj.evaluate(rm, &from);
  if (!v) return restart_outcome::exhausted;
  w.adopt(std::move(s), std::move(rm), *v);
  return restart_outcome::moved;
}

}  // namespace detail

}  // namespace bosch::search
