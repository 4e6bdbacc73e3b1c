// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file cpu/kv_cache.hpp
/// The hybrid key/value cache of incremental decoding (docs/deployment.md,
/// "Hybrid KV cache").
///
/// Per layer and KV head the cache holds fp32 keys (RoPE applied at their
/// absolute positions, after the optional K norm) and values, head_dim floats
/// per position, in the head's own buffer:
///
/// - a full head keeps every position: rows = capacity;
/// - an SWA head with window w and s sinks keeps positions 0 .. s - 1 (its
///   sinks) and a ring buffer of the last w positions >= s: rows =
///   min(capacity, s + w). Position j >= s sits in slot s + (j - s) mod w.
///
/// A query at position i of an SWA head sees keys j with i - w < j <= i or
/// j < s (AttentionWindows::visible), so the w ring slots hold exactly the
/// window including the query's own key, which overwrites position i - w,
/// the first one no later query can see. The cache never grows past s + w
/// rows for an SWA head, whatever the context; only full heads grow (to
/// `capacity`, doubled by Backend::decode_step when the context outgrows it).
///
/// The slot arithmetic (which positions a head stores, where, and which a
/// query reads) is model/kv_slots.hpp, shared with the CUDA backend's cache.
/// kv_bytes() is the exact formula for these rows (kv::bytes with 4 bytes per
/// value); allocated_bytes() sums the buffers actually allocated, and the two
/// agree (tests/cpu/decode_test.cpp).

#include <bosch/mask.hpp>
#include <bosch/model/config.hpp>
#include <bosch/model/windows.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bosch::cpu {

struct AttentionShape;  // cpu/attention.hpp (which includes this header through cpu/backend.hpp)

/// Rows (positions) one KV head holds after `tokens` positions with capacity
/// `tokens`: tokens for a full head, min(tokens, sinks + window) for an SWA
/// head.
std::int64_t kv_rows(bool swa, int window, int sinks, std::int64_t tokens) noexcept;

/// Exact bytes of the CPU's (fp32) hybrid KV cache of a model of `layout`
/// and `head_dim` holding `tokens` positions under `mask` (empty = all full)
/// with window `window` and `sinks` sinks:
///
///     sum over layers l and KV heads g of  2 (K and V) x head_dim x 4 bytes
///       x (tokens                        if (l, g) is full,
///          min(tokens, sinks + window)   if (l, g) is SWA).
///
/// Throws bosch::invalid_argument (naming both layouts) when a non-empty
/// mask does not have `layout`, or for negative counts.
std::size_t kv_bytes(const HeadLayout& layout, int head_dim, const HeadMask& mask, int window, int sinks,
                     std::int64_t tokens);

/// kv_bytes() for `config`'s layout and head_dim under `windows`.
std::size_t kv_bytes(const model::Config& config, const AttentionWindows& windows, std::int64_t tokens);

/// The hybrid KV cache of one sequence (see the file comment). Made by
/// Backend::prefill, grown by Backend::decode_step.
class KvCache {
 public:
  KvCache() = default;

  /// An empty cache (0 positions) for `config` under `windows`, with room
  /// for `capacity` >= 1 positions. Checks the windows against the model's
  /// layout first (bosch::invalid_argument naming both layouts).
  KvCache(const model::Config& config, const AttentionWindows& windows, int capacity);

  int num_layers() const noexcept { return num_layers_; }
  int num_kv_heads() const noexcept { return num_kv_heads_; }
  int head_dim() const noexcept { return head_dim_; }
  /// Positions stored so far (the next token sits at this position).
  int positions() const noexcept { return positions_; }
  /// Positions the full heads have room for.
  int capacity() const noexcept { return capacity_; }
  const AttentionWindows& windows() const noexcept { return windows_; }
  bool empty() const noexcept { return heads_.empty(); }

  /// Grows the full heads (and SWA heads still below sinks + window rows) to
  /// room for `capacity` positions, keeping what they hold; no-op when the
  /// cache is already that large.
  void reserve(int capacity);

  /// Stores the keys and values of `rows` new positions positions() ..
  /// positions() + rows - 1 of layer `layer` ([rows, kv_stride] row-major,
  /// KV head g in columns [g * head_dim, (g + 1) * head_dim)), only those
  /// each head will ever read. `first_reader` is the first query position
  /// that will read them from this cache: positions() + rows for prefill
  /// (its own rows attend in the tiled kernel, from the layer's scratch),
  /// positions() + rows - 1 for a decode step (its row attends through
  /// attend()). A full head stores every row; an SWA head the rows j < sinks
  /// and j > first_reader - window, the ones a query at first_reader or
  /// later can see. The rows must fit the capacity. Does not advance
  /// positions(): call advance() once every layer is written.
  void write(int layer, const float* k, const float* v, int rows, std::size_t kv_stride, int first_reader);

  /// Marks `rows` positions written in every layer.
  void advance(int rows);

  /// Attention of one query row at position positions() (its key and value
  /// written by write(layer, ..., 1, ...)) for layer `layer`: each query head
  /// attends the keys of its KV head that the head's window and sinks let it
  /// see, as cpu::attention_cached does over a full cache (same plain loop,
  /// one softmax per head, in position order). `q`: shape.q_stride floats
  /// (unscaled queries); `out`: shape.out_stride floats. OpenMP over query
  /// heads. `bf16`: the products' inputs (scaled queries, keys, values,
  /// probabilities) rounded to bf16 as the bf16 tiled attention rounds them
  /// (cpu/attention.hpp), the sums in fp32; the backend's bf16 decode.
  void attend(int layer, const float* q, float* out, const AttentionShape& shape, bool bf16 = false) const;

  /// The stored key / value of (layer, KV head) at `position`, head_dim
  /// floats, or nullptr when the head does not hold that position (not yet
  /// written, or evicted from an SWA head's ring).
  const float* key(int layer, int kv_head, int position) const noexcept;
  const float* value(int layer, int kv_head, int position) const noexcept;

  /// Rows (positions) head (layer, kv_head) has allocated.
  std::int64_t head_rows(int layer, int kv_head) const noexcept;

  /// Bytes of the key and value buffers as allocated (their capacity).
  std::size_t allocated_bytes() const noexcept;

 private:
  struct Head {
    bool swa = false;
    int rows = 0;  ///< allocated rows
    std::vector<float> k, v;
  };
  const Head& head(int layer, int g) const noexcept {
    return heads_[static_cast<std::size_t>(layer) * static_cast<std::size_t>(num_kv_heads_) +
                  static_cast<std::size_t>(g)];
  }
  /// Slot of `position` in an SWA head (assumes the head holds it).
  int slot(const Head& h, int position) const noexcept;
  bool holds(const Head& h, int position) const noexcept;

  int num_layers_ = 0, num_kv_heads_ = 0, head_dim_ = 0;
  int positions_ = 0, capacity_ = 0;
  AttentionWindows windows_;
  std::vector<Head> heads_;  ///< layer-major
};

}  // namespace bosch::cpu
