// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file search/solver_loop.hpp
/// The one generation loop of the iterative inner solvers (swap, surrogate,
/// penalized; see solvers.hpp), which differ only by the policy they give it
/// (solver_swap.hpp, solver_surrogate.hpp, solver_penalized.hpp).
///
/// local_search() scores the start (p.start, free when already known), then,
/// until the objective stops, runs generations: it asks the budget (less the
/// policy's held_back) for up to Options::lambda proposals, has the policy
/// propose them (all new masks), evaluates them together, hinted from the
/// parent (Objective::compete when the policy competes, so that a race may
/// eliminate a proposal that cannot beat the parent's score; otherwise
/// Objective::evaluate_many), records every score, picks the first proposal of
/// highest value, and lets the policy accept it or not. It ends when the
/// objective stops, when the budget allows no proposal, when nothing of a
/// generation was answered, or when the policy says so; the policy's end()
/// then runs (penalized: the repair) and the result is the best recorded
/// point. A policy that finds nothing to search at begin() ends the search
/// at its start.
///
/// A policy provides:
/// - `held_back`: evaluations of the budget the generations leave to end();
/// - `exact_counts`: its states keep the counts, so every recorded state may
///   be the best; otherwise only feasible ones;
/// - `competes`: whether its proposals race against the parent's score;
/// - `begin(r)`: set-up once the start is scored; false: nothing to search;
/// - `propose(r, n)`: a generation of at most n new proposals;
/// - `on_no_proposals(r)`: when none was found (r.idle counts such
///   generations in a row); false ends the search;
/// - `value(r, state, score)`: what the pick maximizes;
/// - `accept(r, gen)`: moves the parent or not, counts failures, restarts;
///   false ends the search;
/// - `end(r)`: after the loop.

#include <bosch/options.hpp>
#include <bosch/search/rng.hpp>
#include <bosch/search/solver_common.hpp>
#include <bosch/search/subproblem.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace bosch::search::detail {

/// One generation: the proposals (unit states and masks), then their scores
/// (nullopt: not scored in full, eliminated by a race or cut by the budget or
/// a stop), the pick (the first scored proposal of highest value) and whether
/// the generation raised the best score.
struct generation {
  std::vector<std::vector<std::uint8_t>> states;
  std::vector<HeadMask> masks;
  std::vector<std::optional<double>> scores;
  std::optional<std::size_t> pick;
  double pick_value = 0;
  bool new_best = false;
  void add(std::vector<std::uint8_t> s, HeadMask m) {
    states.push_back(std::move(s));
    masks.push_back(std::move(m));
  }
};

/// The state of one local search: the objective, the sub-problem and its
/// random stream, the parent, the best point and every evaluated state, in
/// order.
template <class O>
struct local_run {
  O& obj;
  const SubProblem& p;
  const Options& o;
  std::size_t e0;  ///< the log size when the solve began
  engine g;
  bool feasible_best;  ///< only feasible states may be the best
  std::vector<std::pair<std::vector<std::uint8_t>, double>> history;
  best_tracker best;
  std::vector<std::uint8_t> parent;
  HeadMask parent_mask;
  double parent_score = 0;
  int idle = 0;  ///< generations in a row without a proposal

  local_run(O& obj_, const SubProblem& p_, const Options& o_, bool feasible_best_)
      : obj(obj_), p(p_), o(o_), e0(obj_.evaluations()), g(p_.stream), feasible_best(feasible_best_) {}

  /// New evaluations the next step may spend, at most `want` (see allowance).
  std::size_t allow(std::size_t want, std::size_t hold = 0) { return allowance(obj, p, e0, want, hold); }

  /// Logs an evaluated state.
  void record(const std::vector<std::uint8_t>& s, double v) {
    history.emplace_back(s, v);
    if (!feasible_best || feasible(p, s)) best.offer(s, v);
  }
  /// Makes a state the parent.
  void move_to(std::vector<std::uint8_t> s, HeadMask m, double v) {
    parent = std::move(s);
    parent_mask = std::move(m);
    parent_score = v;
  }
  /// Logs an evaluated state and makes it the parent.
  void adopt(std::vector<std::uint8_t> s, HeadMask m, double v) {
    record(s, v);
    move_to(std::move(s), std::move(m), v);
  }

  /// Scores p.start (free when already known) and makes it the parent.
  /// False when the budget allows no evaluation.
  bool start() {
    parent = unit_state(p, p.start);
    parent_mask = p.start;
    std::optional<double> ps;
    if (obj.known(p.start) || allow(1) > 0) ps = obj.evaluate(p.start, p.reference);
    if (!ps) return false;
    record(parent, *ps);
    parent_score = *ps;
    return true;
  }

  /// Up to `n` proposals, each the parent changed by `move`, redrawn (up to
  /// 16 tries) while its mask is known or already proposed.
  template <class Move>
  generation draw(std::size_t n, Move&& move) {
    generation gen;
    for (std::size_t j = 0; j < n; ++j)
      for (int attempt = 0; attempt < 16; ++attempt) {
        auto child = parent;
        move(child);
        HeadMask cm = apply_state(p, child);
        if (obj.known(cm) || std::find(gen.masks.begin(), gen.masks.end(), cm) != gen.masks.end()) continue;
        gen.add(std::move(child), std::move(cm));
        break;
      }
    return gen;
  }

  /// Scores the proposals together, hinted from the parent: with `compete`,
  /// raced against the parent's score (Options::race; a raced proposal may
  /// be eliminated: it lost to the parent). False when none was answered.
  bool evaluate(generation& gen, bool compete) {
    if (!compete) {
      gen.scores = obj.evaluate_many(gen.masks, &parent_mask);
      return std::any_of(gen.scores.begin(), gen.scores.end(), [](const auto& s) { return s.has_value(); });
    }
    const auto outcomes = obj.compete(gen.masks, parent_mask, parent_score);
    bool answered = false;
    gen.scores.resize(outcomes.size());
    for (std::size_t j = 0; j < outcomes.size(); ++j) {
      gen.scores[j] = outcomes[j].score;
      answered = answered || outcomes[j].eliminated || outcomes[j].score.has_value();
    }
    return answered;
  }

  SubResult finish() { return detail::finish(p, best, obj.evaluations() - e0, std::move(history)); }
};

/// Runs the generation loop of the file comment with `policy`.
template <class O, class Policy>
SubResult local_search(O& obj, const SubProblem& p, const Options& o, Policy policy) {
  local_run<O> r(obj, p, o, !Policy::exact_counts);
  if (!r.start() || !policy.begin(r)) return r.finish();
  while (!obj.stopped()) {
    const std::size_t n = r.allow(static_cast<std::size_t>(o.lambda), Policy::held_back);
    if (n == 0) break;
    generation gen = policy.propose(r, n);
    if (gen.masks.empty()) {
      ++r.idle;
      if (policy.on_no_proposals(r)) continue;
      break;
    }
    r.idle = 0;
    if (!r.evaluate(gen, Policy::competes)) break;
    const double best_before = r.best.score;
    for (std::size_t j = 0; j < gen.masks.size(); ++j) {
      if (!gen.scores[j]) continue;
      r.record(gen.states[j], *gen.scores[j]);
      const double v = policy.value(r, gen.states[j], *gen.scores[j]);
      if (!gen.pick || v > gen.pick_value) {
        gen.pick = j;
        gen.pick_value = v;
      }
    }
    gen.new_best = r.best.score > best_before;
    if (!policy.accept(r, gen)) break;
  }
  policy.end(r);
  return r.finish();
}

}  // namespace bosch::search::detail
