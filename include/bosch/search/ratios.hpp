// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file ratios.hpp
/// Stage 2 of BOSCH: adaptive per-layer SWA ratios from the Stage 1 drops
/// (docs/algorithm.md §Stage 2). Pure functions, no evaluations.
///
/// 1. Weights: w_l = max(drop_l, 0), min-max normalized to [0, 1] (0 = easiest;
///    all 0 when the drops are equal; NaN drops, of unprobed layers, count as
///    the hardest) [I].
/// 2. Levels: per-layer SWA counts allowed (Options::ratio_levels, or the
///    automatic set: counts within Options::level_spread of rho*Hkv, extended
///    down to Hkv - 2 so that a hard layer can keep two full heads at high
///    ratios even when Hkv is small, e.g. {1, 2, 3} at rho = 0.75, Hkv = 3).
/// 3. Initial assignment (Options::ratio_init): relative (default), linear,
///    quantile or uniform (see bosch::RatioInit).
/// 4. Shifting: while the total differs from target_count(layout, rho), the
///    hardest layer that can still go down moves to the next lower level (total
///    too high), or the easiest layer that can still go up moves to the next
///    higher level (total too low). Layer order: weight, then layer index.
///    These moves keep the assignment monotone (an easier layer never has fewer
///    SWA heads than a harder one) when the initial assignment is. When a level
///    gap would overshoot, the moving layer takes the exact count needed
///    instead (only possible with explicit, non-contiguous levels).
///
/// The total is always exactly the target count.

#include <bosch/error.hpp>
#include <bosch/mask.hpp>
#include <bosch/options.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace bosch::search {

/// The level spread in heads: Options::level_spread, or when it is 0 (automatic)
/// max(1, round(Hkv / 4)).
inline int level_spread(const HeadLayout& layout, const Options& o) {
  if (o.level_spread > 0) return o.level_spread;
  return std::max(1, static_cast<int>(std::lround(layout.num_kv_heads / 4.0)));
}

/// Allowed per-layer SWA counts for `o`, ascending and distinct.
inline std::vector<int> count_levels(const HeadLayout& layout, double rho, const Options& o) {
  const int h = layout.num_kv_heads;
  std::vector<int> levels;
  if (!o.ratio_levels.empty()) {
    for (double r : o.ratio_levels)
      levels.push_back(std::clamp(static_cast<int>(std::ceil(r * h - 1e-9)), 0, h));
  } else {
    const double center = rho * h;
    const int spread = level_spread(layout, o);
    // A hard layer may keep at least two full heads when the centre allows
    // it (Hkv - 2 heads SWA), however small Hkv is.
    const int floor_two_full = std::max(0, h - 2);
    for (int c = 0; c <= h; ++c)
      if (std::abs(c - center) <= spread + 1e-9 ||
          (c >= floor_two_full && c < center && o.ratio_levels.empty()))
        levels.push_back(c);
  }
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  return levels;
}

/// Weights in [0, 1] from drops (see the file comment).
inline std::vector<double> layer_weights(std::span<const double> drops) {
  std::vector<double> w(drops.size(), 0.0);
  double lo = 0.0, hi = 0.0;
  bool any = false;
  for (double d : drops)
    if (std::isfinite(d)) {
      const double c = std::max(d, 0.0);
      lo = any ? std::min(lo, c) : c;
      hi = any ? std::max(hi, c) : c;
      any = true;
    }
  for (std::size_t i = 0; i < drops.size(); ++i) {
    if (!std::isfinite(drops[i]))
      w[i] = 1.0;
    else
      w[i] = hi > lo ? (std::max(drops[i], 0.0) - lo) / (hi - lo) : 0.0;
  }
  return w;
}

/// Layers sorted easiest first: by weight, then layer index.
inline std::vector<int> easiest_first(std::span<const double> weights) {
  std::vector<int> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return weights[static_cast<std::size_t>(a)] < weights[static_cast<std::size_t>(b)];
  });
  return order;
}

/// Stage 2's output.
struct RatioPlan {
  std::vector<int> counts;      ///< SWA heads per layer; sums to the target count
  std::vector<double> weights;  ///< per layer, in [0, 1]
  std::vector<int> levels;      ///< the allowed counts used
};

