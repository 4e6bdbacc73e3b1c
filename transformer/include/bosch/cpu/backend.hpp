// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file cpu/backend.hpp
/// The CPU forward pass with per-head attention windows.
///
/// A decoder forward (RMSNorm, Q/K/V projections with optional biases and
/// Q/K norms, RoPE in the model's convention, grouped-query attention,
/// output projection, SwiGLU FFN, residual adds) in fp32 with Eigen GEMMs
/// and OpenMP. Attention runs in key tiles with an online softmax; for a
/// sliding-window head, key tiles wholly outside its window (and its sinks)
/// are never touched, so an SWA head costs O(n * w), not O(n^2).
///
/// Options::precision runs the seven products of each layer (Q, K, V, O,
/// gate, up, down) and attention's two (Q K^T, P V) in bf16 with fp32
/// accumulation instead (cpu/precision.hpp, cpu/attention.hpp,
/// docs/precision.md); the softmax, norms, RoPE and the logits stay fp32.
///
/// Layer-wise entry points (embed, run_layers, logits) let an evaluator keep
/// the residual stream entering a layer and restart from the lowest layer a
/// new mask changes. Every entry point runs the one decoder layer of
/// cpu/layer.hpp; they differ only in its hooks.

#include <bosch/cpu/kv_cache.hpp>
#include <bosch/cpu/precision.hpp>
#include <bosch/cpu/rope.hpp>
#include <bosch/model/model.hpp>
#include <bosch/model/windows.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace bosch::cpu {

struct LayerHooks;   // cpu/layer.hpp
struct Bf16Weights;  // cpu/bf16.hpp

/// Backend settings.
struct Options {
  int threads = 0;  ///< OpenMP threads; 0 = OpenMP's default
  /// Attention query tile of full heads (rows per work item); key chunks
  /// hold up to 4 tiles of keys (see cpu/attention.hpp).
  int tile = 64;
  /// Query tile of sliding-window heads; 0 = automatic, min(tile, max(16, w/8))
  /// (see cpu/attention.hpp). A window at least as long as the sequence runs
  /// as a full head, so it gives exactly the full-attention result.
  int swa_tile = 0;
  /// Precision of the layers' products (cpu/precision.hpp): fp32 (the
  /// default: references, held-out figures, published tables), bf16, or
  /// automatic (bf16 where the CPU has AMX-BF16 or AVX512_BF16, else fp32).
  /// What runs is Backend::precision().
  Precision precision = Precision::fp32;
};

/// The residual stream of one sequence: [n_tokens, hidden] row-major fp32.
struct Residual {
  int n_tokens = 0;
  int hidden = 0;
  std::vector<float> data;
  std::size_t bytes() const noexcept { return data.size() * sizeof(float); }
};

/// The keys and values (after projection, K norm and RoPE) of the first
/// `rows` positions of one sequence at every layer, as
/// Backend::shared_prefix computes them: a forward over those rows alone with
/// full attention. Under windows of w >= rows keys every head sees all
/// earlier keys at these positions, so they are the same for every mask, and
/// an evaluator that scores many masks on one sequence computes them once
/// and runs only the later rows (run_layers with a prefix).
struct SharedPrefix {
  int rows = 0;
  std::vector<std::vector<float>> k, v;  ///< per layer: [rows, num_kv_heads * head_dim]
  std::size_t bytes() const noexcept {
    std::size_t b = 0;
    for (const auto& x : k) b += x.size() * sizeof(float);
    for (const auto& x : v) b += x.size() * sizeof(float);
    return b;
  }
};

/// What attention statistics to collect during run_layers (static baselines).
/// Only query rows i with i >= query_begin (or, when `rows` is non-empty, only
/// the listed rows) contribute.
struct StatsRequest {
  int window = 0;          ///< w for the beyond-window mass: keys s <= j <= i - w
  int sinks = 0;           ///< s: sink keys j < s are excluded from mass and distance
  int query_begin = 0;     ///< first contributing query row
  std::vector<int> rows;   ///< explicit contributing rows (sorted); overrides query_begin
  int period = 0;          ///< > 0: the input repeats with this period (RazorAttention probe)
};

/// Attention statistics per (layer, query head), summed over contributing
/// rows; divide by `rows` for means. Index: layer * num_heads + head.
/// Probabilities a_ij are those of the run (under its windows). `rows` grows
/// by the number of contributing rows once per run_layers call, so collect
/// a sequence's statistics in one call over all the layers of interest.
/// beyond_window_mass is collected only when request.window >= 1.
struct HeadStats {
  int num_layers = 0;
  int num_heads = 0;
  double rows = 0;                         ///< contributing query rows
  std::vector<double> beyond_window_mass;  ///< sum_i sum_{s<=j<=i-w} a_ij
  std::vector<double> mean_distance;       ///< sum_i sum_{j>=s} a_ij (i - j)
  std::vector<double> entropy;             ///< sum_i -sum_j a_ij log a_ij
  std::vector<double> sink_mass;           ///< sum_i sum_{j<s} a_ij
  std::vector<double> echo;                ///< period > 0: sum_i sum_{m>=1} a_{i, i-m*period}
  std::vector<double> induction;           ///< period > 0: sum_i sum_{m>=1} a_{i, i-m*period+1}
  std::size_t at(int layer, int head) const noexcept {
    return static_cast<std::size_t>(layer) * static_cast<std::size_t>(num_heads) + static_cast<std::size_t>(head);
  }
};

