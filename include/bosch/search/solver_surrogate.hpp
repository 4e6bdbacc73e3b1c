// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file search/solver_surrogate.hpp
/// The surrogate-assisted count-preserving local search (InnerSolver::surrogate;
/// docs/algorithm.md §Inner solvers).
///
/// Like the swap solver it moves by count-preserving swaps (one SWA unit and
/// one full unit of the same group exchange states), so every per-group count
/// stays exact. Unlike it, a generation does not draw its lambda proposals at
/// random: it fits the surrogate (search/surrogate.hpp) to the whole
/// evaluation log so far (every stage's evaluations inform it), lists the
/// candidates near the parent (every single swap; double swaps combining the
/// most promising single swaps; a few random 2..max_swaps-swap moves), predicts
/// their scores, and evaluates the lambda unseen candidates with the highest
/// upper confidence bound mean + Options::surrogate_explore * sd (the sd is
/// computed for the best 4 * lambda by mean only). The best proposal replaces
/// the parent when it is at least as good (ties with Options::accept_equal);
/// after Options::restart_after generations without a new best the parent
/// restarts from the best, perturbed by random swaps, as in the swap solver.
/// Candidates are listed in a fixed order and ties broken by that order, so
/// the result does not depend on batching.

#include <bosch/search/solver_common.hpp>
#include <bosch/search/surrogate.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

