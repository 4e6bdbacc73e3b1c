// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file plans.hpp
/// Jackknife plans (Options::plan_candidates, docs/algorithm.md §Jackknife
/// plans): Stage 2's per-layer counts recomputed from Stage 1's per-sample
/// drops with one sample left out at a time.
///
/// Stage 1 screens its probes on the first probe_samples samples of the race
/// order (one per task), and Stage 2 turns the drops those samples give into
/// the per-layer counts. At a high ratio that plan decides where the search
/// lands, and one misleading sample can decide the plan. The jackknife plans
/// are the plans the other samples give; select() races their Stage 3 start
/// masks against the plan's on every sample.

#include <bosch/mask.hpp>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <span>
#include <vector>

namespace bosch::search {

/// Per-sample drops of the layers: `drops[l][k]` is layer l's drop on sample
/// k, for the first n samples every layer has (n = the shortest row).
using SampleDrops = std::vector<std::vector<double>>;

/// Per-sample drops `before - after` of paired per-sample scores over their
/// common prefix (the samples both were scored on, race order).
inline std::vector<double> sample_drops(std::span<const double> before, std::span<const double> after) {
  std::vector<double> d(std::min(before.size(), after.size()));
  for (std::size_t k = 0; k < d.size(); ++k) d[k] = before[k] - after[k];
  return d;
}

/// The plans `plan(drops)` gives with sample j left out of the mean drops,
/// for j = 0, 1, ..., n - 1 (n = the samples every layer has; none when
/// n < 2): the distinct ones that differ from `base`, in order of j, at most
/// `max` of them.
inline std::vector<std::vector<int>> jackknife_plans(
    const SampleDrops& drops, const std::function<std::vector<int>(const std::vector<double>&)>& plan,
    const std::vector<int>& base, std::size_t max) {
  std::size_t n = drops.empty() ? 0 : drops.front().size();
  for (const auto& row : drops) n = std::min(n, row.size());
  std::vector<std::vector<int>> out;
  if (n < 2) return out;
  for (std::size_t j = 0; j < n && out.size() < max; ++j) {
    std::vector<double> mean(drops.size(), 0.0);
    for (std::size_t l = 0; l < drops.size(); ++l) {
      for (std::size_t k = 0; k < n; ++k)
        if (k != j) mean[l] += drops[l][k];
      mean[l] /= static_cast<double>(n - 1);
    }
    std::vector<int> c = plan(mean);
    if (c != base && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(std::move(c));
  }
  return out;
}

}  // namespace bosch::search
