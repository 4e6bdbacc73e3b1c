// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file solvers.hpp
/// The inner black-box solvers of the LNS, behind one entry point, solve().
/// Each is bounded by the sub-problem's evaluation budget (new evaluations;
/// memo hits are free) and by the objective's global budget and stop flag.
/// The paper does not name its inner solver; these are this library's designs
/// (docs/algorithm.md §Inner solvers) [I]:
///
/// - exhaustive: every feasible point, when the feasible set (product over
///   groups of C(n_g, k_g)) fits the budget; lexicographic order.
/// - swap: count-preserving (1+lambda) local search. A proposal applies m
///   random swaps (one SWA unit and one full unit of the same group exchange
///   states), so every per-group count stays exact. Proposals already in the
///   memo are redrawn (up to 16 tries), so single swaps sample the
///   neighbourhood without replacement. m adapts: 1 while the parent keeps
///   improving; after each further "sweep" of failed generations (a sweep =
///   ceil(N1 / lambda) generations, N1 = number of single swaps) m grows by
///   one, up to min(Options::max_swaps, largest useful m). When several
///   proposals of a generation improve on the parent, their changes are merged
///   (best first, skipping ones that touch units already changed) and the
///   merge is evaluated too: independent improvements in different layers are
///   combined. Ties are accepted when Options::accept_equal (plateau moves).
///   After Options::restart_after further failed generations at the largest
///   m, the parent restarts from the best perturbed by
///   min(largest useful m, max(2, 2 * max_swaps)) swaps.
/// - penalized: (1+lambda) evolution with free bit flips (rate
///   Options::mutation_rate, default 1/n, at least one flip), minimizing the
///   paper's L = -S^ + alpha * penalty (per-layer or global scope). One
///   evaluation is held back for the repair: the best-L point is repaired to
///   the exact counts (switching off the SWA units with the lowest, and on the
///   full units with the highest, marginal estimate mean S^ with the unit SWA
///   minus mean S^ with it full, over this solve's evaluations; ties by unit
///   order) and evaluated. The result is the best feasible point seen.
///
/// All proposals of a generation are generated before any is evaluated and
/// are evaluated together (Objective::evaluate_many), so batching never
/// changes the result.

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

/// Enumerates every feasible point (lexicographic per group, last group
/// fastest) within the budget and returns the best (first on ties).
template <class O>
SubResult solve_exhaustive(O& obj, const SubProblem& p) {
  const std::size_t e0 = obj.evaluations();
  // All count-subsets of each group, as unit lists.
  std::vector<std::vector<std::vector<int>>> combos(p.groups.size());
  for (std::size_t g = 0; g < p.groups.size(); ++g) {
    const auto& grp = p.groups[g];
    const int n = static_cast<int>(grp.units.size()), k = grp.count;
    std::vector<int> idx(static_cast<std::size_t>(k));
    std::iota(idx.begin(), idx.end(), 0);
    while (true) {
      std::vector<int> c;
      for (int i : idx) c.push_back(grp.units[static_cast<std::size_t>(i)]);
      combos[g].push_back(std::move(c));
      int i = k - 1;
      while (i >= 0 && idx[static_cast<std::size_t>(i)] == n - k + i) --i;
      if (i < 0) break;
      ++idx[static_cast<std::size_t>(i)];
      for (int j = i + 1; j < k; ++j)
        idx[static_cast<std::size_t>(j)] = idx[static_cast<std::size_t>(j - 1)] + 1;
    }
  }
  std::vector<std::vector<std::uint8_t>> states;
  std::vector<HeadMask> masks;
  std::vector<std::size_t> digit(p.groups.size(), 0);
  while (true) {
    std::vector<std::uint8_t> s(p.units.size(), 0);
    for (std::size_t g = 0; g < p.groups.size(); ++g)
      for (int u : combos[g][digit[g]]) s[static_cast<std::size_t>(u)] = 1;
    masks.push_back(apply_state(p, s));
    states.push_back(std::move(s));
    std::size_t g = p.groups.size();
    while (g > 0) {
      --g;
      if (++digit[g] < combos[g].size()) break;
      digit[g] = 0;
      if (g == 0) {
        g = static_cast<std::size_t>(-1);
        break;
      }
    }
    if (g == static_cast<std::size_t>(-1) || p.groups.empty()) break;
  }
  const HeadMask* ref = obj.known(p.start) ? &p.start : p.reference;
  detail::best_tracker best;
  std::vector<std::pair<std::vector<std::uint8_t>, double>> history;
  const auto scores = obj.evaluate_many(masks, ref);
  for (std::size_t i = 0; i < masks.size(); ++i)
    if (scores[i]) {
      best.offer(states[i], *scores[i]);
      history.emplace_back(states[i], *scores[i]);
    }
  return detail::finish(p, best, obj.evaluations() - e0, std::move(history));
}

