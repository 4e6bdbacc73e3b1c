// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file layer.hpp
/// Model-free layer-level baselines (docs/baselines.md §Layer heuristics): whole layers
/// become SWA. Each rule picks the SWA layers; the count of SWA layers is
///
/// - LayerCount::exact (default): ceil(T / Hkv) layers for T =
///   target_count(layout, rho): floor(T / Hkv) whole SWA layers plus, when
///   T mod Hkv = r > 0, one partial layer whose KV heads 0 .. r-1 are SWA, so
///   the mask has exactly T SWA heads like every bosch::select result;
/// - LayerCount::whole_layers: round(rho * L) whole layers (halves up), the
///   paper's layer-level setting; the head count may then differ from T.
///
/// Rules:
/// - RAND: the SWA layers are the first ones of a seeded random permutation
///   (Boost mt19937_64 seeded with derive_seed(seed, {7})); the partial layer
///   is the last one taken.
/// - BME (begin-middle-end, Hymba-style): the g = L - (SWA layers) full layers
///   are taken round-robin from three anchors: the beginning (0, 1, 2, ...),
///   the middle (c = (L-1)/2, then c-1, c+1, c-2, c+2, ...) and the end (L-1, L-2,
///   ...), skipping layers already taken; every other layer is SWA. The
///   partial layer is the SWA layer the round-robin would take next.
/// - INTR (interleaved): the g full layers are spread evenly: layer i is full
///   iff floor((i+1) g / L) > floor(i g / L). When L = g p this is "full at
///   (i+1) mod p == 0" (one global layer every p, Gemma/Mistral-style 1:(p-1)
///   patterns). The partial layer is the highest-index SWA layer.

#include <bosch/error.hpp>
#include <bosch/mask.hpp>
#include <bosch/search/rng.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace bosch::baselines {

/// How many layers a layer-level baseline makes SWA (see the file comment).
enum class LayerCount { exact, whole_layers };

namespace detail {

/// SWA layers (whole) plus the partial layer's SWA head count.
struct layer_plan {
  int swa_layers = 0;  ///< layers touched by SWA
  int partial = 0;     ///< SWA heads of the partial layer (0 = none)
};

inline layer_plan plan(const HeadLayout& layout, double rho, LayerCount mode) {
  check_layout(layout);
  const std::size_t t = target_count(layout, rho);  // validates rho
  const int H = layout.num_kv_heads;
  layer_plan p;
  if (mode == LayerCount::exact) {
    p.swa_layers =
        static_cast<int>((t + static_cast<std::size_t>(H) - 1) / static_cast<std::size_t>(H));
    p.partial = static_cast<int>(t % static_cast<std::size_t>(H));
  } else {
    p.swa_layers = static_cast<int>(std::floor(rho * layout.num_layers + 0.5));
  }
  return p;
}

/// The mask with `swa` (ordered; the last is the partial one) as SWA layers.
inline HeadMask assemble(const HeadLayout& layout, const std::vector<int>& swa, int partial) {
  HeadMask m(layout);
  for (std::size_t i = 0; i < swa.size(); ++i) {
    const bool is_partial = partial > 0 && i + 1 == swa.size();
    for (int k = 0; k < layout.num_kv_heads; ++k) m.set(swa[i], k, !is_partial || k < partial);
  }
  return m;
}

}  // namespace detail

/// RAND: random SWA layers (see the file comment). Same seed, same mask.
inline HeadMask layer_rand(const HeadLayout& layout, double rho, std::uint64_t seed,
                           LayerCount mode = LayerCount::exact) {
  const auto p = detail::plan(layout, rho, mode);
  std::vector<int> order(static_cast<std::size_t>(layout.num_layers));
  for (int l = 0; l < layout.num_layers; ++l) order[static_cast<std::size_t>(l)] = l;
  search::engine g = search::make_engine(seed, {7});
  search::shuffle(order, g);
  order.resize(static_cast<std::size_t>(p.swa_layers));
  return detail::assemble(layout, order, p.partial);
}

/// The BME priority of layers to keep full: round-robin begin, middle, end.
inline std::vector<int> bme_full_order(int num_layers) {
  std::vector<int> order;
  std::vector<char> taken(static_cast<std::size_t>(num_layers), 0);
  int b = 0, e = num_layers - 1, step = 0;
  const int c = (num_layers - 1) / 2;
  auto take = [&](int l) {
    if (l >= 0 && l < num_layers && !taken[static_cast<std::size_t>(l)]) {
      taken[static_cast<std::size_t>(l)] = 1;
      order.push_back(l);
      return true;
    }
    return false;
  };
  auto next_middle = [&]() {
    while (step <= 2 * num_layers) {
      const int off = (step + 1) / 2;
      const int l = step % 2 == 0 ? c + off : c - off;  // c, c-1, c+1, c-2, c+2, ...
      ++step;
      if (take(l)) return;
    }
  };
  while (static_cast<int>(order.size()) < num_layers) {
    while (b < num_layers && !take(b)) ++b;
    if (static_cast<int>(order.size()) >= num_layers) break;
    next_middle();
    if (static_cast<int>(order.size()) >= num_layers) break;
    while (e >= 0 && !take(e)) --e;
  }
  return order;
}

/// BME: full layers at the beginning, middle and end (see the file comment).
inline HeadMask layer_bme(const HeadLayout& layout, double rho,
                          LayerCount mode = LayerCount::exact) {
  const auto p = detail::plan(layout, rho, mode);
  const auto full = bme_full_order(layout.num_layers);
  // SWA layers: the ones the round-robin takes last; the partial one is the
  // SWA layer it would take next (the first of them in round-robin order).
  std::vector<int> swa(full.end() - p.swa_layers, full.end());
  std::reverse(swa.begin(), swa.end());
  return detail::assemble(layout, swa, p.partial);
}

/// INTR: full layers spread evenly (see the file comment).
inline HeadMask layer_intr(const HeadLayout& layout, double rho,
                           LayerCount mode = LayerCount::exact) {
  const auto p = detail::plan(layout, rho, mode);
  const long L = layout.num_layers, g = L - p.swa_layers;
  std::vector<int> swa;
  for (long i = 0; i < L; ++i)
    if (!((i + 1) * g / L > i * g / L)) swa.push_back(static_cast<int>(i));
  return detail::assemble(layout, swa, p.partial);  // partial = highest-index SWA layer
}

}  // namespace bosch::baselines
