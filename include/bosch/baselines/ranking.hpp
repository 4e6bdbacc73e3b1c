// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file ranking.hpp
/// Static head rankings to masks (docs/baselines.md §Rankings to masks): every static
/// baseline (DCAM, APL, PROXY, QADA, RAZOR, FISHER, DuoAttention gates, ...)
/// reduces to one scalar per KV head, higher = more global; the lowest-scored
/// heads become SWA.

#include <bosch/error.hpp>
#include <bosch/mask.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace bosch::baselines {

/// Where the SWA quota applies.
enum class Quota {
  global,     ///< the T lowest-scored heads of the whole model
  per_layer,  ///< floor(T/L) per layer, one more in the (T mod L) layers with the
              ///< lowest mean score; the lowest-scored heads within each layer
};

/// Mask with exactly T = target_count(layout, rho) SWA heads from per-KV-head
/// scores (layer-major, size L * Hkv, higher = more global).
///
/// Deterministic tie-breaking: equal scores are ordered by flat index
/// (layer * Hkv + kv), the lower index becoming SWA first; equal layer means
/// (per_layer quota) by lower layer index first.
///
/// @throws bosch::invalid_argument for a wrong number of scores, a non-finite
///         score, an invalid layout or rho outside (0, 1).
inline HeadMask mask_from_scores(const HeadLayout& layout, std::span<const double> scores,
                                 double rho, Quota quota = Quota::global) {
  check_layout(layout);
  const std::size_t t = target_count(layout, rho);
  if (scores.size() != layout.size())
    throw invalid_argument("expected " + std::to_string(layout.size()) + " scores (L x Hkv), got " +
                               std::to_string(scores.size()),
                           "mask_from_scores");
  for (std::size_t i = 0; i < scores.size(); ++i)
    if (!std::isfinite(scores[i]))
      throw invalid_argument("score " + std::to_string(i) + " is not finite", "mask_from_scores");
  HeadMask m(layout);
  auto lower = [&](std::size_t a, std::size_t b) {
    return scores[a] != scores[b] ? scores[a] < scores[b] : a < b;
  };
  if (quota == Quota::global) {
    std::vector<std::size_t> idx(scores.size());
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    std::sort(idx.begin(), idx.end(), lower);
    for (std::size_t i = 0; i < t; ++i) m.set_flat(idx[i], true);
    return m;
  }
  const std::size_t L = static_cast<std::size_t>(layout.num_layers);
  const std::size_t H = static_cast<std::size_t>(layout.num_kv_heads);
  std::vector<double> mean(L, 0.0);
  for (std::size_t l = 0; l < L; ++l) {
    for (std::size_t k = 0; k < H; ++k) mean[l] += scores[l * H + k];
    mean[l] /= static_cast<double>(H);
  }
  std::vector<std::size_t> layers(L);
  std::iota(layers.begin(), layers.end(), std::size_t{0});
  std::stable_sort(layers.begin(), layers.end(),
                   [&](std::size_t a, std::size_t b) { return mean[a] < mean[b]; });
  std::vector<std::size_t> count(L, t / L);
  for (std::size_t i = 0; i < t % L; ++i) ++count[layers[i]];
  for (std::size_t l = 0; l < L; ++l) {
    std::vector<std::size_t> idx(H);
    for (std::size_t k = 0; k < H; ++k) idx[k] = l * H + k;
    std::sort(idx.begin(), idx.end(), lower);
    for (std::size_t i = 0; i < count[l]; ++i) m.set_flat(idx[i], true);
  }
  return m;
}

}  // namespace bosch::baselines
