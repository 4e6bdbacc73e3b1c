// SPDX-License-Identifier: Apache-2.0
// bosch::kv: the hybrid KV cache's byte formula and packed layout
// (model/kv_layout.hpp).

#include <bosch/error.hpp>
#include <bosch/model/kv_layout.hpp>

#include <string>

namespace bosch::kv {

std::size_t bytes(const HeadLayout& layout, int head_dim, const HeadMask& mask, int window, int sinks,
                  std::int64_t tokens, std::size_t value_bytes) {
  if (mask.size() != 0 && !(mask.layout() == layout))
    throw invalid_argument("mask layout " + to_string(mask.layout()) + " does not match the model's " +
                               to_string(layout),
                           "kv_bytes");
  if (head_dim < 0 || tokens < 0 || sinks < 0 || window < 0)
    throw invalid_argument("head_dim, tokens, window and sinks must be >= 0", "kv_bytes");
  if (mask.size() != 0 && mask.count() > 0 && window < 1)
    throw invalid_argument("window must be >= 1 when the mask has SWA heads", "kv_bytes");
  std::int64_t total = 0;
  for (int l = 0; l < layout.num_layers; ++l)
    for (int g = 0; g < layout.num_kv_heads; ++g)
      total += rows(mask.size() != 0 && mask.swa(l, g), window, sinks, tokens);
  return static_cast<std::size_t>(total) * 2u * static_cast<std::size_t>(head_dim) * value_bytes;
}

std::size_t bytes(const model::Config& config, const AttentionWindows& windows, std::int64_t tokens,
                  std::size_t value_bytes) {
  return bytes(config.layout(), config.head_dim, windows.mask, windows.window, windows.sinks, tokens, value_bytes);
}

Layout::Layout(const model::Config& config, const AttentionWindows& windows, int capacity)
    : num_layers_(config.num_layers),
      num_kv_heads_(config.num_kv_heads),
      head_dim_(config.head_dim),
      capacity_(capacity),
      window_(windows.window),
      sinks_(windows.sinks) {
  windows.check(config.layout(), "kv::Layout");
  if (capacity < 1) throw invalid_argument("capacity must be >= 1, got " + std::to_string(capacity), "kv::Layout");
  const std::size_t heads = static_cast<std::size_t>(num_layers_) * static_cast<std::size_t>(num_kv_heads_);
  offsets_.resize(heads);
  windows_.resize(heads);
  for (int l = 0; l < num_layers_; ++l)
    for (int g = 0; g < num_kv_heads_; ++g) {
      const std::size_t i = index(l, g);
      const bool is_swa = windows.is_swa(l, g);
      windows_[i] = is_swa ? windows.window : 0;
      offsets_[i] = total_rows_;
      total_rows_ += kv::rows(is_swa, window_, sinks_, capacity);
    }
}

std::int64_t Layout::rows(int layer, int kv_head) const noexcept {
  return kv::rows(swa(layer, kv_head), window_, sinks_, capacity_);
}

std::size_t Layout::bytes(std::size_t value_bytes) const noexcept {
  return static_cast<std::size_t>(total_rows_) * 2u * static_cast<std::size_t>(head_dim_) * value_bytes;
}

}  // namespace bosch::kv