namespace bosch::search {

namespace detail {

/// One candidate move of the surrogate solver: the unit states after it.
struct surrogate_candidate {
  std::vector<std::uint8_t> state;
  HeadMask mask;
  double mean = 0;
  double score = 0;  // acquisition value
};

}  // namespace detail

/// Fits `model` to the objective's log, focused on `focus`. A candidate a race
/// eliminated (Options::race) enters as what it is, a noisy estimate: its
/// score (the parent's plus the mean per-sample difference) with its standard
/// error's square added to the model's noise for that point alone.
template <class O>
void fit_to_log(Surrogate& model, const O& obj, const HeadMask& focus, bool retune) {
  const auto& log = obj.log();
  std::vector<HeadMask> masks;
  std::vector<double> scores, extra;
  masks.reserve(log.size());
  scores.reserve(log.size());
  bool any = false;
  for (const auto& r : log) {
    masks.push_back(r.mask);
    scores.push_back(r.score);
    extra.push_back(r.eliminated ? r.score_sd * r.score_sd : 0.0);
    any = any || r.eliminated;
  }
  model.fit(masks, scores, focus, retune, any ? std::span<const double>(extra) : std::span<const double>());
}

namespace detail {

}  // namespace detail

/// Surrogate-assisted local search (see the file comment).
template <class O>
SubResult solve_surrogate(O& obj, const SubProblem& p, const Options& o) {
  const std::size_t e0 = obj.evaluations();
  engine g(p.stream);
  detail::walk w;
  if (!detail::start_walk(obj, p, e0, w)) return w.finish(p, obj.evaluations() - e0);
  auto& [history, best, parent, parent_mask, parent_score] = w;

  const detail::swap_space space = detail::swap_space_of(p);
  const std::vector<int>& swappable = space.groups;
  const int m_max = space.max_swaps;
  if (swappable.empty()) return w.finish(p, obj.evaluations() - e0);
  const int kick = std::max(2, std::min(m_max, 2 * o.max_swaps));
  const int lambda = o.lambda;
  Surrogate model(o.surrogate_points);
  std::size_t tuned_at = 0;
  int fails = 0;

  while (!obj.stopped()) {
    const std::size_t nprop = detail::allowance(obj, p, e0, static_cast<std::size_t>(lambda));
    if (nprop == 0) break;
    const std::size_t n_log = obj.log().size();
    const bool retune = tuned_at == 0 || n_log >= tuned_at + tuned_at / 4 + 8;
    fit_to_log(model, obj, parent_mask, retune);
    if (retune) tuned_at = n_log;

    // Candidates, in a fixed order: single swaps, then doubles of the best
    // singles, then random multi-swaps.
    std::vector<detail::surrogate_candidate> cands;
    std::unordered_set<HeadMask> listed;
    auto add = [&](std::vector<std::uint8_t> s) {
      HeadMask m = apply_state(p, s);
      if (obj.known(m) || !listed.insert(m).second) return;
      detail::surrogate_candidate c;
      c.mean = model.predict(PackedMask(m), false).mean;
      c.state = std::move(s);
      c.mask = std::move(m);
      cands.push_back(std::move(c));
    };
    std::vector<std::pair<int, int>> singles;  // (unit switched off, unit switched on)
    for (int gi : swappable)
      for (int a : p.groups[static_cast<std::size_t>(gi)].units) {
        if (!parent[static_cast<std::size_t>(a)]) continue;
        for (int b : p.groups[static_cast<std::size_t>(gi)].units) {
          if (parent[static_cast<std::size_t>(b)]) continue;
          singles.emplace_back(a, b);
          auto s = parent;
          s[static_cast<std::size_t>(a)] = 0;
          s[static_cast<std::size_t>(b)] = 1;
          add(std::move(s));
        }
      }
    {
      // Doubles from the most promising single swaps (by predicted mean).
      std::vector<std::size_t> idx(cands.size());
      for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
      std::stable_sort(idx.begin(), idx.end(),
                       [&](std::size_t a, std::size_t b) { return cands[a].mean > cands[b].mean; });
      const std::size_t top = std::min<std::size_t>(idx.size(), 8);
      std::vector<std::vector<std::uint8_t>> tops;
      for (std::size_t i = 0; i < top; ++i) tops.push_back(cands[idx[i]].state);
      for (std::size_t i = 0; i < tops.size(); ++i)
        for (std::size_t j = i + 1; j < tops.size(); ++j) {
          // Combine the two moves when they touch disjoint units.
          auto s = parent;
          bool clash = false;
          for (std::size_t u = 0; u < s.size(); ++u) {
            const bool ci = tops[i][u] != parent[u], cj = tops[j][u] != parent[u];
            if (ci && cj) clash = true;
            if (ci) s[u] = tops[i][u];
            if (cj) s[u] = tops[j][u];
          }
          if (!clash) add(std::move(s));
        }
    }
    for (int r = 0; r < lambda; ++r) {
      auto s = parent;
      const int m = 2 + (m_max > 2 ? uniform_int(g, 0, std::min(m_max, o.max_swaps + 1) - 2) : 0);
      for (int k = 0; k < m; ++k) detail::random_swap(p, swappable, s, g);
      add(std::move(s));
    }
    if (cands.empty()) {
      // Every neighbour is known: restart from the best, perturbed.
      const auto r = detail::restart_from_best(obj, p, e0, w, swappable, kick, g, true);
      if (r == detail::restart_outcome::exhausted) break;
      if (r == detail::restart_outcome::known && ++fails > 4 * o.restart_after + 16) break;
      continue;
    }

    // Acquisition: UCB on the best 4 * lambda by mean.
    std::vector<std::size_t> order(cands.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return cands[a].mean > cands[b].mean; });
    const std::size_t shortlist = std::min(order.size(), 4 * static_cast<std::size_t>(lambda));
    order.resize(shortlist);
    for (std::size_t i : order) {
      const auto pr = model.predict(PackedMask(cands[i].mask), true);
      cands[i].score = pr.mean + o.surrogate_explore * pr.sd;
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return cands[a].score > cands[b].score; });
    order.resize(std::min(order.size(), nprop));
    std::vector<HeadMask> masks;
    for (std::size_t i : order) masks.push_back(cands[i].mask);
    // A raced candidate (Options::race) may be eliminated: it lost to the parent.
    const auto outcomes = obj.compete(masks, parent_mask, parent_score);

    std::optional<std::size_t> pick;
    bool answered = false;
    for (std::size_t j = 0; j < masks.size(); ++j) {
      answered = answered || outcomes[j].eliminated;
      if (!outcomes[j].score) continue;
      answered = true;
      const auto& st = cands[order[j]].state;
      history.emplace_back(st, *outcomes[j].score);
      if (!pick || *outcomes[j].score > *outcomes[*pick].score) pick = j;
    }
    if (!answered) break;
    const double before = best.score;
    for (std::size_t j = 0; j < masks.size(); ++j)
      if (outcomes[j].score) best.offer(cands[order[j]].state, *outcomes[j].score);
    if (pick) {
      const double cs = *outcomes[*pick].score;
      if (cs > parent_score || (o.accept_equal && cs == parent_score)) {
        parent = cands[order[*pick]].state;
        parent_mask = masks[*pick];
        parent_score = cs;
      }
    }
    if (best.score > before) {
      fails = 0;
    } else if (++fails >= o.restart_after) {
      fails = 0;
      if (detail::restart_from_best(obj, p, e0, w, swappable, kick, g, true) == detail::restart_outcome::exhausted)
        break;
    }
  }
  return w.finish(p, obj.evaluations() - e0);
}

}  // namespace bosch::search