/// Assigns per-layer counts (see the file comment). Throws
/// bosch::invalid_argument (where = "ratio_levels") when the levels cannot
/// reach the target (every level too low or too high).
inline RatioPlan assign_ratios(const HeadLayout& layout, std::span<const double> drops,
                               std::size_t target, const Options& o) {
  const int L = layout.num_layers;
  if (drops.size() != static_cast<std::size_t>(L))
    throw invalid_argument("one drop per layer expected", "assign_ratios");
  RatioPlan plan;
  plan.levels = count_levels(layout, o.target_ratio, o);
  plan.weights = layer_weights(drops);
  const auto& lv = plan.levels;
  const long lo = static_cast<long>(lv.front()) * L, hi = static_cast<long>(lv.back()) * L;
  if (static_cast<long>(target) < lo || static_cast<long>(target) > hi)
    throw invalid_argument("per-layer levels [" + std::to_string(lv.front()) + ", " +
                               std::to_string(lv.back()) + "] heads cannot reach " +
                               std::to_string(target) + " SWA heads over " + std::to_string(L) +
                               " layers",
                           "ratio_levels");
  const int nlev = static_cast<int>(lv.size());
  const std::vector<int> order = easiest_first(plan.weights);
  std::vector<int> idx(static_cast<std::size_t>(L));  // level index per layer
  auto nearest = [&](double x) {
    int best = 0;
    for (int i = 1; i < nlev; ++i)
      if (std::abs(lv[static_cast<std::size_t>(i)] - x) <
          std::abs(lv[static_cast<std::size_t>(best)] - x))
        best = i;
    return best;
  };
  switch (o.ratio_init) {
    case RatioInit::relative: {
      double mean = 0.0;
      int n = 0;
      for (double d : drops)
        if (std::isfinite(d)) {
          mean += std::max(d, 0.0);
          ++n;
        }
      mean = n > 0 ? mean / n : 0.0;
      const double center = o.target_ratio * layout.num_kv_heads;
      for (int l = 0; l < L; ++l) {
        const double d = drops[static_cast<std::size_t>(l)];
        double rel = 0.0;  // +1 = free layer, -1 = twice the mean drop or more
        if (!std::isfinite(d))
          rel = -1.0;
        else if (mean > 0.0)
          rel = std::clamp(1.0 - std::max(d, 0.0) / mean, -1.0, 1.0);
        idx[static_cast<std::size_t>(l)] = nearest(center + level_spread(layout, o) * rel);
      }
      break;
    }
    case RatioInit::linear:
      for (int l = 0; l < L; ++l)
        idx[static_cast<std::size_t>(l)] = nearest(
            lv.back() - plan.weights[static_cast<std::size_t>(l)] * (lv.back() - lv.front()));
      break;
    case RatioInit::quantile:
      for (int r = 0; r < L; ++r) {
        const int bin = static_cast<int>(static_cast<long>(r) * nlev / L);  // 0 = easiest bin
        idx[static_cast<std::size_t>(order[static_cast<std::size_t>(r)])] = nlev - 1 - bin;
      }
      break;
    case RatioInit::uniform:
      for (int l = 0; l < L; ++l)
        idx[static_cast<std::size_t>(l)] = nearest(o.target_ratio * layout.num_kv_heads);
      break;
  }
  plan.counts.resize(static_cast<std::size_t>(L));
  long sum = 0;
  for (int l = 0; l < L; ++l) {
    plan.counts[static_cast<std::size_t>(l)] =
        lv[static_cast<std::size_t>(idx[static_cast<std::size_t>(l)])];
    sum += plan.counts[static_cast<std::size_t>(l)];
  }
  const long t = static_cast<long>(target);
  while (sum != t) {
    if (sum > t) {
      int pick = -1;  // hardest layer that can go down
      for (int r = L - 1; r >= 0; --r)
        if (idx[static_cast<std::size_t>(order[static_cast<std::size_t>(r)])] > 0) {
          pick = order[static_cast<std::size_t>(r)];
          break;
        }
      auto& i = idx[static_cast<std::size_t>(pick)];
      auto& c = plan.counts[static_cast<std::size_t>(pick)];
      const int next = lv[static_cast<std::size_t>(i - 1)];
      if (sum - (c - next) < t) {
        c -= static_cast<int>(sum - t);
        sum = t;
      } else {
        sum -= c - next;
        c = next;
        --i;
      }
    } else {
      int pick = -1;  // easiest layer that can go up
      for (int r = 0; r < L; ++r)
        if (idx[static_cast<std::size_t>(order[static_cast<std::size_t>(r)])] < nlev - 1) {
          pick = order[static_cast<std::size_t>(r)];
          break;
        }
      auto& i = idx[static_cast<std::size_t>(pick)];
      auto& c = plan.counts[static_cast<std::size_t>(pick)];
      const int next = lv[static_cast<std::size_t>(i + 1)];
      if (sum + (next - c) > t) {
        c += static_cast<int>(t - sum);
        sum = t;
      } else {
        sum += next - c;
        c = next;
        ++i;
      }
    }
  }
  return plan;
}

