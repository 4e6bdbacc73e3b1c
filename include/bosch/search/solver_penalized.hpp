// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file search/solver_penalized.hpp
/// The penalized bit-flip (1+lambda) evolution with repair, the analogue of
/// the paper's loss, as a policy of the generation loop (solver_loop.hpp; the
/// algorithm: solvers.hpp).

#include <bosch/objective.hpp>
#include <bosch/search/solver_loop.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace bosch::search {

namespace detail {

/// The penalized search: free bit flips, the pick and the acceptance by the
/// loss L (the pick maximizes -L), a repair of the best-L point at the end.
struct penalized_policy {
  static constexpr std::size_t held_back = 1;  ///< for the repair
  static constexpr bool exact_counts = false;
  static constexpr bool competes = false;  ///< proposals are judged by L, not by their score
  std::vector<std::uint8_t> start;
  std::vector<int> targets, sizes;
  double rate = 0;  ///< the mutation rate
  double parent_loss = 0;
  std::vector<std::uint8_t> best_l;  ///< the best point by L
  double best_loss = 0;
  int stagnation = 0;  ///< generations without a new best L

  /// L = -S^ + penalty (per-layer or global, Options::penalty_scope).
  double loss(const auto& r, const std::vector<std::uint8_t>& s, double score) const {
    double pen;
    if (r.o.penalty_scope == PenaltyScope::per_layer) {
      const auto c = group_counts(r.p, s);
      pen = per_layer_penalty(r.o.alpha, c, targets, sizes);
    } else {
      const double total_bits = static_cast<double>(r.p.start.size());
      double delta = 0.0;
      for (std::size_t u = 0; u < s.size(); ++u)
        delta += (static_cast<double>(s[u]) - static_cast<double>(start[u])) *
                 static_cast<double>(r.p.units[u].size());
      pen = r.o.alpha * (delta / total_bits) * (delta / total_bits);
    }
    return -r.obj.normalized(score) + pen;
  }

  /// Flips each unit with probability `p_flip`, one at random when none flipped.
  static void mutate(auto& r, std::vector<std::uint8_t>& s, double p_flip) {
    bool flipped = false;
    for (std::size_t u = 0; u < s.size(); ++u)
      if (uniform01(r.g) < p_flip) {
        s[u] ^= 1;
        flipped = true;
      }
    if (!flipped) s[static_cast<std::size_t>(uniform_int(r.g, 0, static_cast<int>(s.size()) - 1))] ^= 1;
  }

  bool begin(const auto& r) {
    start = r.parent;
    for (const auto& grp : r.p.groups) {
      targets.push_back(grp.count);
      sizes.push_back(static_cast<int>(grp.units.size()));
    }
    parent_loss = loss(r, r.parent, r.parent_score);
    best_l = r.parent;
    best_loss = parent_loss;
    rate = r.o.mutation_rate > 0.0 ? r.o.mutation_rate : 1.0 / static_cast<double>(start.size());
    return true;
  }

  generation propose(auto& r, std::size_t n) {
    return r.draw(n, [&](std::vector<std::uint8_t>& s) { mutate(r, s, rate * (1 + r.idle)); });
  }

  bool on_no_proposals(const auto& r) const { return r.idle <= 32; }

  double value(const auto& r, const std::vector<std::uint8_t>& s, double score) const {
    return -loss(r, s, score);
  }

  bool accept(auto& r, const generation& gen) {
    const std::size_t j = *gen.pick;
    const double l = -gen.pick_value;
    if (l < parent_loss || (r.o.accept_equal && l == parent_loss)) {
      r.move_to(gen.states[j], gen.masks[j], *gen.scores[j]);
      parent_loss = l;
    }
    if (l < best_loss) {
      best_l = gen.states[j];
      best_loss = l;
      stagnation = 0;
      return true;
    }
    return ++stagnation < r.o.restart_after || restart(r);
  }

  /// The parent restarts from the best-L point, mutated at 4 times the rate
  /// (at most 0.5). False when the budget (one held back) allows no evaluation.
  bool restart(auto& r) {
    if (r.allow(1, held_back) == 0) return false;
    stagnation = 0;
    r.parent = best_l;
    r.parent_mask = apply_state(r.p, r.parent);
    mutate(r, r.parent, std::min(0.5, 4.0 * rate));
    HeadMask rm = apply_state(r.p, r.parent);
    // A mask scored before costs nothing; one a race eliminated (known, no
    // full score) is scored in full below, from the samples it has.
    if (const std::optional<double> known = r.obj.cached(rm)) {
      r.parent_score = *known;
      parent_loss = loss(r, r.parent, r.parent_score);
      r.parent_mask = std::move(rm);
      return true;
    }
    auto v = r.obj.evaluate(rm, &r.parent_mask);
    if (!v) return false;
    r.record(r.parent, *v);
    r.parent_score = *v;
    parent_loss = loss(r, r.parent, *v);
    r.parent_mask = std::move(rm);
    if (parent_loss < best_loss) {
      best_l = r.parent;
      best_loss = parent_loss;
    }
    return true;
  }

  /// Repairs the best-L point to the exact counts with marginal estimates
  /// (see solvers.hpp) and evaluates it, unless it is feasible.
  void end(auto& r) const {
    if (feasible(r.p, best_l) || r.obj.stopped()) return;
    const std::size_t n = best_l.size();
    std::vector<double> sum_on(n, 0.0), sum_off(n, 0.0);
    std::vector<int> n_on(n, 0), n_off(n, 0);
    for (const auto& [s, v] : r.history)
      for (std::size_t u = 0; u < n; ++u) {
        if (s[u]) {
          sum_on[u] += r.obj.normalized(v);
          ++n_on[u];
        } else {
          sum_off[u] += r.obj.normalized(v);
          ++n_off[u];
        }
      }
    std::vector<double> est(n, 0.0);
    for (std::size_t u = 0; u < n; ++u)
      if (n_on[u] > 0 && n_off[u] > 0) est[u] = sum_on[u] / n_on[u] - sum_off[u] / n_off[u];
    auto repaired = best_l;
    for (const auto& grp : r.p.groups) {
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
    HeadMask rm = apply_state(r.p, repaired);
    std::optional<double> v;
    if (r.obj.known(rm) || r.allow(1) > 0) v = r.obj.evaluate(rm, &r.parent_mask);
    if (v) r.record(repaired, *v);
  }
};

}  // namespace detail

/// Penalized bit-flip (1+lambda) evolution with repair (see solvers.hpp).
template <class O>
SubResult solve_penalized(O& obj, const SubProblem& p, const Options& o) {
  return detail::local_search(obj, p, o, detail::penalized_policy{});
}

}  // namespace bosch::search
