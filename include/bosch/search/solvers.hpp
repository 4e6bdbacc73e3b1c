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
/// - surrogate: the swap moves, chosen by a surrogate model of the objective
///   fitted to the evaluation log (solver_surrogate.hpp).
///
/// Swap, surrogate and penalized run one generation loop (solver_loop.hpp)
/// and differ by the policy they give it: how a generation is proposed, what
/// happens when no new proposal is found, what the pick maximizes, and how the
/// parent moves and restarts. All proposals of a generation are generated
/// before any is evaluated and are evaluated together (Objective::compete for
/// swap and surrogate, whose proposals may be raced against the parent;
/// Objective::evaluate_many for penalized), so batching never changes the
/// result.
#include <bosch/options.hpp>
#include <bosch/search/solver_exhaustive.hpp>
#include <bosch/search/solver_penalized.hpp>
#include <bosch/search/solver_surrogate.hpp>
#include <bosch/search/solver_swap.hpp>
#include <bosch/search/subproblem.hpp>

namespace bosch::search {

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
  if (o.inner_solver == InnerSolver::surrogate) return solve_surrogate(obj, p, o);
  return solve_swap(obj, p, o);
}

}  // namespace bosch::search
