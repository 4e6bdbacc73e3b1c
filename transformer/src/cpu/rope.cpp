// SPDX-License-Identifier: Apache-2.0
// Rotary position embedding: the cos/sin table and the rotation (frequencies:
// model::rope_inv_freq, src/model/rope_freq.cpp).

#include <bosch/cpu/rope.hpp>
#include <bosch/error.hpp>

#include <cmath>
#include <string>

namespace bosch::cpu {

RopeTable::RopeTable(const model::Config& config, int positions)
    : style_(config.rope_style), positions_(positions), half_(config.head_dim / 2) {
  if (positions < 0) throw invalid_argument("negative position count", "RopeTable");
  const auto f = rope_inv_freq(config);
  const std::size_t size = static_cast<std::size_t>(positions) * static_cast<std::size_t>(half_);
  cos_.resize(size);
  sin_.resize(size);
  for (int p = 0; p < positions; ++p)
    for (int i = 0; i < half_; ++i) {
      const double angle = static_cast<double>(p) * f[i];
      cos_[static_cast<std::size_t>(p) * half_ + i] = static_cast<float>(std::cos(angle));
      sin_[static_cast<std::size_t>(p) * half_ + i] = static_cast<float>(std::sin(angle));
    }
}

void RopeTable::apply(float* x, std::size_t rows, std::size_t row_stride, int heads,
                      int first_position) const {
  if (rows == 0) return;
  if (first_position < 0 || static_cast<std::size_t>(first_position) + rows > static_cast<std::size_t>(positions_))
    throw invalid_argument("RoPE positions " + std::to_string(first_position) + ".." +
                               std::to_string(first_position + static_cast<long long>(rows) - 1) +
                               " outside the table of " + std::to_string(positions_),
                           "RopeTable");
  const int h2 = half_;
  const bool interleaved = style_ == model::RopeStyle::interleaved;
  const auto n = static_cast<std::ptrdiff_t>(rows);
#pragma omp parallel for schedule(static) if (rows * static_cast<std::size_t>(heads) * h2 > 32768)
  for (std::ptrdiff_t r = 0; r < n; ++r) {
    const float* c = cos(first_position + static_cast<int>(r));
    const float* s = sin(first_position + static_cast<int>(r));
    float* row = x + static_cast<std::size_t>(r) * row_stride;
    for (int h = 0; h < heads; ++h) {
      float* v = row + static_cast<std::size_t>(h) * 2 * h2;
      if (interleaved) {
        for (int i = 0; i < h2; ++i) {
          const float a = v[2 * i], b = v[2 * i + 1];
          v[2 * i] = a * c[i] - b * s[i];
          v[2 * i + 1] = a * s[i] + b * c[i];
        }
      } else {
        for (int i = 0; i < h2; ++i) {
          const float a = v[i], b = v[i + h2];
          v[i] = a * c[i] - b * s[i];
          v[i + h2] = a * s[i] + b * c[i];
        }
      }
    }
  }
}

}  // namespace bosch::cpu
