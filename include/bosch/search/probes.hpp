// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file probes.hpp
/// Stage 1 of BOSCH: top-down cascaded layer probes (docs/algorithm.md §Stage 1).
///
/// For layer l = L-1 down to 0, a small-budget sub-problem picks which
/// k = probe_count() KV heads of layer l become SWA (ceil(rho * Hkv), but
/// never the whole layer when Hkv > 1), with the layers above
/// already localized at their best probe masks and the layers below still
/// full. The best mask is committed (the cascade) and its score s_best[l]
/// recorded. Each probe mask differs from the incumbent only in layer l, so a
/// hinted evaluator is told first_changed_layer = l. Drops follow
/// Options::drop_mode: marginal (score before probing l minus s_best[l]) or
/// cumulative (S_full - s_best[l]).
///
/// Per-head values: for each head, the mean probe score of the masks in which
/// it was SWA (NaN when never tried); Stage 3 uses them to resize layers.
///
/// Completion probes: when ceil(rho * Hkv) = Hkv the probe width is capped at
/// Hkv - 1 (see probe_count), so the cascade has fewer SWA heads than the
/// target and Stage 2 must decide which layers lose their last full head.
/// Each layer is then made entirely SWA on top of the final cascade, one at a
/// time (L more evaluations), and the score lost is that layer's completion
/// drop (ProbeResult::completion_drops).
///
/// Screened probes (Options::probe_samples) are scored on a few samples; with
/// Options::confirm_probes the probe each layer commits and the completion
/// probes are then scored on every sample, so that the drops come from all
/// of them.

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
  stream_refine = 7,
};

/// The SWA heads per layer of a Stage 1 probe: Options::probe_heads when set
/// (at most Hkv), else ceil(rho * Hkv) but at most Hkv - 1 when Hkv > 1, so
/// that a probe always chooses among a layer's heads (a whole-layer probe
/// says nothing about which heads matter). A 1e-9 guard keeps products such
/// as 0.3 * 10 from rounding up.
inline int probe_count(const HeadLayout& layout, const Options& o) {
  const int h = layout.num_kv_heads;
  if (o.probe_heads > 0) return std::min(o.probe_heads, h);
  const int k = std::clamp(static_cast<int>(std::ceil(o.target_ratio * h - 1e-9)), 0, h);
  return h > 1 ? std::min(k, h - 1) : k;
}

/// Stage 1's output.
struct ProbeResult {
  std::vector<double> scores;                    ///< s_best per layer (NaN when not probed)
  std::vector<double> drops;                     ///< per layer (NaN when not probed)
  HeadMask cascade;                              ///< the incumbent after the probes
  std::vector<std::vector<double>> head_values;  ///< [layer][kv] (NaN when unknown)
  /// Completion drops (only when the probe width was capped at Hkv - 1 below
  /// ceil(rho * Hkv)): per layer, the score of the final cascade minus its
  /// score with that layer entirely SWA, i.e. what the layer's last full head
  /// is worth. Empty otherwise.
  std::vector<double> completion_drops;
  int heads_per_layer = 0;                       ///< probe_count(layout, options)
  bool complete = false;                         ///< every layer probed
};

/// True when the automatic probe width was capped (ceil(rho * Hkv) = Hkv > 1
/// became Hkv - 1) in the full variant, whose Stage 2 then needs the
/// completion probes (the ablations use uniform counts).
inline bool probes_capped(const HeadLayout& layout, const Options& o) {
  const int h = layout.num_kv_heads;
  return o.variant == Variant::full && o.probe_heads == 0 && h > 1 &&
         static_cast<int>(std::ceil(o.target_ratio * h - 1e-9)) >= h;
}

/// Evaluations Stage 1 plans: L * min(probe_budget, C(Hkv, k)) when
/// exhaustive probes are allowed, else L * probe_budget; plus L completion
/// probes when the width was capped, and L confirmations of the chosen
/// probes (Options::confirm_probes with screening).
inline std::size_t planned_probe_evaluations(const HeadLayout& layout, const Options& o) {
  const double space = binomial(layout.num_kv_heads, probe_count(layout, o));
  double per = static_cast<double>(o.probe_budget);
  if (space <= 1.0 || (o.exhaustive_when_fits && space <= per)) per = space;
  const std::size_t L = static_cast<std::size_t>(layout.num_layers);
  const bool confirm = o.confirm_probes && o.probe_samples > 0;
  return L * static_cast<std::size_t>(per) + (probes_capped(layout, o) ? L : 0) + (confirm ? L : 0);
}

