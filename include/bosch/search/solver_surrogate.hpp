// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file search/solver_surrogate.hpp
/// The surrogate-assisted count-preserving local search (InnerSolver::surrogate;
/// docs/algorithm.md §Inner solvers), a policy of the generation loop
/// (solver_loop.hpp), and fit_to_log, which fits the surrogate to the log.
///
/// Like the swap solver it moves by count-preserving swaps (one SWA unit and
/// one full unit of the same group exchange states), so every per-group count
/// stays exact. Unlike it, a generation does not draw its lambda proposals at
/// random: it fits the surrogate (search/surrogate.hpp) to the whole
/// evaluation log so far (every stage's evaluations inform it), lists the
/// candidates near the parent (every single swap; double swaps combining the
/// most promising single swaps; lambda random moves of 2 to max_swaps + 1
/// swaps, at most the largest useful number), predicts
/// their scores, and evaluates the lambda unseen candidates with the highest
/// upper confidence bound mean + Options::surrogate_explore * sd (the sd is
/// computed for the best 4 * lambda by mean only). The best proposal replaces
/// the parent when it is better (ties with Options::accept_equal); after
/// Options::restart_after generations without a new best, or when every
/// candidate is known, the parent restarts from the best, perturbed by random
/// swaps, as in the swap solver (a perturbed point already known is skipped).
/// Candidates are listed in a fixed order and ties broken by that order, so
/// the result does not depend on batching.

#include <bosch/search/solver_swap.hpp>
#include <bosch/search/surrogate.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_set>
#include <utility>
#include <vector>

namespace bosch::search {

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

/// One candidate move of the surrogate solver: the unit states after it.
struct surrogate_candidate {
  std::vector<std::uint8_t> state;
  HeadMask mask;
  double mean = 0;
  double score = 0;  // acquisition value
};

/// The surrogate search (see the file comment).
struct surrogate_policy : swap_moves {
  Surrogate model;
  std::size_t tuned_at = 0;  ///< the log size at the last retune (0: none yet)
  int fails = 0;

  explicit surrogate_policy(const Options& o) : model(o.surrogate_points) {}

  /// The `n` candidates of highest acquisition value, after a fit to the log.
  generation propose(auto& r, std::size_t n) {
    const std::size_t n_log = r.obj.log().size();
    const bool retune = tuned_at == 0 || n_log >= tuned_at + tuned_at / 4 + 8;
    fit_to_log(model, r.obj, r.parent_mask, retune);
    if (retune) tuned_at = n_log;
    std::vector<surrogate_candidate> cands = candidates(r);
    generation gen;
    for (std::size_t i : acquire(r, cands, n)) gen.add(std::move(cands[i].state), std::move(cands[i].mask));
    return gen;
  }

  /// Every neighbour is known: restart from the best, perturbed.
  bool on_no_proposals(auto& r) {
    const auto out = restart_from_best(r, true);
    if (out == restart_outcome::exhausted) return false;
    return !(out == restart_outcome::known && ++fails > 4 * r.o.restart_after + 16);
  }

  bool accept(auto& r, const generation& gen) {
    if (gen.pick) {
      const double cs = *gen.scores[*gen.pick];
      if (cs > r.parent_score || (r.o.accept_equal && cs == r.parent_score))
        r.move_to(gen.states[*gen.pick], gen.masks[*gen.pick], cs);
    }
    if (gen.new_best) {
      fails = 0;
      return true;
    }
    if (++fails < r.o.restart_after) return true;
    fails = 0;
    return restart_from_best(r, true) != restart_outcome::exhausted;
  }

  /// The unknown candidates near the parent, in a fixed order: single swaps,
  /// then doubles of the best singles, then random multi-swaps.
  std::vector<surrogate_candidate> candidates(auto& r) const {
    const auto& p = r.p;
    const auto& parent = r.parent;
    std::vector<surrogate_candidate> cands;
    std::unordered_set<HeadMask> listed;
    auto add = [&](std::vector<std::uint8_t> s) {
      HeadMask m = apply_state(p, s);
      if (r.obj.known(m) || !listed.insert(m).second) return;
      surrogate_candidate c;
      c.mean = model.predict(PackedMask(m), false).mean;
      c.state = std::move(s);
      c.mask = std::move(m);
      cands.push_back(std::move(c));
    };
    for (int gi : space.groups)
      for (int a : p.groups[static_cast<std::size_t>(gi)].units) {
        if (!parent[static_cast<std::size_t>(a)]) continue;
        for (int b : p.groups[static_cast<std::size_t>(gi)].units) {
          if (parent[static_cast<std::size_t>(b)]) continue;
          auto s = parent;
          s[static_cast<std::size_t>(a)] = 0;
          s[static_cast<std::size_t>(b)] = 1;
          add(std::move(s));
        }
      }
    {
      // Doubles from the most promising single swaps (by predicted mean).
      const std::vector<std::size_t> idx = by_mean(cands);
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
    const int m_max = space.max_swaps;
    for (int k = 0; k < r.o.lambda; ++k) {
      auto s = parent;
      const int m = 2 + (m_max > 2 ? uniform_int(r.g, 0, std::min(m_max, r.o.max_swaps + 1) - 2) : 0);
      for (int i = 0; i < m; ++i) random_swap(p, space.groups, s, r.g);
      add(std::move(s));
    }
    return cands;
  }

  /// Acquisition: the indices of the best `n` candidates by UCB, computed
  /// for the best 4 * lambda by mean.
  std::vector<std::size_t> acquire(const auto& r, std::vector<surrogate_candidate>& cands, std::size_t n) const {
    std::vector<std::size_t> order = by_mean(cands);
    order.resize(std::min(order.size(), 4 * static_cast<std::size_t>(r.o.lambda)));
    for (std::size_t i : order) {
      const auto pr = model.predict(PackedMask(cands[i].mask), true);
      cands[i].score = pr.mean + r.o.surrogate_explore * pr.sd;
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return cands[a].score > cands[b].score; });
    order.resize(std::min(order.size(), n));
    return order;
  }

  /// Candidate indices by predicted mean, highest first (ties by order).
  static std::vector<std::size_t> by_mean(const std::vector<surrogate_candidate>& cands) {
    std::vector<std::size_t> idx(cands.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(),
                     [&](std::size_t a, std::size_t b) { return cands[a].mean > cands[b].mean; });
    return idx;
  }
};

}  // namespace detail

/// Surrogate-assisted local search (see the file comment).
template <class O>
SubResult solve_surrogate(O& obj, const SubProblem& p, const Options& o) {
  return detail::local_search(obj, p, o, detail::surrogate_policy(o));
}

}  // namespace bosch::search
