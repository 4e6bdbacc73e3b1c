// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file search/solver_exhaustive.hpp
/// Enumeration of a sub-problem's whole feasible set (used when it fits the
/// budget; see solvers.hpp).

#include <bosch/search/solver_common.hpp>

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

namespace bosch::search {

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

}  // namespace bosch::search
