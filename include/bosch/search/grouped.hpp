// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file grouped.hpp
/// Stage 3 of BOSCH: grouped head-level selection within ratio buckets
/// (docs/algorithm.md §Stage 3). Buckets (layers with equal assigned count) are
/// processed easiest first; each is split into chunks of consecutive bucket
/// layers with at most Options::max_vars KV heads (at least one layer); each
/// chunk's heads are re-optimized jointly with the per-layer counts fixed
/// (destroy and repair), and the chunk's best is committed to the incumbent
/// before the next chunk. Buckets whose count leaves no choice (0 or Hkv) are
/// not searched. Options::group_rounds passes are made.

#include <bosch/mask.hpp>
#include <bosch/options.hpp>
#include <bosch/search/probes.hpp>
#include <bosch/search/rng.hpp>
#include <bosch/search/solvers.hpp>
#include <bosch/search/subproblem.hpp>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <span>
#include <vector>

namespace bosch::search {

/// Chunks (lists of layers) of a bucket: consecutive runs of at most
/// max(1, max_vars / Hkv) layers.
inline std::vector<std::vector<int>> bucket_chunks(const std::vector<int>& bucket, int num_kv_heads,
                                                   int max_vars) {
  const std::size_t per =
      static_cast<std::size_t>(std::max(1, max_vars / std::max(1, num_kv_heads)));
  std::vector<std::vector<int>> out;
  for (std::size_t i = 0; i < bucket.size(); i += per)
    out.emplace_back(
        bucket.begin() + static_cast<std::ptrdiff_t>(i),
        bucket.begin() + static_cast<std::ptrdiff_t>(std::min(bucket.size(), i + per)));
  return out;
}

/// Evaluations Stage 3 plans for `counts`: rounds * sum over chunks of
/// min(chunk_budget, feasible set size when exhaustive is allowed).
inline std::size_t planned_group_evaluations(const HeadLayout& layout, std::span<const int> counts,
                                             const std::vector<std::vector<int>>& buckets,
                                             const Options& o) {
  double total = 0.0;
  for (const auto& b : buckets) {
    const int c = counts[static_cast<std::size_t>(b.front())];
    if (c <= 0 || c >= layout.num_kv_heads) continue;
    for (const auto& ch : bucket_chunks(b, layout.num_kv_heads, o.max_vars)) {
      double space = 1.0;
      for (std::size_t i = 0; i < ch.size(); ++i) space *= binomial(layout.num_kv_heads, c);
      total += (o.exhaustive_when_fits && space <= static_cast<double>(o.chunk_budget))
                   ? space
                   : static_cast<double>(o.chunk_budget);
    }
  }
  return static_cast<std::size_t>(total) * static_cast<std::size_t>(o.group_rounds);
}

/// Runs Stage 3 on `incumbent` (which must already have `counts[l]` SWA heads
/// in every layer, except with GroupInit::full, where `prepare(mask, layer)`
/// sets a layer to its start just before its bucket is first processed).
/// `reference` is an evaluated mask the incumbent derives from (hints).
/// Returns false when the budget ran out or a stop was requested.
template <class O>
bool run_groups(O& obj, const Options& o, HeadMask& incumbent, const HeadMask* reference,
                std::span<const int> counts, const std::vector<std::vector<int>>& buckets,
                const std::function<void(HeadMask&, int)>& prepare = {}) {
  const HeadLayout lay = obj.layout();
  const int H = lay.num_kv_heads;
  HeadMask ref_copy = reference ? *reference : incumbent;
  const HeadMask* ref = reference ? &ref_copy : nullptr;
  for (int round = 0; round < o.group_rounds; ++round) {
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      const auto& bucket = buckets[b];
      if (round == 0 && prepare)
        for (int l : bucket) prepare(incumbent, l);
      const int c = counts[static_cast<std::size_t>(bucket.front())];
      if (c <= 0 || c >= H) continue;
      const auto chunks = bucket_chunks(bucket, H, o.max_vars);
      for (std::size_t ci = 0; ci < chunks.size(); ++ci) {
        if (obj.stopped() || obj.allow(1) == 0) return false;
        SubProblem p;
        p.start = incumbent;
        p.reference = ref;
        p.budget = o.chunk_budget;
        p.stream =
            derive_seed(o.seed, {stream_groups, static_cast<std::uint64_t>(round),
                                 static_cast<std::uint64_t>(b), static_cast<std::uint64_t>(ci)});
        for (int l : chunks[ci]) {
          Group g;
          g.count = counts[static_cast<std::size_t>(l)];
          for (int k = 0; k < H; ++k) {
            g.units.push_back(static_cast<int>(p.units.size()));
            p.units.push_back({incumbent.index(l, k)});
          }
          p.groups.push_back(std::move(g));
        }
        SubResult r = solve(obj, p, o);
        if (!r.evaluated) return false;
        incumbent = r.best;
        ref_copy = incumbent;
        ref = &ref_copy;
      }
    }
  }
  return !obj.stopped();
}

}  // namespace bosch::search