/// Count-preserving swap (1+lambda) local search (see the file comment).
template <class O>
SubResult solve_swap(O& obj, const SubProblem& p, const Options& o) {
  const std::size_t e0 = obj.evaluations();
  engine g(p.stream);
  std::vector<std::pair<std::vector<std::uint8_t>, double>> history;
  detail::best_tracker best;
  std::vector<std::uint8_t> parent = unit_state(p, p.start);
  HeadMask parent_mask = p.start;
  std::optional<double> ps;
  if (obj.known(p.start) || detail::allowance(obj, p, e0, 1) > 0)
    ps = obj.evaluate(p.start, p.reference);
  if (!ps) return detail::finish(p, best, obj.evaluations() - e0, std::move(history));
  double parent_score = *ps;
  best.offer(parent, parent_score);
  history.emplace_back(parent, parent_score);

  std::vector<int> swappable;
  int m_max = 0;
  std::size_t n1 = 0;  // size of the single-swap neighbourhood
  for (std::size_t i = 0; i < p.groups.size(); ++i) {
    const int n = static_cast<int>(p.groups[i].units.size()), k = p.groups[i].count;
    if (k > 0 && k < n) {
      swappable.push_back(static_cast<int>(i));
      m_max += std::min(k, n - k);
      n1 += static_cast<std::size_t>(k) * static_cast<std::size_t>(n - k);
    }
  }
  if (swappable.empty()) return detail::finish(p, best, obj.evaluations() - e0, std::move(history));
  const int kick = std::max(2, std::min(m_max, 2 * o.max_swaps));  // restart perturbation
  m_max = std::max(1, std::min(m_max, o.max_swaps));
  const int lambda = o.lambda;
  // Generations that sample about one neighbourhood's worth of proposals.
  const int sweep = static_cast<int>((n1 + static_cast<std::size_t>(lambda) - 1) /
                                     static_cast<std::size_t>(lambda));
  int fails = 0, idle = 0;
  auto restart = [&]() -> bool {
    if (detail::allowance(obj, p, e0, 1) == 0) return false;
    const HeadMask from = apply_state(p, best.state);
    parent = best.state;
    for (int s = 0; s < kick; ++s) detail::random_swap(p, swappable, parent, g);
    HeadMask rm = apply_state(p, parent);
    auto v = obj.evaluate(rm, &from);
    if (!v) return false;
    parent_mask = std::move(rm);
    parent_score = *v;
    history.emplace_back(parent, parent_score);
    best.offer(parent, parent_score);
    fails = 0;
    return true;
  };
  while (!obj.stopped()) {
    const int m = std::min(m_max, 1 + fails / sweep);
    const std::size_t nprop = detail::allowance(obj, p, e0, static_cast<std::size_t>(lambda));
    if (nprop == 0) break;
    std::vector<std::vector<std::uint8_t>> props;
    std::vector<HeadMask> masks;
    for (std::size_t j = 0; j < nprop; ++j) {
      for (int attempt = 0; attempt < 16; ++attempt) {
        auto child = parent;
        for (int s = 0; s < m; ++s) detail::random_swap(p, swappable, child, g);
        HeadMask cm = apply_state(p, child);
        if (obj.known(cm) || std::find(masks.begin(), masks.end(), cm) != masks.end()) continue;
        props.push_back(std::move(child));
        masks.push_back(std::move(cm));
        break;
      }
    }
    if (props.empty()) {
      // Every nearby point is already known: widen the move, then restart.
      if (++idle > 4 * m_max + 16) break;
      if (m < m_max) {
        fails = m * sweep;
      } else if (idle % 4 == 0 && !restart()) {
        break;
      }
      continue;
    }
    idle = 0;
    const auto scores = obj.evaluate_many(masks, &parent_mask);
    std::optional<std::size_t> pick;
    std::vector<std::size_t> improving;
    for (std::size_t j = 0; j < props.size(); ++j) {
      if (!scores[j]) continue;
      history.emplace_back(props[j], *scores[j]);
      best.offer(props[j], *scores[j]);
      if (!pick || *scores[j] > *scores[*pick]) pick = j;
      if (*scores[j] > parent_score) improving.push_back(j);
    }
    if (!pick) break;
    std::vector<std::uint8_t> next = props[*pick];
    HeadMask next_mask = masks[*pick];
    double cs = *scores[*pick];
    // Combine independent improvements (disjoint changed units), best first.
    if (improving.size() >= 2) {
      std::stable_sort(improving.begin(), improving.end(),
                       [&](std::size_t a, std::size_t b) { return *scores[a] > *scores[b]; });
      auto combo = parent;
      std::vector<std::uint8_t> touched(parent.size(), 0);
      int merged = 0;
      for (std::size_t j : improving) {
        bool clash = false;
        for (std::size_t u = 0; u < parent.size(); ++u)
          if (props[j][u] != parent[u] && touched[u]) clash = true;
        if (clash) continue;
        for (std::size_t u = 0; u < parent.size(); ++u)
          if (props[j][u] != parent[u]) {
            combo[u] = props[j][u];
            touched[u] = 1;
          }
        ++merged;
      }
      HeadMask cm = apply_state(p, combo);
      if (merged >= 2 && !obj.known(cm) && detail::allowance(obj, p, e0, 1) > 0) {
        if (auto v = obj.evaluate(cm, &parent_mask)) {
          history.emplace_back(combo, *v);
          best.offer(combo, *v);
          if (*v > cs) {
            next = std::move(combo);
            next_mask = std::move(cm);
            cs = *v;
          }
        }
      }
    }
    if (cs > parent_score) {
      parent = std::move(next);
      parent_mask = std::move(next_mask);
      parent_score = cs;
      fails = 0;
    } else {
      if (o.accept_equal && cs == parent_score) {
        parent = std::move(next);
        parent_mask = std::move(next_mask);
      }
      ++fails;
    }
    if (m == m_max && fails >= (m_max - 1) * sweep + o.restart_after && !restart()) break;
  }
  return detail::finish(p, best, obj.evaluations() - e0, std::move(history));
}

