// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file cpu/layer.hpp
/// The one decoder layer of the CPU backend, as a single sequence of op
/// calls (cpu/kernels.hpp, cpu/rope.hpp, cpu/attention.hpp):
///
///     h    = rms_norm(x, attn_norm)
///     q    = linear(h, wq, bq)      k = linear(h, wk, bk)      v = linear(h, wv, bv)
///     q    = rms_norm(q, q_norm)    k = rms_norm(k, k_norm)    (qwen3, qwen3moe)
///     q, k = rope(q, k)             at each row's position
///     kv   = hooks.cache(k, v)      KV-cache append (default: the new rows)
///            hooks.inspect(q, k)    probes and statistics
///     att  = attention(q, kv)       per-KV-head windows (or hooks.attend(q))
///            hooks.blend(att)       changes the attention output
///     x   += linear(att, wo)
///     h    = rms_norm(x, ffn_norm)
///     x   += linear(silu_mul(linear(h, w_gate), linear(h, w_up)), w_down)
///            or, in a sparse (Qwen3-MoE) layer, x += moe_ffn(h) (cpu/moe.hpp)
///
/// The dense feed-forward runs in blocks of at most ffn_block_rows rows, so
/// its two intermediate-wide activations (the largest buffers of a long
/// prefill: 1.3 GB at 32768 tokens on Qwen2.5-0.5B) stay a fixed size; the
/// products are row by row, so the blocks change no result.
///
/// Backend::run_layers / forward / forward_batch / prefill / decode_step and
/// eval::run_probed_layer all run this function; they differ only in their
/// rows, their windows and the hooks. Hooks never change the arithmetic of
/// the ops around them, so a layer with hooks that only look (cache copies,
/// statistics, probes) is bitwise the layer without them.

#include <bosch/cpu/attention.hpp>
#include <bosch/cpu/bf16.hpp>
#include <bosch/cpu/moe.hpp>
#include <bosch/cpu/rope.hpp>
#include <bosch/model/model.hpp>
#include <bosch/model/windows.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace bosch::cpu {

/// Rows per block of the dense feed-forward (see the file comment).
inline constexpr std::size_t ffn_block_rows = 4096;

/// The activations of one layer over `rows` tokens, reused from layer to
/// layer (gate and up only when some layer is dense, for min(rows,
/// ffn_block_rows) rows; the experts' buffers grow on first use).
struct LayerScratch {
  std::vector<float> h, q, k, v, att, gate, up;
  /// bf16 copy of a product's input (cpu/bf16.hpp), empty in fp32.
  Bf16Vector xb;
  /// The experts' buffers of sparse layers (cpu/moe.hpp).
  MoeScratch moe;
  /// @param bf16 whether the layer runs bf16 products (sizes xb)
  LayerScratch(const model::Config& config, std::size_t rows, bool bf16 = false);
  /// Bytes LayerScratch(config, rows, bf16) allocates (the experts' buffers,
  /// which grow on first use, aside).
  static std::size_t bytes(const model::Config& config, std::size_t rows, bool bf16);
};

/// Keys and values attention reads: `rows` rows of shape.kv_stride floats,
/// positions 0 .. rows - 1 of one sequence.
struct KeyValues {
  const float* k = nullptr;
  const float* v = nullptr;
  int rows = 0;
};

/// What a hook sees of one layer: the new rows' queries and keys (after
/// projection, Q/K norm and RoPE; q unscaled) and values, their shape, the
/// sequences they form and the per-KV-head windows attention uses.
struct LayerView {
  int layer = 0;
  int rows = 0;                      ///< new rows (tokens) of this call
  const float* q = nullptr;          ///< [rows, shape.q_stride]
  const float* k = nullptr;          ///< [rows, shape.kv_stride]
  const float* v = nullptr;          ///< [rows, shape.kv_stride]
  AttentionShape shape{};
  std::span<const int> offsets;      ///< sequence b = rows [offsets[b], offsets[b+1])
  std::span<const HeadWindow> windows;  ///< one per KV head
};

/// What the callers of decoder_layer differ in. Each hook is optional.
struct LayerHooks {
  /// KV cache: stores the view's keys and values and returns the keys and
  /// values attention reads. Returning the cache of a single sequence of
  /// `start + rows` rows makes the new rows attend to all cached positions
  /// (decoding); when it returns exactly the new rows (prefill), attention
  /// runs as without a cache. Unset: attention reads the new rows.
  std::function<KeyValues(const LayerView&)> cache;
  /// Replaces the attention kernels: writes the attention output `att`
  /// ([rows, shape.out_stride]) from the view's queries, after the cache
  /// hook has stored the new keys and values (decode_step against the hybrid
  /// KV cache, cpu/kv_cache.hpp, whose heads are not [rows, kv_stride]
  /// buffers). The KeyValues the cache hook returns are then not read.
  std::function<void(const LayerView&, float* att)> attend;
  /// Looks at queries and keys (probes, attention statistics).
  std::function<void(const LayerView&)> inspect;
  /// Changes the attention output `att` ([rows, shape.out_stride]) before
  /// the output projection (the FISHER gate blend).
  std::function<void(const LayerView&, float* att)> blend;
};

/// The rows one decoder_layer call processes: sequences stacked back to
/// back, sequence b holding rows [offsets[b], offsets[b+1]) at positions
/// start, start + 1, ... (start > 0 only with a single sequence: the rows
/// that follow a cache of `start` positions).
struct LayerRows {
  std::span<const int> offsets;
  int start = 0;
  /// Rows [outputs_from, offsets.back()) leave the layer; the rows before
  /// only give their keys and values (a single sequence; 0: every row).
  /// Their queries, attention, output projection and feed-forward are
  /// skipped and their x rows left as they came in, so the result is only
  /// good for the logits of the later rows (the last layer of a scoring
  /// forward, whose earlier rows no later layer reads). The hooks then see
  /// the queries of those rows only (view.q) and attend and blend must be
  /// unset.
  int outputs_from = 0;
};

/// The query/key/value shape of `config` in the packed layout of the backend.
AttentionShape attention_shape(const model::Config& config);

/// The per-KV-head windows of layer `layer` under `windows`.
void layer_windows(const AttentionWindows& windows, int layer, std::span<HeadWindow> out);

/// Runs decoder layer `layer` of `model` on the residual rows `x`
/// ([offsets.back(), hidden] row-major fp32) in place, as in the file comment.
/// The seven products (Q, K, V, O, gate, up, down) run in fp32 (Eigen) when
/// `bf16` is null, else in bf16 on its packed weights and kernel
/// (cpu/bf16.hpp; `scratch` must then have been built with bf16 = true);
/// everything else is fp32 either way.
/// `rope` must cover positions start .. start + longest sequence - 1;
/// `windows` has one entry per KV head; `scratch` holds at least
/// offsets.back() rows. Attention: the tiled kernel (cpu::attention with
/// `tiles`) over the new rows, or, when hooks.cache returns earlier
/// positions too (a single sequence), the same kernel for the new rows
/// against all of them (cpu::attention_rows). Uses the calling
/// thread's OpenMP thread count. The model must have passed
/// model::validate and the arguments must fit it (not re-checked here).
void decoder_layer(const model::Model& model, int layer, float* x, const LayerRows& rows,
                   const RopeTable& rope, std::span<const HeadWindow> windows, const AttentionTiles& tiles,
                   LayerScratch& scratch, const LayerHooks& hooks = {}, const Bf16Weights* bf16 = nullptr);

}  // namespace bosch::cpu
