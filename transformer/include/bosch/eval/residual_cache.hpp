// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file eval/residual_cache.hpp
/// A memory-bounded LRU cache of residual streams, keyed by (layer, mask
/// prefix, tag).
///
/// The residual stream entering layer l depends only on the mask bits of layers
/// 0 .. l-1 (and on the window, sinks and inputs, fixed per evaluator). So an
/// entry stored for one mask at layer l serves every later mask with the same
/// bits below l, and the forward restarts at l. The key holds the prefix bits
/// themselves, so a hit is exact (no hash collisions can give a wrong score).
/// The tag tells apart entries of different inputs (TransformerEvaluator keeps
/// one entry per calibration sample, tagged with the sample's index).

#include <bosch/mask.hpp>

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <utility>
#include <vector>

namespace bosch {

/// @tparam Value what is cached per entry (e.g. one residual per sample);
///         its size in bytes is given on insertion.
template <class Value>
class ResidualCache {
 public:
  /// @param capacity_bytes upper bound on the bytes of all entries (0 disables caching)
  explicit ResidualCache(std::size_t capacity_bytes = 0) : capacity_(capacity_bytes) {}

  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t bytes() const noexcept { return bytes_; }
  std::size_t entries() const noexcept { return lru_.size(); }

  /// The entry for the stream entering `layer` under `mask`'s bits below
  /// `layer` (for input `tag`), or nullptr. A hit becomes the most recently
  /// used entry.
  const Value* find(const HeadMask& mask, int layer, std::size_t tag = 0) {
    auto it = index_.find(key_hash(mask, layer, tag));
    if (it == index_.end()) return nullptr;
    for (auto node : it->second) {
      if (node->layer == layer && node->tag == tag && same_prefix(node->prefix, mask, layer)) {
        lru_.splice(lru_.begin(), lru_, node);
        return &node->value;
      }
    }
    return nullptr;
  }

  /// The deepest layer in [1, max_layer] with an entry for `mask` (and
  /// `tag`), or 0 (the embedding: nothing cached).
  int deepest(const HeadMask& mask, int max_layer, std::size_t tag = 0) {
    for (int l = max_layer; l >= 1; --l)
      if (find(mask, l, tag) != nullptr) return l;
    return 0;
  }

  /// Stores `value` (of `value_bytes`) for (mask's prefix below `layer`,
  /// `layer`, `tag`), evicting least recently used entries to stay within
  /// capacity. Does nothing when the entry alone exceeds the capacity or
  /// already exists.
  void insert(const HeadMask& mask, int layer, Value value, std::size_t value_bytes, std::size_t tag = 0) {
    if (value_bytes > capacity_ || find(mask, layer, tag) != nullptr) return;
    while (bytes_ + value_bytes > capacity_ && !lru_.empty()) evict_last();
    Node node{layer, tag, prefix_of(mask, layer), std::move(value), value_bytes};
    lru_.push_front(std::move(node));
    index_[key_hash(mask, layer, tag)].push_back(lru_.begin());
    bytes_ += value_bytes;
  }

  void clear() {
    lru_.clear();
    index_.clear();
    bytes_ = 0;
  }

 private:
  struct Node {
    int layer;
    std::size_t tag;
    std::vector<std::uint8_t> prefix;  // bits of layers 0 .. layer-1
    Value value;
    std::size_t bytes;
  };
  using Iter = typename std::list<Node>::iterator;

  static std::size_t prefix_length(const HeadMask& mask, int layer) {
    return static_cast<std::size_t>(layer) * static_cast<std::size_t>(mask.layout().num_kv_heads);
  }
  static std::vector<std::uint8_t> prefix_of(const HeadMask& mask, int layer) {
    const auto& bits = mask.bits();
    return {bits.begin(), bits.begin() + static_cast<std::ptrdiff_t>(prefix_length(mask, layer))};
  }
  static bool same_prefix(const std::vector<std::uint8_t>& prefix, const HeadMask& mask, int layer) {
    const std::size_t n = prefix_length(mask, layer);
    if (prefix.size() != n) return false;
    const auto& bits = mask.bits();
    for (std::size_t i = 0; i < n; ++i)
      if (prefix[i] != bits[i]) return false;
    return true;
  }
  static std::uint64_t hash_bits(const std::uint8_t* bits, std::size_t n, int layer, std::size_t tag) {
    std::uint64_t h = 1469598103934665603ull ^ static_cast<std::uint64_t>(layer);
    h = (h ^ static_cast<std::uint64_t>(tag)) * 1099511628211ull;
    for (std::size_t i = 0; i < n; ++i) {
      h ^= bits[i];
      h *= 1099511628211ull;
    }
    return h;
  }
  static std::uint64_t key_hash(const HeadMask& mask, int layer, std::size_t tag) {
    return hash_bits(mask.bits().data(), prefix_length(mask, layer), layer, tag);
  }
  void evict_last() {
    auto last = std::prev(lru_.end());
    auto& bucket = index_[key_hash_of(*last)];
    for (auto it = bucket.begin(); it != bucket.end(); ++it)
      if (*it == last) {
        bucket.erase(it);
        break;
      }
    bytes_ -= last->bytes;
    lru_.erase(last);
  }
  static std::uint64_t key_hash_of(const Node& node) {
    return hash_bits(node.prefix.data(), node.prefix.size(), node.layer, node.tag);
  }

  std::size_t capacity_;
  std::size_t bytes_ = 0;
  std::list<Node> lru_;
  std::unordered_map<std::uint64_t, std::vector<Iter>> index_;
};

}  // namespace bosch
