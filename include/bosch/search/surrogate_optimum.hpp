// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file search/surrogate_optimum.hpp
/// The surrogate's own optimum under a sub-problem's exact counts
/// (docs/algorithm.md §Inner solvers, "the model's optimum"): the feasible
/// point the fitted model (search/surrogate.hpp) predicts best, found on its
/// mean written as a quadratic function of the SWA bits (QuadraticMean):
///
/// 1. a sort for the linear part: in every group, the `count` units with the
///    largest linear weight (summed over the unit's bits; ties by unit order);
/// 2. a local search for the pairwise part: the count-preserving swap (one SWA
///    and one full unit of a group exchange states) with the largest exact
///    gain of the quadratic (pairs inside the sub-problem and with the fixed
///    bits included) is made while it gains, at most `max_moves` times.
///
/// For a separable (linear) model step 1 is already the exact optimum; the
/// swaps only matter when pairwise terms do. Plain loops in a fixed order: the
/// same model gives the same point on every platform.

#include <bosch/search/subproblem.hpp>
#include <bosch/search/surrogate.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace bosch::search {

/// The feasible unit state of `p` with the highest value of `q` that the sort
/// and the swaps above find (see the file comment).
inline std::vector<std::uint8_t> surrogate_optimum(const QuadraticMean& q, const SubProblem& p,
                                                   std::size_t max_moves) {
  const std::size_t nu = p.units.size();
  std::vector<std::uint8_t> state(nu, 0);
  // 1. The sort.
  std::vector<double> unit_linear(nu, 0.0);
  for (std::size_t u = 0; u < nu; ++u)
    for (std::size_t b : p.units[u]) unit_linear[u] += q.linear[b];
  for (const auto& g : p.groups) {
    std::vector<int> order = g.units;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return unit_linear[static_cast<std::size_t>(a)] > unit_linear[static_cast<std::size_t>(b)];
    });
    for (int i = 0; i < g.count; ++i) state[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = 1;
  }
  if (max_moves == 0) return state;

  // 2. The swaps, on the gains g_i = linear_i + sum_j pair(i, j) z_j: flipping
  // the bits S (delta_i = +1 on, -1 off) changes the value by
  // sum_{i in S} delta_i g_i + sum_{i<j in S} pair(i, j) delta_i delta_j.
  const std::size_t H = static_cast<std::size_t>(q.layout.num_kv_heads);
  const std::size_t n = q.linear.size();
  const HeadMask start = apply_state(p, state);
  std::vector<double> z(n), gain(q.linear);
  for (std::size_t i = 0; i < n; ++i) z[i] = start[i] ? 1.0 : 0.0;
  auto for_neighbours = [&](std::size_t i, auto&& f) {
    const std::size_t l = i / H;
    const std::size_t lo = l > 0 ? (l - 1) * H : 0, hi = std::min(n, (l + 2) * H);
    for (std::size_t j = lo; j < hi; ++j)
      if (j != i) f(j);
  };
  for (std::size_t i = 0; i < n; ++i)
    for_neighbours(i, [&](std::size_t j) { gain[i] += q.pair(i, j) * z[j]; });
  double scale = 0;
  for (double w : q.linear) scale = std::max(scale, std::abs(w));
  const double tol = 1e-12 * std::max(1.0, scale);
  auto delta = [&](int a, int b) {  // unit a off, unit b on
    const auto& off = p.units[static_cast<std::size_t>(a)];
    const auto& on = p.units[static_cast<std::size_t>(b)];
    double d = 0;
    for (std::size_t i : off) d -= gain[i];
    for (std::size_t i : on) d += gain[i];
    for (std::size_t x = 0; x < off.size(); ++x)
      for (std::size_t y = x + 1; y < off.size(); ++y) d += q.pair(off[x], off[y]);
    for (std::size_t x = 0; x < on.size(); ++x)
      for (std::size_t y = x + 1; y < on.size(); ++y) d += q.pair(on[x], on[y]);
    for (std::size_t i : off)
      for (std::size_t j : on) d -= q.pair(i, j);
    return d;
  };
  auto flip = [&](std::size_t i, double to) {
    const double dz = to - z[i];
    z[i] = to;
    for_neighbours(i, [&](std::size_t j) { gain[j] += q.pair(i, j) * dz; });
  };
  for (std::size_t move = 0; move < max_moves; ++move) {
    double best = tol;
    int best_a = -1, best_b = -1;
    for (const auto& g : p.groups)
      for (int a : g.units) {
        if (!state[static_cast<std::size_t>(a)]) continue;
        for (int b : g.units) {
          if (state[static_cast<std::size_t>(b)]) continue;
          const double d = delta(a, b);
          if (d > best) {
            best = d;
            best_a = a;
            best_b = b;
          }
        }
      }
    if (best_a < 0) break;
    state[static_cast<std::size_t>(best_a)] = 0;
    state[static_cast<std::size_t>(best_b)] = 1;
    for (std::size_t i : p.units[static_cast<std::size_t>(best_a)]) flip(i, 0.0);
    for (std::size_t i : p.units[static_cast<std::size_t>(best_b)]) flip(i, 1.0);
  }
  return state;
}

}  // namespace bosch::search