/// The state of one sequence for incremental (greedy) decoding, made by
/// Backend::prefill and grown by Backend::decode_step: the hybrid KV cache
/// (cpu/kv_cache.hpp: every position of each full head, sinks plus a ring
/// of the last `window` positions of each SWA head) and the RoPE table.
struct DecodeState {
  int positions = 0;   ///< tokens processed so far (the next token sits at this position)
  /// Keys (RoPE applied at their absolute positions, after the optional K
  /// norm) and values, per layer and KV head.
  KvCache cache;
  /// The windows the cache was built under (decode_step must get the same).
  AttentionWindows windows;
  /// RoPE cos/sin table, grown (doubling) as positions advance; entries are
  /// computed per position, so they equal those of a forward pass.
  RopeTable rope;
  /// Bytes the KV cache has allocated; equals kv_bytes(config, windows,
  /// cache.capacity()).
  std::size_t bytes() const noexcept { return cache.allocated_bytes(); }
  /// Positions the cache has room for before decode_step must grow it.
  int capacity() const noexcept { return cache.capacity(); }
};

/// The CPU backend. Holds a reference to the model, which must outlive it.
/// All methods are const and allocate their scratch per call, so one backend
/// may serve several threads.
class Backend {
 public:
  using Residual = cpu::Residual;

  /// @param model  a loaded model (weights in fp32)
  /// @param options threads, tile sizes and precision; for bf16 (chosen or
  ///                automatic) the layer weights are packed to bf16 here,
  ///                once, and shared by copies of the backend
  explicit Backend(const model::Model& model, Options options = {});

  const model::Config& config() const noexcept;
  const model::Model& model() const noexcept;
  const Options& options() const noexcept { return options_; }
  /// The precision that runs (choose_precision(options.precision) at
  /// construction: the CPU's features, less $BOSCH_CPU_DISABLE) and why.
  const PrecisionChoice& precision() const noexcept { return precision_; }
  /// Bytes of the bf16 copies of the layer weights (0 in fp32).
  std::size_t packed_bytes() const noexcept;
  HeadLayout layout() const;

  /// Token embeddings of `tokens` (the residual stream entering layer 0).
  /// Throws bosch::invalid_argument for an id outside the vocabulary.
  Residual embed(std::span<const int> tokens) const;

  /// Runs layers [first, last) on `x` in place. `windows` covers all layers
  /// (its mask, when non-empty, must have the model's layout). When `stats`
  /// is given, attention statistics described by `request` are accumulated
  /// into it (it is resized on first use).
  void run_layers(Residual& x, int first, int last, const AttentionWindows& windows,
                  HeadStats* stats = nullptr, const StatsRequest* request = nullptr) const;

  /// Runs layers [first, last) on `x` in place with `hooks` (cpu/layer.hpp:
  /// probes that see each layer's queries and keys, a blend of the attention
  /// output; a cache hook is for prefill/decode_step). Same checks as above.
  void run_layers(Residual& x, int first, int last, const AttentionWindows& windows,
                  const LayerHooks& hooks) const;

  /// The keys and values of `tokens` (a sequence's first rows) at every
  /// layer (SharedPrefix): one forward over them with full attention.
  /// Throws bosch::invalid_argument for an id outside the vocabulary.
  SharedPrefix shared_prefix(std::span<const int> tokens) const;

  /// Runs layers [first, last) on `x`, the rows of one sequence from
  /// position prefix.rows on, in place: each layer's queries attend the
  /// prefix's keys and values of that layer and the rows' own
  /// (cpu::attention_rows). The result equals run_layers on the whole
  /// sequence restricted to these rows up to fp32 rounding (the tiles fall
  /// differently), not bitwise; it is deterministic. Throws
  /// bosch::invalid_argument when the prefix does not fit the model, and when
  /// `windows` has an SWA head with window < prefix.rows (the prefix's rows
  /// would then differ from the mask's).
  /// `outputs_from` > 0 makes layer last - 1 compute only rows
  /// [outputs_from, x.n_tokens) (LayerRows::outputs_from: the earlier rows
  /// give keys and values and are left as they came in), so that x is then
  /// good only for logits at those rows; for the last layer of a scoring
  /// forward whose answers start there. Throws bosch::invalid_argument
  /// unless 0 <= outputs_from <= x.n_tokens.
  void run_layers(Residual& x, int first, int last, const AttentionWindows& windows,
                  const SharedPrefix& prefix, int outputs_from = 0) const;

