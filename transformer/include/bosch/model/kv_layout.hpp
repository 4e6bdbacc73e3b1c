// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/kv_layout.hpp
/// The size of the hybrid KV cache (docs/deployment.md, "Hybrid KV cache"),
/// written once for the CPU backend (fp32 values, cpu/kv_cache.hpp) and the
/// CUDA backend (16-bit values): the exact byte formula, and the packing of
/// every head's rows into one buffer that the CUDA cache allocates. Where a
/// position sits inside its head is model/kv_slots.hpp.

#include <bosch/mask.hpp>
#include <bosch/model/config.hpp>
#include <bosch/model/kv_slots.hpp>
#include <bosch/model/windows.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bosch::kv {

/// Exact bytes of the hybrid KV cache of a model of `layout` and `head_dim`
/// with room for `tokens` positions under `mask` (empty = all full), window
/// `window` and `sinks` sinks, storing `value_bytes` bytes per number (4 for
/// the CPU's fp32, 2 for the CUDA backend's bf16/fp16):
///
///     sum over layers l and KV heads g of  2 (K and V) x head_dim x value_bytes
///       x (tokens                        if (l, g) is full,
///          min(tokens, sinks + window)   if (l, g) is SWA).
///
/// Throws bosch::invalid_argument (naming both layouts) when a non-empty
/// mask does not have `layout`, for negative counts, or for window < 1 with
/// SWA heads.
std::size_t bytes(const HeadLayout& layout, int head_dim, const HeadMask& mask, int window, int sinks,
                  std::int64_t tokens, std::size_t value_bytes);

/// bytes() for `config`'s layout and head_dim under `windows`.
std::size_t bytes(const model::Config& config, const AttentionWindows& windows, std::int64_t tokens,
                  std::size_t value_bytes);

/// The rows of every head of a hybrid cache with room for `capacity`
/// positions, packed layer-major into one buffer (one for K, one for V):
/// head (l, g) owns rows [offset(l, g), offset(l, g) + rows(l, g)), each row
/// head_dim values; rows(l, g) = kv::rows(swa, window, sinks, capacity).
/// bytes(value_bytes) is therefore the formula above.
class Layout {
 public:
  Layout() = default;
  /// Checks `windows` against the model's layout first (bosch::invalid_argument
  /// naming both layouts) and capacity >= 1.
  Layout(const model::Config& config, const AttentionWindows& windows, int capacity);

  int num_layers() const noexcept { return num_layers_; }
  int num_kv_heads() const noexcept { return num_kv_heads_; }
  int head_dim() const noexcept { return head_dim_; }
  int capacity() const noexcept { return capacity_; }
  int window() const noexcept { return window_; }
  int sinks() const noexcept { return sinks_; }
  bool empty() const noexcept { return offsets_.empty(); }

  /// True when head (layer, kv_head) is an SWA head.
  bool swa(int layer, int kv_head) const noexcept { return windows_[index(layer, kv_head)] > 0; }
  /// Rows head (layer, kv_head) owns.
  std::int64_t rows(int layer, int kv_head) const noexcept;
  /// First row of head (layer, kv_head) in the packed buffer.
  std::int64_t offset(int layer, int kv_head) const noexcept { return offsets_[index(layer, kv_head)]; }
  /// Rows of all heads.
  std::int64_t total_rows() const noexcept { return total_rows_; }
  /// Bytes of the K and V buffers at `value_bytes` per number:
  /// 2 x total_rows() x head_dim x value_bytes.
  std::size_t bytes(std::size_t value_bytes) const noexcept;

  /// Row offsets of every head, layer-major ([layer * num_kv_heads + g]).
  const std::vector<std::int64_t>& offsets() const noexcept { return offsets_; }
  /// Window of every head, layer-major, 0 for a full head.
  const std::vector<int>& head_windows() const noexcept { return windows_; }

 private:
  std::size_t index(int layer, int kv_head) const noexcept {
    return static_cast<std::size_t>(layer) * static_cast<std::size_t>(num_kv_heads_) +
           static_cast<std::size_t>(kv_head);
  }
  int num_layers_ = 0, num_kv_heads_ = 0, head_dim_ = 0, capacity_ = 0, window_ = 0, sinks_ = 0;
  std::int64_t total_rows_ = 0;
  std::vector<std::int64_t> offsets_;
  std::vector<int> windows_;
};

}  // namespace bosch::kv
