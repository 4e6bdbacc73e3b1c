// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file subproblem.hpp
/// A sub-problem of the Large Neighborhood Search: a few "units" of the mask
/// are freed (destroy), everything else stays at the incumbent, and an inner
/// solver re-optimizes the units (repair) under exact per-group counts.
///
/// A unit is a set of mask bits switched together: one KV head (head
/// granularity) or all KV heads of a layer (the layer variant). Units are
/// partitioned into groups; a feasible point has exactly `count` units of each
/// group switched to SWA (a group is usually one layer).

#include <bosch/error.hpp>
#include <bosch/mask.hpp>
#include <bosch/search/rng.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace bosch::search {

/// Units of one group and how many of them must be SWA.
struct Group {
  std::vector<int> units;  ///< indices into SubProblem::units
  int count = 0;           ///< required number of SWA units, 0 <= count <= units.size()
};

/// One sub-problem handed to an inner solver.
struct SubProblem {
  /// Feasible start point (every unit all-0 or all-1, every group at its
  /// count); bits outside the units are fixed at their values here.
  HeadMask start;
  /// A mask the evaluator has probably scored that `start` derives from (used
  /// for evaluation hints until `start` itself is scored); may be nullptr.
  const HeadMask* reference = nullptr;
  /// Flat mask indices of each unit.
  std::vector<std::vector<std::size_t>> units;
  /// Partition of all units into groups.
  std::vector<Group> groups;
  /// Most new evaluations the solver may spend.
  std::size_t budget = 0;
  /// Seed of the solver's random stream (derive_seed of the master seed).
  std::uint64_t stream = 0;
};

/// What an inner solver returns.
struct SubResult {
  /// Best feasible mask found (the start when nothing better was found).
  HeadMask best;
  /// Its score; NaN when not evaluated (budget spent or stop requested
  /// before the start could be scored).
  double score = std::numeric_limits<double>::quiet_NaN();
  bool evaluated = false;
  /// New evaluations spent (log entries added).
  std::size_t evaluations = 0;
  /// Every (unit state, score) pair the solver obtained, in request order
  /// (memo hits included); used by Stage 1 to estimate per-head values.
  std::vector<std::pair<std::vector<std::uint8_t>, double>> history;
};

/// Unit states of `m` (1 when the unit's first bit is set).
inline std::vector<std::uint8_t> unit_state(const SubProblem& p, const HeadMask& m) {
  std::vector<std::uint8_t> s(p.units.size());
  for (std::size_t u = 0; u < p.units.size(); ++u) s[u] = m[p.units[u].front()] ? 1 : 0;
  return s;
}

/// `p.start` with the units set to `state`.
inline HeadMask apply_state(const SubProblem& p, const std::vector<std::uint8_t>& state) {
  HeadMask m = p.start;
  for (std::size_t u = 0; u < p.units.size(); ++u)
    for (std::size_t bit : p.units[u]) m.set_flat(bit, state[u] != 0);
  return m;
}

/// SWA units per group for `state`.
inline std::vector<int> group_counts(const SubProblem& p, const std::vector<std::uint8_t>& state) {
  std::vector<int> c(p.groups.size(), 0);
  for (std::size_t g = 0; g < p.groups.size(); ++g)
    for (int u : p.groups[g].units) c[g] += state[static_cast<std::size_t>(u)];
  return c;
}

/// True when every group of `state` has its required count.
inline bool feasible(const SubProblem& p, const std::vector<std::uint8_t>& state) {
  const auto c = group_counts(p, state);
  for (std::size_t g = 0; g < p.groups.size(); ++g)
    if (c[g] != p.groups[g].count) return false;
  return true;
}

/// Binomial coefficient as a double (exact up to 2^53).
inline double binomial(int n, int k) {
  if (k < 0 || k > n) return 0.0;
  k = std::min(k, n - k);
  double r = 1.0;
  for (int i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return std::round(r);
}

/// Size of the feasible set: product over groups of C(n_g, k_g) (may be inf).
inline double feasible_space(const SubProblem& p) {
  double s = 1.0;
  for (const auto& g : p.groups) s *= binomial(static_cast<int>(g.units.size()), g.count);
  return s;
}

/// Throws bosch::invalid_argument unless `p` is well formed: groups partition
/// the units, counts are in range, units are in range and consistent in
/// `start`, and `start` is feasible.
inline void check_subproblem(const SubProblem& p) {
  std::vector<int> seen(p.units.size(), 0);
  for (const auto& g : p.groups) {
    if (g.count < 0 || g.count > static_cast<int>(g.units.size()))
      throw invalid_argument("group count " + std::to_string(g.count) + " outside [0, " +
                                 std::to_string(g.units.size()) + "]",
                             "sub-problem");
    for (int u : g.units) {
      if (u < 0 || static_cast<std::size_t>(u) >= p.units.size())
        throw invalid_argument("unit index out of range", "sub-problem");
      ++seen[static_cast<std::size_t>(u)];
    }
  }
  for (std::size_t u = 0; u < p.units.size(); ++u) {
    if (seen[u] != 1) throw invalid_argument("groups must partition the units", "sub-problem");
    if (p.units[u].empty()) throw invalid_argument("empty unit", "sub-problem");
    for (std::size_t bit : p.units[u]) {
      if (bit >= p.start.size()) throw invalid_argument("unit bit out of range", "sub-problem");
      if (p.start[bit] != p.start[p.units[u].front()])
        throw invalid_argument("unit bits differ in the start mask", "sub-problem");
    }
  }
  if (!feasible(p, unit_state(p, p.start)))
    throw invalid_argument("start mask does not meet the group counts", "sub-problem");
}

/// A uniformly random feasible state (each group: a random count-subset).
inline std::vector<std::uint8_t> random_state(const SubProblem& p, engine& g) {
  std::vector<std::uint8_t> s(p.units.size(), 0);
  for (const auto& grp : p.groups) {
    std::vector<int> u = grp.units;
    shuffle(u, g);
    for (int i = 0; i < grp.count; ++i)
      s[static_cast<std::size_t>(u[static_cast<std::size_t>(i)])] = 1;
  }
  return s;
}

/// A sub-problem of one group: `units` (each a list of flat mask bits
/// switched together), exactly `count` of which must be SWA, with at most
/// `budget` new evaluations and the random stream `stream`. It starts from
/// `start`, or, with `random_start`, from `start` with the units set to a
/// uniformly random feasible state drawn from `stream` (random_state).
/// `reference` as SubProblem::reference.
inline SubProblem single_group(HeadMask start, std::vector<std::vector<std::size_t>> units, int count,
                               std::size_t budget, std::uint64_t stream, bool random_start,
                               const HeadMask* reference) {
  SubProblem p;
  p.start = std::move(start);
  p.budget = budget;
  p.stream = stream;
  Group g;
  g.count = count;
  for (std::size_t u = 0; u < units.size(); ++u) g.units.push_back(static_cast<int>(u));
  p.units = std::move(units);
  p.groups.push_back(std::move(g));
  if (random_start) {
    engine rng(p.stream);
    p.start = apply_state(p, random_state(p, rng));
  }
  p.reference = reference;
  return p;
}

}  // namespace bosch::search
