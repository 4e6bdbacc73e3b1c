// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file search/solver_swap.hpp
/// The count-preserving swap moves, and the swap (1+lambda) local search as a
/// policy of the generation loop (solver_loop.hpp; the algorithm: solvers.hpp).

#include <bosch/search/solver_loop.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace bosch::search {

namespace detail {

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

/// What the count-preserving searches (swap, surrogate) share as policies of
/// local_search: their states keep the counts, their proposals race against
/// the parent's score, the pick is the highest score, and a restart moves
/// the parent to the best point perturbed by `kick` random swaps.
struct swap_moves {
  static constexpr std::size_t held_back = 0;
  static constexpr bool exact_counts = true;
  static constexpr bool competes = true;
  swap_space space;
  int kick = 0;  ///< swaps of a restart's perturbation

  /// False when no group leaves a choice.
  bool begin(const auto& r) {
    space = swap_space_of(r.p);
    kick = std::max(2, std::min(space.max_swaps, 2 * r.o.max_swaps));
    return !space.groups.empty();
  }
  double value(const auto&, const std::vector<std::uint8_t>&, double score) const { return score; }
  void end(const auto&) const {}

  enum class restart_outcome { moved, known, exhausted };
  /// The best state perturbed by `kick` random swaps is evaluated (hinted
  /// from the best) and becomes the parent. With `skip_known` a mask already
  /// evaluated is not revisited (`known`); `exhausted` when the budget allows
  /// no evaluation.
  restart_outcome restart_from_best(auto& r, bool skip_known) const {
    if (r.allow(1) == 0) return restart_outcome::exhausted;
    auto s = r.best.state;
    for (int k = 0; k < kick; ++k) random_swap(r.p, space.groups, s, r.g);
    HeadMask rm = apply_state(r.p, s);
    if (skip_known && r.obj.known(rm)) return restart_outcome::known;
    const HeadMask from = apply_state(r.p, r.best.state);
    auto v = r.obj.evaluate(rm, &from);
    if (!v) return restart_outcome::exhausted;
    r.adopt(std::move(s), std::move(rm), *v);
    return restart_outcome::moved;
  }
};

/// The swap search: proposals of m random swaps, m adapted to the failures,
/// improving proposals merged (see solvers.hpp).
struct swap_policy : swap_moves {
  int m_max = 1;  ///< the largest m
  int sweep = 1;  ///< generations that sample about one neighbourhood's worth of proposals
  int m = 1;      ///< this generation's swaps per proposal
  int fails = 0;

  bool begin(const auto& r) {
    if (!swap_moves::begin(r)) return false;
    m_max = std::max(1, std::min(space.max_swaps, r.o.max_swaps));
    const auto lambda = static_cast<std::size_t>(r.o.lambda);
    sweep = static_cast<int>((space.singles + lambda - 1) / lambda);
    return true;
  }

  generation propose(auto& r, std::size_t n) {
    m = std::min(m_max, 1 + fails / sweep);
    return r.draw(n, [&](std::vector<std::uint8_t>& s) {
      for (int k = 0; k < m; ++k) random_swap(r.p, space.groups, s, r.g);
    });
  }

  /// Every nearby point is already known: widen the move, then restart.
  bool on_no_proposals(auto& r) {
    if (r.idle > 4 * m_max + 16) return false;
    if (m < m_max)
      fails = m * sweep;
    else if (r.idle % 4 == 0 && !restart(r))
      return false;
    return true;
  }

  bool accept(auto& r, const generation& gen) {
    if (gen.pick)
      step(r, gen);
    else
      ++fails;  // every proposal eliminated: a failed generation
    return !(m == m_max && fails >= (m_max - 1) * sweep + r.o.restart_after) || restart(r);
  }

  /// Moves to the pick, or to the merge of the improving proposals when it
  /// scores higher; ties move too with Options::accept_equal.
  void step(auto& r, const generation& gen) {
    const auto& props = gen.states;
    const auto& scores = gen.scores;
    std::vector<std::uint8_t> next = props[*gen.pick];
    HeadMask next_mask = gen.masks[*gen.pick];
    double cs = *scores[*gen.pick];
    std::vector<std::size_t> improving;
    for (std::size_t j = 0; j < props.size(); ++j)
      if (scores[j] && *scores[j] > r.parent_score) improving.push_back(j);
    // Combine independent improvements (disjoint changed units), best first.
    if (improving.size() >= 2) {
      std::stable_sort(improving.begin(), improving.end(),
                       [&](std::size_t a, std::size_t b) { return *scores[a] > *scores[b]; });
      const auto& parent = r.parent;
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
      HeadMask cm = apply_state(r.p, combo);
      if (merged >= 2 && !r.obj.known(cm) && r.allow(1) > 0) {
        if (auto v = r.obj.evaluate(cm, &r.parent_mask)) {
          r.record(combo, *v);
          if (*v > cs) {
            next = std::move(combo);
            next_mask = std::move(cm);
            cs = *v;
          }
        }
      }
    }
    if (cs > r.parent_score) {
      r.move_to(std::move(next), std::move(next_mask), cs);
      fails = 0;
      return;
    }
    if (r.o.accept_equal && cs == r.parent_score) r.move_to(std::move(next), std::move(next_mask), r.parent_score);
    ++fails;
  }

  /// A restart from the best; false when it did not move.
  bool restart(auto& r) {
    if (restart_from_best(r, false) != restart_outcome::moved) return false;
    fails = 0;
    return true;
  }
};

}  // namespace detail

/// Count-preserving swap (1+lambda) local search (see solvers.hpp).
template <class O>
SubResult solve_swap(O& obj, const SubProblem& p, const Options& o) {
  return detail::local_search(obj, p, o, detail::swap_policy{});
}

}  // namespace bosch::search
