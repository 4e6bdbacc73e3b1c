// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file search/solver_swap.hpp
/// The count-preserving swap (1+lambda) local search (see solvers.hpp).

#include <bosch/search/solver_common.hpp>

namespace bosch::search {

/// Count-preserving swap (1+lambda) local search (see the file comment).
template <class O>
SubResult solve_swap(O& obj, const SubProblem& p, const Options& o) {
  const std::size_t e0 = obj.evaluations();
  engine g(p.stream);
  detail::walk w;
  if (!detail::start_walk(obj, p, e0, w)) return w.finish(p, obj.evaluations() - e0);
  auto& [history, best, parent, parent_mask, parent_score] = w;

  const detail::swap_space space = detail::swap_space_of(p);
  const std::vector<int>& swappable = space.groups;
  int m_max = space.max_swaps;
  const std::size_t n1 = space.singles;  // size of the single-swap neighbourhood
  if (swappable.empty()) return w.finish(p, obj.evaluations() - e0);
  const int kick = std::max(2, std::min(m_max, 2 * o.max_swaps));  // restart perturbation
  m_max = std::max(1, std::min(m_max, o.max_swaps));
  const int lambda = o.lambda;
  // Generations that sample about one neighbourhood's worth of proposals.
  const int sweep = static_cast<int>((n1 + static_cast<std::size_t>(lambda) - 1) /
                                     static_cast<std::size_t>(lambda));
  int fails = 0, idle = 0;
  auto restart = [&]() -> bool {
    if (detail::restart_from_best(obj, p, e0, w, swappable, kick, g, false) != detail::restart_outcome::moved)
      return false;
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
    // A raced proposal (Options::race) may be eliminated: it lost to the parent.
    const auto outcomes = obj.compete(masks, parent_mask, parent_score);
    std::vector<std::optional<double>> scores(props.size());
    std::optional<std::size_t> pick;
    std::vector<std::size_t> improving;
    bool answered = false;
    for (std::size_t j = 0; j < props.size(); ++j) {
      answered = answered || outcomes[j].eliminated;
      scores[j] = outcomes[j].score;
      if (!scores[j]) continue;
      answered = true;
      w.record(props[j], *scores[j]);
      if (!pick || *scores[j] > *scores[*pick]) pick = j;
      if (*scores[j] > parent_score) improving.push_back(j);
    }
    if (!answered) break;
    if (!pick) {  // every proposal eliminated: a failed generation
      ++fails;
      if (m == m_max && fails >= (m_max - 1) * sweep + o.restart_after && !restart()) break;
      continue;
    }
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
          w.record(combo, *v);
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
  return w.finish(p, obj.evaluations() - e0);
}

}  // namespace bosch::search