  /// Logits at the given positions after the final norm and output
  /// projection: [positions.size(), vocab] row-major.
  std::vector<float> logits(const Residual& x, std::span<const int> positions) const;

  /// embed + run_layers(0, L) + logits.
  std::vector<float> forward(std::span<const int> tokens, const AttentionWindows& windows,
                             std::span<const int> positions) const;

  /// The forward pass of several sequences at once: their rows are stacked so
  /// each projection and FFN is one GEMM over all tokens (better use of the
  /// cores for short sequences); attention stays within each sequence.
  /// Result b holds the logits of sequences[b] at positions[b] ([k, vocab]).
  /// Equal to forward() per sequence up to fp32 rounding (GEMM blocking may
  /// differ with the stacked size), not necessarily bitwise.
  std::vector<std::vector<float>> forward_batch(std::span<const std::vector<int>> sequences,
                                                const AttentionWindows& windows,
                                                std::span<const std::vector<int>> positions) const;

  /// Incremental decoding, step 1: runs the normal forward pass over `tokens`
  /// (the very same layer path as forward(), so the logits are bitwise those
  /// of forward(tokens, windows, {n - 1})) while storing in the hybrid KV
  /// cache the keys and values each head will read later (cpu/kv_cache.hpp).
  /// The cache has room for `capacity` positions (at least the n tokens; 0 =
  /// n); decode_step doubles it when the context outgrows it, so pass the
  /// prompt plus the tokens to generate to allocate once. When
  /// `last_logits` is given it receives the logits of the last position
  /// ([vocab]). Throws bosch::invalid_argument for an empty sequence, an id
  /// outside the vocabulary or windows that do not fit the model (a mask of
  /// another layout: before any work, naming both layouts).
  DecodeState prefill(std::span<const int> tokens, const AttentionWindows& windows,
                      std::vector<float>* last_logits = nullptr, int capacity = 0) const;

  /// prefill() that returns the logits at `positions` (each in [0, n)) in
  /// `logits` ([positions.size(), vocab] row-major), bitwise those of
  /// forward(tokens, windows, positions): one pass both scores a
  /// teacher-forced sequence and leaves the state to decode after it (the
  /// held-out report's route, eval/report.hpp). Same checks as prefill(),
  /// and the positions' as forward()'s, before any work.
  DecodeState prefill(std::span<const int> tokens, const AttentionWindows& windows, std::span<const int> positions,
                      std::vector<float>& logits, int capacity = 0) const;

  /// Incremental decoding, step 2: appends `token` at position
  /// state.positions, runs it through all layers against the cached keys and
  /// values (one query row; each head attends the keys its window and sinks
  /// let it see, exactly as in forward()), stores its keys and values (an
  /// SWA head overwrites the oldest slot of its ring), and returns its logits
  /// ([vocab]). Cost O(weights + keys read) instead of the O(n x weights +
  /// n^2) of a fresh forward; an SWA head reads at most sinks + window keys. Equal to forward(all tokens, windows,
  /// {n}) up to fp32 rounding (the softmax and dot products sum in a
  /// different order than the tiled kernel), not bitwise. `windows` must be
  /// the windows the state was prefilled with (bosch::invalid_argument
  /// otherwise), as must the token range.
  std::vector<float> decode_step(DecodeState& state, int token, const AttentionWindows& windows) const;

  /// Bytes of scratch memory one forward over n tokens allocates: the
  /// activations of one layer (with their bf16 copy in bf16), the RoPE
  /// table and the attention's per-thread buffers (excluding the residual
  /// stream, n x hidden floats, and the logits, vocab floats per requested
  /// position).
  std::size_t scratch_bytes(int n) const noexcept;

  /// Floating-point operations of one forward over n tokens with logits at
  /// `logit_rows` positions (frame::forward_flops, eval/backend_frame.hpp,
  /// shared with the CUDA backend): 2 x (layer weights) per token for the
  /// projections and FFN (in a sparse layer the router and the experts a
  /// token runs, model::ffn_flops), 2 x hidden x vocab per logit row, and 4 x head_dim
  /// per (query head, visible key) for QK^T and PV under `windows`
  /// (exact visible counts; no credit for the masked tile corners).
  double flops(int n, int logit_rows, const AttentionWindows& windows) const;

  /// Exact bytes of this backend's hybrid KV cache with room for `tokens`
  /// positions under `windows` (fp32 values: cpu::kv_bytes); what
  /// DecodeState::bytes() reports for a state of that capacity.
  std::size_t kv_bytes(const AttentionWindows& windows, std::int64_t tokens) const;

 private:
  DecodeState prefill_rows(std::span<const int> tokens, const AttentionWindows& windows,
                           std::span<const int> positions, std::vector<float>& logits, int capacity) const;

  const model::Model* model_;
  Options options_;
  PrecisionChoice precision_;
  std::shared_ptr<const Bf16Weights> bf16_;  ///< null in fp32
};

}  // namespace bosch::cpu