/// f() with the objective's screening off (Options::confirm_probes): masks
/// it asks for are scored on every sample, a screened one completed from the
/// samples it has.
template <class O, class F>
auto confirmed(O& obj, const Options& o, F&& f) {
  obj.set_screening(0);
  auto out = f();
  obj.set_screening(o.probe_samples);
  return out;
}

/// Runs Stage 1 (see the file comment). `s_full` is the all-full score.
template <class O>
ProbeResult run_probes(O& obj, const Options& o, double s_full) {
  const HeadLayout lay = obj.layout();
  const int L = lay.num_layers, H = lay.num_kv_heads;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ProbeResult pr;
  pr.heads_per_layer = probe_count(lay, o);
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
    if (o.confirm_probes) {
      // The screen chose the layer's probe; its drop comes from every sample.
      const auto full = confirmed(obj, o, [&] { return obj.evaluate(r.best, &pr.cascade); });
      if (!full) return pr;
      r.score = *full;
    }
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
  if (probes_capped(lay, o)) {
    // Completion probes: the cascade with one layer at a time entirely SWA,
    // lowest layer first (a transformer evaluator then reuses the cascade's
    // residual streams of the layers below), as one batch.
    std::vector<HeadMask> masks;
    for (int l = 0; l < L; ++l) {
      HeadMask m = pr.cascade;
      for (int k = 0; k < H; ++k) m.set(l, k, true);
      masks.push_back(std::move(m));
    }
    const auto scores = o.confirm_probes
                            ? confirmed(obj, o, [&] { return obj.evaluate_many(masks, &pr.cascade); })
                            : obj.evaluate_many(masks, &pr.cascade);
    pr.completion_drops.assign(static_cast<std::size_t>(L), nan);
    for (int l = 0; l < L; ++l) {
      if (!scores[static_cast<std::size_t>(l)]) return pr;
      pr.completion_drops[static_cast<std::size_t>(l)] = prev - *scores[static_cast<std::size_t>(l)];
    }
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

/// Sets `mask` to exactly `count` SWA heads overall: when it has too many,
/// the SWA heads with the lowest `values` ([layer][kv], as in resize_layer;
/// NaN = the mean of the known values) become full; when too few, the full
/// heads with the highest values become SWA; ties by lower flat index.
inline void resize_global(HeadMask& mask, std::size_t count,
                          const std::vector<std::vector<double>>& values) {
  const int H = mask.layout().num_kv_heads;
  double mean = 0.0;
  int known = 0;
  for (const auto& row : values)
    for (double v : row)
      if (std::isfinite(v)) {
        mean += v;
        ++known;
      }
  mean = known > 0 ? mean / known : 0.0;
  auto value = [&](std::size_t i) {
    const std::size_t l = i / static_cast<std::size_t>(H), k = i % static_cast<std::size_t>(H);
    const double v = l < values.size() && k < values[l].size()
                         ? values[l][k]
                         : std::numeric_limits<double>::quiet_NaN();
    return std::isfinite(v) ? v : mean;
  };
  std::vector<std::size_t> on, off;
  for (std::size_t i = 0; i < mask.size(); ++i) (mask[i] ? on : off).push_back(i);
  if (on.size() > count) {
    std::stable_sort(on.begin(), on.end(), [&](std::size_t a, std::size_t b) { return value(a) < value(b); });
    for (std::size_t i = 0; i < on.size() - count; ++i) mask.set_flat(on[i], false);
  } else if (on.size() < count) {
    std::stable_sort(off.begin(), off.end(), [&](std::size_t a, std::size_t b) { return value(a) > value(b); });
    for (std::size_t i = 0; i < count - on.size(); ++i) mask.set_flat(off[i], true);
  }
}

}  // namespace bosch::search
