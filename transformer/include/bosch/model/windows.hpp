// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/windows.hpp
/// Per-head attention windows derived from a HeadMask: what the backends take.

#include <bosch/mask.hpp>

#include <algorithm>
#include <string>

namespace bosch {

/// Which keys each (layer, KV head) may attend to. A full head: every key
/// j <= i (causal). An SWA head (mask bit set): keys with i - window < j <= i
/// (exactly `window` keys, itself included, the Hugging Face convention), plus
/// the first `sinks` keys j < sinks. An empty mask means all heads full.
struct AttentionWindows {
  HeadMask mask;   ///< true = sliding window; empty (size 0) = all full
  int window = 0;  ///< w >= 1 when any bit is set
  int sinks = 0;   ///< s >= 0

  /// All heads full.
  static AttentionWindows full() { return {}; }
  /// Every bit of `mask` set = SWA with window `w` and `s` sinks; validates.
  static AttentionWindows from_mask(HeadMask mask, int w, int s = 0) {
    if (w <= 0) throw invalid_argument("window must be >= 1, got " + std::to_string(w), "window");
    if (s < 0) throw invalid_argument("sinks must be >= 0, got " + std::to_string(s), "sinks");
    return {std::move(mask), w, s};
  }

  /// Checks these windows against a model of `layout`: the mask (when not
  /// empty) has that layout, window >= 1 when any head is windowed, sinks >= 0.
  /// Throws bosch::invalid_argument at `where` (e.g. "cuda::Backend::forward").
  void check(const HeadLayout& layout, const std::string& where) const {
    if (mask.size() != 0 && !(mask.layout() == layout))
      throw invalid_argument("mask layout " + to_string(mask.layout()) + " does not match the model's " +
                                 to_string(layout),
                             where);
    if (mask.size() != 0 && mask.count() > 0 && window < 1)
      throw invalid_argument("window must be >= 1 when the mask has SWA heads, got " + std::to_string(window),
                             where);
    if (sinks < 0) throw invalid_argument("sinks must be >= 0, got " + std::to_string(sinks), where);
  }

  /// True when (layer, kv) is a sliding-window head.
  bool is_swa(int layer, int kv) const { return mask.size() != 0 && mask.swa(layer, kv); }
  /// First non-sink key visible from query i for head (layer, kv).
  int first_key(int layer, int kv, int i) const {
    return is_swa(layer, kv) ? std::max(0, i - window + 1) : 0;
  }
  /// True when query i may attend key j under head (layer, kv).
  bool visible(int layer, int kv, int i, int j) const {
    if (j > i) return false;
    if (!is_swa(layer, kv)) return true;
    return j > i - window || j < sinks;
  }
  /// Lowest layer whose windows differ between `a` and `b` (num_layers when equal).
  static int first_difference(const AttentionWindows& a, const AttentionWindows& b, int num_layers,
                              int num_kv_heads) {
    for (int l = 0; l < num_layers; ++l)
      for (int g = 0; g < num_kv_heads; ++g) {
        bool sa = a.is_swa(l, g), sb = b.is_swa(l, g);
        if (sa != sb || (sa && (a.window != b.window || a.sinks != b.sinks))) return l;
      }
    return num_layers;
  }
};

}  // namespace bosch
