// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file mask.hpp
/// HeadLayout and HeadMask: the decision variables of BOSCH.
///
/// Under grouped-query attention the KV cache is only saved when a whole KV
/// group is local, so the decision unit is one bit per (layer, KV head):
/// true = sliding-window attention (SWA), false = full attention. The query
/// heads of a group inherit its bit (query head h reads KV head
/// h / (num_query_heads / num_kv_heads), the Hugging Face repeat_kv layout).

#include <bosch/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace bosch {

/// Attention-head layout of a decoder, uniform across layers.
struct HeadLayout {
  int num_layers = 0;       ///< L
  int num_query_heads = 0;  ///< query heads per layer
  int num_kv_heads = 0;     ///< KV heads per layer; the decision unit

  /// Number of decision bits, L * Hkv.
  constexpr std::size_t size() const noexcept {
    return static_cast<std::size_t>(num_layers) * static_cast<std::size_t>(num_kv_heads);
  }
  /// Query heads per KV head (GQA group size).
  constexpr int group_size() const noexcept {
    return num_kv_heads > 0 ? num_query_heads / num_kv_heads : 0;
  }
  /// True when every count is positive and the query heads divide evenly into
  /// KV groups.
  constexpr bool valid() const noexcept {
    return num_layers > 0 && num_kv_heads > 0 && num_query_heads >= num_kv_heads &&
           num_query_heads % num_kv_heads == 0;
  }
  friend constexpr bool operator==(const HeadLayout&, const HeadLayout&) = default;
};

/// Throws bosch::invalid_argument naming `what` unless `layout.valid()`.
inline void check_layout(const HeadLayout& layout, const std::string& what = "head layout") {
  if (!layout.valid())
    throw invalid_argument("invalid layout " + std::to_string(layout.num_layers) + " layers x " +
                               std::to_string(layout.num_query_heads) + " query heads x " +
                               std::to_string(layout.num_kv_heads) +
                               " KV heads (counts must be positive and KV heads must divide query heads)",
                           what);
}

/// The number of SWA heads a target ratio asks for: round(rho * L * Hkv),
/// halves rounded up. Throws bosch::invalid_argument unless 0 < rho < 1.
inline std::size_t target_count(const HeadLayout& layout, double rho) {
  if (!(rho > 0.0 && rho < 1.0))
    throw invalid_argument("SWA ratio must lie in (0, 1), got " + std::to_string(rho), "target_ratio");
  return static_cast<std::size_t>(std::floor(rho * static_cast<double>(layout.size()) + 0.5));
}

/// One bit per (layer, KV head); true = sliding-window head. Stored
/// layer-major: index = layer * num_kv_heads + kv.
class HeadMask {
 public:
  HeadMask() = default;
  /// All-full mask (every bit false) for `layout`; throws on an invalid layout.
  explicit HeadMask(HeadLayout layout) : layout_(layout) {
    check_layout(layout);
    bits_.assign(layout.size(), 0);
  }
  /// Mask with every bit set to `swa`.
  static HeadMask filled(HeadLayout layout, bool swa) {
    HeadMask m(layout);
    std::fill(m.bits_.begin(), m.bits_.end(), static_cast<std::uint8_t>(swa));
    return m;
  }

  const HeadLayout& layout() const noexcept { return layout_; }
  /// Number of bits (L * Hkv).
  std::size_t size() const noexcept { return bits_.size(); }

  /// Flat index of (layer, kv); checked.
  std::size_t index(int layer, int kv) const {
    if (layer < 0 || layer >= layout_.num_layers || kv < 0 || kv >= layout_.num_kv_heads)
      throw invalid_argument("head (" + std::to_string(layer) + ", " + std::to_string(kv) +
                             ") outside layout " + std::to_string(layout_.num_layers) + "x" +
                             std::to_string(layout_.num_kv_heads));
    return static_cast<std::size_t>(layer) * static_cast<std::size_t>(layout_.num_kv_heads) +
           static_cast<std::size_t>(kv);
  }
  /// True when KV head `kv` of `layer` uses a sliding window.
  bool swa(int layer, int kv) const { return bits_[index(layer, kv)] != 0; }
  void set(int layer, int kv, bool swa) { bits_[index(layer, kv)] = swa ? 1 : 0; }
  /// Bit by flat (layer-major) index; unchecked.
  bool operator[](std::size_t i) const noexcept { return bits_[i] != 0; }
  void set_flat(std::size_t i, bool swa) noexcept { bits_[i] = swa ? 1 : 0; }
  /// True when query head `q` of `layer` uses a sliding window (inherits its KV group's bit).
  bool swa_query(int layer, int q) const { return swa(layer, q / layout_.group_size()); }

  /// Number of SWA heads.
  std::size_t count() const noexcept {
    std::size_t n = 0;
    for (auto b : bits_) n += b;
    return n;
  }
  /// Number of SWA heads in one layer.
  int count_in_layer(int layer) const {
    int n = 0;
    for (int kv = 0; kv < layout_.num_kv_heads; ++kv) n += swa(layer, kv);
    return n;
  }
  /// Fraction of KV heads that are SWA (0 for an empty mask).
  double ratio() const noexcept {
    return bits_.empty() ? 0.0 : static_cast<double>(count()) / static_cast<double>(bits_.size());
  }
  /// The raw bits, layer-major (0 or 1).
  const std::vector<std::uint8_t>& bits() const noexcept { return bits_; }

  friend bool operator==(const HeadMask& a, const HeadMask& b) {
    return a.layout_ == b.layout_ && a.bits_ == b.bits_;
  }

  /// FNV-1a over layout and bits; stable across platforms and runs.
  std::uint64_t hash() const noexcept {
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&h](std::uint64_t v) {
      h ^= v;
      h *= 1099511628211ull;
    };
    mix(static_cast<std::uint64_t>(layout_.num_layers));
    mix(static_cast<std::uint64_t>(layout_.num_query_heads));
    mix(static_cast<std::uint64_t>(layout_.num_kv_heads));
    for (auto b : bits_) mix(b);
    return h;
  }

 private:
  HeadLayout layout_{};
  std::vector<std::uint8_t> bits_;
};

}  // namespace bosch

template <>
struct std::hash<bosch::HeadMask> {
  std::size_t operator()(const bosch::HeadMask& m) const noexcept {
    return static_cast<std::size_t>(m.hash());
  }
};
