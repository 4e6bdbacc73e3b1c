// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file probes.hpp
/// Stage 1 of BOSCH: top-down cascaded layer probes (docs/algorithm.md §Stage 1).
///
/// For layer l = L-1 down to 0, a small-budget sub-problem picks which
/// k = ceil(rho * Hkv) KV heads of layer l become SWA, with the layers above
/// already localized at their best probe masks and the layers below still
/// full. The best mask is committed (the cascade) and its score s_best[l]
/// recorded. Each probe mask differs from the incumbent only in layer l, so a
/// hinted evaluator is told first_changed_layer = l. Drops follow
/// Options::drop_mode: marginal (score before probing l minus s_best[l]) or
/// cumulative (S_full - s_best[l]).
///
/// Per-head values: for each head, the mean probe score of the masks in which
/// it was SWA (NaN when never tried); Stage 3 uses them to resize layers.

#include <bosch/mask.hpp>
#include <bosch/options.hpp>
#include <bosch/search/rng.hpp>
#include <bosch/search/solvers.hpp>
#include <bosch/search/subproblem.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace bosch::search {

/// Stream identifiers (first element of derive_seed paths).
enum stream_id : std::uint64_t {
  stream_probes = 1,
  stream_groups = 3,
  stream_group_init = 4,
  stream_layers = 5,
  stream_remainder = 6,
};

/// ceil(rho * Hkv), the SWA heads per layer of a Stage 1 probe (a 1e-9 guard
/// keeps products such as 0.3 * 10 from rounding up).
inline int probe_count(const HeadLayout& layout, double rho) {
  return std::clamp(static_cast<int>(std::ceil(rho * layout.num_kv_heads - 1e-9)), 0,
                    layout.num_kv_heads);
}

/// Stage 1's output.
struct ProbeResult {
  std::vector<double> scores;                    ///< s_best per layer (NaN when not probed)
  std::vector<double> drops;                     ///< per layer (NaN when not probed)
  HeadMask cascade;                              ///< the incumbent after the probes
  std::vector<std::vector<double>> head_values;  ///< [layer][kv] (NaN when unknown)
  int heads_per_layer = 0;                       ///< ceil(rho * Hkv)
  bool complete = false;                         ///< every layer probed
};

/// Evaluations Stage 1 plans: L * min(probe_budget, C(Hkv, k)) when
/// exhaustive probes are allowed, else L * probe_budget.
inline std::size_t planned_probe_evaluations(const HeadLayout& layout, const Options& o) {
  const double space = binomial(layout.num_kv_heads, probe_count(layout, o.target_ratio));
  double per = static_cast<double>(o.probe_budget);
  if (space <= 1.0 || (o.exhaustive_when_fits && space <= per)) per = space;
  return static_cast<std::size_t>(layout.num_layers) * static_cast<std::size_t>(per);
}

/// Runs Stage 1 (see the file comment). `s_full` is the all-full score.
template <class O>
ProbeResult run_probes(O& obj, const Options& o, double s_full) {
  const HeadLayout lay = obj.layout();
  const int L = lay.num_layers, H = lay.num_kv_heads;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ProbeResult pr;
  pr.heads_per_layer = probe_count(lay, o.target_ratio);
  pr.scores.assign(static_cast<std::size_t>(L), nan);
  pr.drops.assign(static_cast<std::size_t>(L), nan);
  pr.head_values.assign(static_cast<std::size_t>(L),
                        std::vector<double>(static_cast<std::size_t>(H), nan));
  pr.cascade = HeadMask(lay);
  double prev = s_full;
  for (int l = L - 1; l >= 0; --l) {
    if (obj.stopped() || obj.allow(1) == 0) return pr;
    SubProblem p;
    p.stream = derive_seed(o.seed, {stream_probes, static_cast<std::uint64_t>(l)});
    p.budget = o.probe_budget;
    p.reference = &pr.cascade;
    Group g;
    g.count = pr.heads_per_layer;
    for (int k = 0; k < H; ++k) {
      p.units.push_back({pr.cascade.index(l, k)});
      g.units.push_back(k);
    }
    p.groups.push_back(std::move(g));
    p.start = pr.cascade;
    engine rng(p.stream);
    const auto st = random_state(p, rng);
    p.start = apply_state(p, st);
    SubResult r = solve(obj, p, o);
    if (!r.evaluated) return pr;
    // Per-head values from every probe mask seen.
    for (int k = 0; k < H; ++k) {
      double sum = 0.0;
      int n = 0;
      for (const auto& [s, v] : r.history)
        if (s[static_cast<std::size_t>(k)]) {
          sum += v;
          ++n;
        }
      if (n > 0) pr.head_values[static_cast<std::size_t>(l)][static_cast<std::size_t>(k)] = sum / n;
    }
    pr.cascade = r.best;
    pr.scores[static_cast<std::size_t>(l)] = r.score;
    pr.drops[static_cast<std::size_t>(l)] =
        o.drop_mode == DropMode::marginal ? prev - r.score : s_full - r.score;
    prev = r.score;
  }
  pr.complete = true;
  return pr;
}

/// Sets layer `layer` of `mask` to exactly `count` SWA heads, keeping (when
/// shrinking) or adding (when growing) the heads with the highest `values`
/// (NaN = the mean of the known values, 0 when none), ties by lower KV index.
inline void resize_layer(HeadMask& mask, int layer, int count, const std::vector<double>& values) {
  const int H = mask.layout().num_kv_heads;
  double mean = 0.0;
  int known = 0;
  for (double v : values)
    if (std::isfinite(v)) {
      mean += v;
      ++known;
    }
  mean = known > 0 ? mean / known : 0.0;
  auto value = [&](int k) {
    const double v = static_cast<std::size_t>(k) < values.size()
                         ? values[static_cast<std::size_t>(k)]
                         : std::numeric_limits<double>::quiet_NaN();
    return std::isfinite(v) ? v : mean;
  };
  std::vector<int> on, off;
  for (int k = 0; k < H; ++k) (mask.swa(layer, k) ? on : off).push_back(k);
  auto by_value = [&](int a, int b) { return value(a) != value(b) ? value(a) > value(b) : a < b; };
  if (static_cast<int>(on.size()) > count) {
    std::stable_sort(on.begin(), on.end(), by_value);
    for (std::size_t i = static_cast<std::size_t>(count); i < on.size(); ++i)
      mask.set(layer, on[i], false);
  } else if (static_cast<int>(on.size()) < count) {
    std::stable_sort(off.begin(), off.end(), by_value);
    for (std::size_t i = 0; i < static_cast<std::size_t>(count) - on.size(); ++i)
      mask.set(layer, off[i], true);
  }
}

}  // namespace bosch::search
