// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file cpu/rope.hpp
/// Rotary position embedding (Su et al. 2021, RoFormer) in both layouts and
/// with the frequency scalings of model::RopeScaling.
///
/// Frequencies: inv_freq[i] = theta^(-2i/d) for i in [0, d/2), d = head_dim.
/// Scaling "linear": inv_freq[i] / factor (positions divided by factor).
/// Scaling "llama3" (Llama 3.1, as Hugging Face's _compute_llama3_parameters):
/// with wavelen = 2 pi / f, low = original_max_position / low_freq_factor,
/// high = original_max_position / high_freq_factor:
///   wavelen < high: f;  wavelen > low: f / factor;
///   otherwise: (1 - t) f / factor + t f,
///   t = (original_max_position / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor).
/// The pair rotated with frequency inv_freq[i] is (2i, 2i+1) for
/// RopeStyle::interleaved and (i, i + d/2) for RopeStyle::neox; position p
/// rotates it by the angle p * inv_freq[i]:
///   (a, b) -> (a cos - b sin, a sin + b cos).
/// Angles, sines and cosines are computed in double, stored in fp32.

#include <bosch/model/config.hpp>

#include <cstddef>
#include <vector>

namespace bosch::cpu {

/// The RoPE inverse frequencies of `config` (head_dim / 2 values), scaling
/// applied: model::rope_inv_freq (model/config.hpp), a property of the model
/// that model::validate checks, used here for the table.
using model::rope_inv_freq;

/// cos/sin of p * inv_freq[i] for positions p in [0, positions).
class RopeTable {
 public:
  RopeTable() = default;
  /// @param config     head_dim, rope_theta, rope_style, rope_scaling
  /// @param positions  number of positions covered (0 .. positions - 1)
  RopeTable(const model::Config& config, int positions);

  int positions() const noexcept { return positions_; }
  int half() const noexcept { return half_; }
  const float* cos(int p) const noexcept { return cos_.data() + static_cast<std::size_t>(p) * half_; }
  const float* sin(int p) const noexcept { return sin_.data() + static_cast<std::size_t>(p) * half_; }

  /// Rotates `heads` heads of size 2 * half() in place in each row of `x`
  /// ([rows, row_stride] row-major; the heads start at column 0 and are
  /// contiguous). Row r is at position first_position + r. Throws
  /// bosch::invalid_argument when a position falls outside the table.
  void apply(float* x, std::size_t rows, std::size_t row_stride, int heads, int first_position) const;

 private:
  model::RopeStyle style_ = model::RopeStyle::neox;
  int positions_ = 0;
  int half_ = 0;
  std::vector<float> cos_, sin_;
};

}  // namespace bosch::cpu