/// Stage 2 after capped probes (ProbeResult::completion_drops): every layer
/// keeps the probe width `width` (= Hkv - 1), and the (target - L * width)
/// layers whose last full head is worth least (smallest completion drop, NaN
/// = hardest; ties by layer index) become entirely SWA. Weights are the
/// min-max normalized completion drops. Throws bosch::invalid_argument when
/// the target is not between L * width and L * Hkv.
inline RatioPlan assign_completion(const HeadLayout& layout, std::span<const double> completion,
                                   int width, std::size_t target) {
  const int L = layout.num_layers, H = layout.num_kv_heads;
  if (completion.size() != static_cast<std::size_t>(L))
    throw invalid_argument("one completion drop per layer expected", "assign_completion");
  const long base = static_cast<long>(width) * L;
  const long t = static_cast<long>(target);
  if (t < base || t > static_cast<long>(H) * L)
    throw invalid_argument("the target " + std::to_string(target) + " is not between " +
                               std::to_string(base) + " and " + std::to_string(H * L) +
                               " SWA heads",
                           "assign_completion");
  RatioPlan plan;
  plan.weights = layer_weights(completion);
  plan.counts.assign(static_cast<std::size_t>(L), width);
  plan.levels = {width, H};
  const std::vector<int> order = easiest_first(plan.weights);
  const long whole = (t - base) / std::max(1, H - width);
  long rest = (t - base) % std::max(1, H - width);
  for (long r = 0; r < whole; ++r) plan.counts[static_cast<std::size_t>(order[static_cast<std::size_t>(r)])] = H;
  if (rest > 0)
    plan.counts[static_cast<std::size_t>(order[static_cast<std::size_t>(whole)])] += static_cast<int>(rest);
  return plan;
}

/// Counts as uniform as possible summing to `target`: floor(target / L) per
/// layer, plus one for the (target mod L) easiest layers (by `weights`, then
/// layer index). Used by the single and multi variants.
inline std::vector<int> uniform_counts(const HeadLayout& layout, std::size_t target,
                                       std::span<const double> weights) {
  const int L = layout.num_layers;
  const int base = static_cast<int>(target / static_cast<std::size_t>(L));
  const int extra = static_cast<int>(target % static_cast<std::size_t>(L));
  std::vector<int> counts(static_cast<std::size_t>(L), base);
  std::vector<double> w(weights.begin(), weights.end());
  w.resize(static_cast<std::size_t>(L), 0.0);
  const auto order = easiest_first(w);
  for (int r = 0; r < extra; ++r)
    ++counts[static_cast<std::size_t>(order[static_cast<std::size_t>(r)])];
  return counts;
}

/// Buckets of layers with equal counts, easiest (highest count) first; layers
/// within a bucket by index. Buckets whose count leaves no choice (0 or Hkv)
/// are included; Stage 3 skips them.
inline std::vector<std::vector<int>> ratio_buckets(std::span<const int> counts) {
  std::vector<int> distinct(counts.begin(), counts.end());
  std::sort(distinct.begin(), distinct.end(), std::greater<>());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::vector<std::vector<int>> out;
  for (int c : distinct) {
    std::vector<int> b;
    for (std::size_t l = 0; l < counts.size(); ++l)
      if (counts[l] == c) b.push_back(static_cast<int>(l));
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace bosch::search
