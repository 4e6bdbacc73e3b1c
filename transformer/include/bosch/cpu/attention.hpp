// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file cpu/attention.hpp
/// Tiled causal grouped-query attention with a per-KV-head sliding window and
/// an online softmax (the FlashAttention recurrence, Dao et al. 2022, run on
/// the CPU), plus the exact attention statistics of the static baselines.
///
/// Work is split into items (sequence, KV head, query tile). An item packs the
/// query rows of all query heads of its KV group (GQA) into one block, scaled
/// by 1/sqrt(head_dim), and walks the key chunks its rows can see: for a full
/// head [0, i1); for a sliding-window head with window w and s sinks the keys
/// [max(0, i0 - w + 1), i1) plus [0, s), where [i0, i1) are the item's query
/// rows. Keys outside those ranges are never read, so an SWA head costs
/// O(n (w + swa_tile)) instead of O(n^2). Per chunk: S = Q K^T (Eigen GEMM),
/// entries invisible to a row set to -inf, running max m and sum l updated,
/// accumulator rescaled by exp(m_old - m_new) and increased by P V (Eigen
/// GEMM); at the end out = acc / l. All in fp32, unless a bf16 kernel is
/// given: then the two products run in bf16 with fp32 accumulation
/// (VDPBF16PS's order, docs/precision.md): the scaled queries, the keys, the
/// values and the probabilities P are rounded to bf16 (the keys and values
/// once per call), and key chunks start at multiples of 16 keys of their
/// sequence; the maxima, exponentials, sums l and the accumulator stay fp32.
/// The avx512 kernel serves AMX CPUs too. OpenMP over items (largest first,
/// dynamic schedule) with the thread count in force.

#include <bosch/cpu/backend.hpp>
#include <bosch/cpu/precision.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace bosch::cpu {

/// Head counts and row strides of the packed Q, K, V and output buffers.
/// Rows are tokens; query head h occupies columns [h * head_dim, (h+1) *
/// head_dim) of Q and of the output, KV head g the same columns of K and V.
struct AttentionShape {
  int num_heads = 0;          ///< query heads
  int num_kv_heads = 0;       ///< KV heads; query head h reads KV head h / (num_heads / num_kv_heads)
  int head_dim = 0;
  std::size_t q_stride = 0;   ///< floats between rows of Q (>= num_heads * head_dim)
  std::size_t kv_stride = 0;  ///< floats between rows of K and of V (>= num_kv_heads * head_dim)
  std::size_t out_stride = 0; ///< floats between rows of the output (>= num_heads * head_dim)
};

/// The keys one KV head may see. window == 0: full causal attention; window
/// >= 1: keys i - window < j <= i plus sinks j < sinks.
struct HeadWindow {
  int window = 0;
  int sinks = 0;
  bool full() const noexcept { return window <= 0; }
};

/// Tile sizes. Query tiles of `tile` rows for full heads and of `swa_tile`
/// rows for window heads (0 = automatic: min(tile, max(16, w / 8)) rounded
/// down to a multiple of 8, which bounds the work wasted on the masked
/// corners of the band at about swa_tile / w). Key chunks: at most 4 tiles
/// of keys (tile rounded up to a multiple of 8), equal in size; a window
/// head's band of swa_tile + w - 1 keys is usually one chunk.
struct AttentionTiles {
  int tile = 64;
  int swa_tile = 0;
};

/// Work done by one attention call.
struct AttentionWork {
  std::size_t scores = 0;  ///< q.k products computed, summed over query heads (rows x keys per chunk)
  std::size_t items = 0;   ///< work items (sequence, KV head, query tile)
};

/// The query tile used for a head (see AttentionTiles).
int query_tile(const AttentionTiles& tiles, const HeadWindow& window);

/// Windowed attention for a batch of sequences stored back to back:
/// sequence b holds rows [offsets[b], offsets[b+1]) at positions 0, 1, ...
/// `windows` has one entry per KV head. Writes every output row. Throws
/// bosch::invalid_argument on inconsistent shapes, offsets or tiles. `bf16`:
/// the products' kernel (runnable on this CPU, as choose_precision picks it);
/// none = fp32.
AttentionWork attention(const float* q, const float* k, const float* v, float* out,
                        std::span<const int> offsets, const AttentionShape& shape,
                        std::span<const HeadWindow> windows, const AttentionTiles& tiles,
                        std::optional<Bf16Kernel> bf16 = std::nullopt);

/// attention() for the query rows [query_begin, n) of one sequence of n
/// keys: `q` and `out` hold n - query_begin rows (row r = position
/// query_begin + r), `k` and `v` all n rows. The same tiled kernel, with
/// query tiles starting at query_begin (so not bitwise attention() over the
/// whole sequence, whose tiles start at 0). The evaluator's shared-prefix
/// forward runs its rows past a mask-invariant prefix with it
/// (Backend::run_layers with a SharedPrefix). Throws bosch::invalid_argument
/// unless 0 <= query_begin <= n, and as attention() does.
AttentionWork attention_rows(const float* q, const float* k, const float* v, float* out, int n, int query_begin,
                             const AttentionShape& shape, std::span<const HeadWindow> windows,
                             const AttentionTiles& tiles, std::optional<Bf16Kernel> bf16 = std::nullopt);

/// Attention of `n` new query rows of one sequence, at positions start ..
/// start + n - 1, against the keys and values of positions 0 .. start + n - 1
/// (a key/value cache; the new rows' own keys last). Each (row, query head)
/// attends the keys its KV head's window and sinks let it see, as in
/// attention(): a plain loop of dot products, one softmax (exp_shifted) and a
/// weighted sum of values per row and head, which suits the one-row steps of
/// decoding. Equal to attention() over the whole sequence up to fp32 rounding
/// (the sums run in another order), not bitwise. `q` and `out` hold n rows of
/// shape.q_stride / shape.out_stride floats; `k` and `v` start + n rows of
/// shape.kv_stride. Throws bosch::invalid_argument on inconsistent shapes.
void attention_cached(const float* q, int n, int start, const float* k, const float* v, float* out,
                      const AttentionShape& shape, std::span<const HeadWindow> windows);

/// Accumulates the attention statistics of one layer of one sequence of n
/// rows into `stats` (already sized) at `layer`, exactly: for each
/// contributing row i (see StatsRequest) and query head the probabilities
/// a_ij over the keys the head sees under `windows` are materialized (scores
/// by Eigen GEMM in fp32, exponentials in fp32, sums in double) and reduced
/// to the HeadStats quantities. Does not touch stats.rows.
void attention_stats(const float* q, const float* k, int n, const AttentionShape& shape,
                     std::span<const HeadWindow> windows, const StatsRequest& request,
                     std::span<const int> rows, int layer, HeadStats& stats);

/// The contributing query rows of `request` for a sequence of n rows (sorted,
/// unique). Throws bosch::invalid_argument for a listed row outside [0, n) or
/// a negative query_begin.
std::vector<int> stats_rows(const StatsRequest& request, int n);

}  // namespace bosch::cpu