/// Penalized bit-flip (1+lambda) evolution with repair (see the file comment).
template <class O>
SubResult solve_penalized(O& obj, const SubProblem& p, const Options& o) {
  const std::size_t e0 = obj.evaluations();
  engine g(p.stream);
  std::vector<std::pair<std::vector<std::uint8_t>, double>> history;
  detail::best_tracker best;  // feasible, by score
  const std::size_t n = p.units.size();
  const std::vector<std::uint8_t> start = unit_state(p, p.start);
  std::vector<int> targets, sizes;
  for (const auto& grp : p.groups) {
    targets.push_back(grp.count);
    sizes.push_back(static_cast<int>(grp.units.size()));
  }
  const double total_bits = static_cast<double>(p.start.size());
  auto loss = [&](const std::vector<std::uint8_t>& s, double score) {
    double pen;
    if (o.penalty_scope == PenaltyScope::per_layer) {
      const auto c = group_counts(p, s);
      pen = per_layer_penalty(o.alpha, c, targets, sizes);
    } else {
      double delta = 0.0;
      for (std::size_t u = 0; u < n; ++u)
        delta += (static_cast<double>(s[u]) - static_cast<double>(start[u])) *
                 static_cast<double>(p.units[u].size());
      pen = o.alpha * (delta / total_bits) * (delta / total_bits);
    }
    return -obj.normalized(score) + pen;
  };
  auto note = [&](const std::vector<std::uint8_t>& s, double v) {
    history.emplace_back(s, v);
    if (feasible(p, s)) best.offer(s, v);
  };

  std::vector<std::uint8_t> parent = start;
  HeadMask parent_mask = p.start;
  std::optional<double> ps;
  if (obj.known(p.start) || detail::allowance(obj, p, e0, 1) > 0)
    ps = obj.evaluate(p.start, p.reference);
  if (!ps) return detail::finish(p, best, obj.evaluations() - e0, std::move(history));
  note(parent, *ps);
  double parent_loss = loss(parent, *ps);
  std::vector<std::uint8_t> best_l = parent;
  double best_loss = parent_loss;

  const double rate = o.mutation_rate > 0.0 ? o.mutation_rate : 1.0 / static_cast<double>(n);
  auto mutate = [&](std::vector<std::uint8_t>& s, double r) {
    bool flipped = false;
    for (std::size_t u = 0; u < n; ++u)
      if (uniform01(g) < r) {
        s[u] ^= 1;
        flipped = true;
      }
    if (!flipped) s[static_cast<std::size_t>(uniform_int(g, 0, static_cast<int>(n) - 1))] ^= 1;
  };

  int stagnation = 0, idle = 0;
  while (!obj.stopped()) {
    // Hold one evaluation back for the repair.
    const std::size_t nprop = detail::allowance(obj, p, e0, static_cast<std::size_t>(o.lambda), 1);
    if (nprop == 0) break;
    std::vector<std::vector<std::uint8_t>> props;
    std::vector<HeadMask> masks;
    for (std::size_t j = 0; j < nprop; ++j)
      for (int attempt = 0; attempt < 16; ++attempt) {
        auto child = parent;
        mutate(child, rate * (1 + idle));
        HeadMask cm = apply_state(p, child);
        if (obj.known(cm) || std::find(masks.begin(), masks.end(), cm) != masks.end()) continue;
        props.push_back(std::move(child));
        masks.push_back(std::move(cm));
        break;
      }
    if (props.empty()) {
      if (++idle > 32) break;
      continue;
    }
    idle = 0;
    const auto scores = obj.evaluate_many(masks, &parent_mask);
    std::optional<std::size_t> pick;
    double pick_loss = 0.0;
    for (std::size_t j = 0; j < props.size(); ++j) {
      if (!scores[j]) continue;
      note(props[j], *scores[j]);
      const double l = loss(props[j], *scores[j]);
      if (!pick || l < pick_loss) {
        pick = j;
        pick_loss = l;
      }
    }
    if (!pick) break;
    if (pick_loss < parent_loss || (o.accept_equal && pick_loss == parent_loss)) {
      parent = props[*pick];
      parent_mask = masks[*pick];
      parent_loss = pick_loss;
    }
    if (pick_loss < best_loss) {
      best_l = props[*pick];
      best_loss = pick_loss;
      stagnation = 0;
    } else if (++stagnation >= o.restart_after) {
      if (detail::allowance(obj, p, e0, 1, 1) == 0) break;
      stagnation = 0;
      parent = best_l;
      parent_mask = apply_state(p, parent);
      parent_loss = best_loss;
      mutate(parent, std::min(0.5, 4.0 * rate));
      HeadMask rm = apply_state(p, parent);
      if (obj.known(rm)) {
        parent_loss = loss(parent, *obj.cached(rm));
        parent_mask = std::move(rm);
      } else {
        auto v = obj.evaluate(rm, &parent_mask);
        if (!v) break;
        note(parent, *v);
        parent_loss = loss(parent, *v);
        parent_mask = std::move(rm);
        if (parent_loss < best_loss) {
          best_l = parent;
          best_loss = parent_loss;
        }
      }
    }
  }

  // Repair the best-L point to exact counts using marginal estimates.
  if (!feasible(p, best_l) && !obj.stopped()) {
    std::vector<double> sum_on(n, 0.0), sum_off(n, 0.0);
    std::vector<int> n_on(n, 0), n_off(n, 0);
    for (const auto& [s, v] : history)
      for (std::size_t u = 0; u < n; ++u) {
        if (s[u]) {
          sum_on[u] += obj.normalized(v);
          ++n_on[u];
        } else {
          sum_off[u] += obj.normalized(v);
          ++n_off[u];
        }
      }
    std::vector<double> est(n, 0.0);
    for (std::size_t u = 0; u < n; ++u)
      if (n_on[u] > 0 && n_off[u] > 0) est[u] = sum_on[u] / n_on[u] - sum_off[u] / n_off[u];
    auto repaired = best_l;
    for (const auto& grp : p.groups) {
      std::vector<int> on, off;
      for (int u : grp.units) (repaired[static_cast<std::size_t>(u)] ? on : off).push_back(u);
      auto by_est = [&](int a, int b) {
        const double ea = est[static_cast<std::size_t>(a)], eb = est[static_cast<std::size_t>(b)];
        return ea != eb ? ea < eb : a < b;
      };
      if (static_cast<int>(on.size()) > grp.count) {
        std::stable_sort(on.begin(), on.end(), by_est);  // lowest estimate first: switch off
        for (std::size_t i = 0; i < on.size() - static_cast<std::size_t>(grp.count); ++i)
          repaired[static_cast<std::size_t>(on[i])] = 0;
      } else if (static_cast<int>(on.size()) < grp.count) {
        std::stable_sort(off.begin(), off.end(), [&](int a, int b) {
          const double ea = est[static_cast<std::size_t>(a)], eb = est[static_cast<std::size_t>(b)];
          return ea != eb ? ea > eb : a < b;
        });  // highest estimate first: switch on
        for (std::size_t i = 0; i < static_cast<std::size_t>(grp.count) - on.size(); ++i)
          repaired[static_cast<std::size_t>(off[i])] = 1;
      }
    }
    HeadMask rm = apply_state(p, repaired);
    std::optional<double> v;
    if (obj.known(rm) || detail::allowance(obj, p, e0, 1) > 0) v = obj.evaluate(rm, &parent_mask);
    if (v) note(repaired, *v);
  }
  return detail::finish(p, best, obj.evaluations() - e0, std::move(history));
}

/// Solves `p` with the solver chosen by `o`: exhaustive when
/// Options::exhaustive_when_fits and the feasible set fits the budget,
/// otherwise Options::inner_solver. Throws bosch::invalid_argument on a
/// malformed sub-problem.
template <class O>
SubResult solve(O& obj, const SubProblem& p, const Options& o) {
  check_subproblem(p);
  const double space = feasible_space(p);
  if (space <= 1.0 || (o.exhaustive_when_fits && space <= static_cast<double>(p.budget)))
    return solve_exhaustive(obj, p);
  if (o.inner_solver == InnerSolver::penalized) return solve_penalized(obj, p, o);
  return solve_swap(obj, p, o);
}

}  // namespace bosch::search
