// SPDX-License-Identifier: Apache-2.0
// Rotary position embedding: frequencies (with Llama 3 / linear scaling) and rotation.

#include <bosch/cpu/rope.hpp>
#include <bosch/error.hpp>

#include <cmath>
#include <numbers>
#include <string>

namespace bosch::cpu {

std::vector<double> rope_inv_freq(const model::Config& config) {
  const int d = config.head_dim;
  if (d <= 0 || d % 2 != 0)
    throw invalid_argument("RoPE needs an even positive head_dim, got " + std::to_string(d), "head_dim");
  if (!(config.rope_theta > 0.0))
    throw invalid_argument("rope_theta must be positive, got " + std::to_string(config.rope_theta),
                           "rope_theta");
  std::vector<double> f(static_cast<std::size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i) f[i] = std::pow(config.rope_theta, -2.0 * i / d);

  const auto& s = config.rope_scaling;
  if (s.type == "none" || s.type.empty() || s.type == "default") return f;
  if (!(s.factor > 0.0))
    throw invalid_argument("rope scaling factor must be positive, got " + std::to_string(s.factor),
                           "rope_scaling.factor");
  if (s.type == "linear") {
    for (auto& x : f) x /= s.factor;
    return f;
  }
  if (s.type == "llama3") {
    if (!(s.high_freq_factor > s.low_freq_factor) || !(s.low_freq_factor > 0.0) ||
        s.original_max_position <= 0)
      throw invalid_argument("llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor and "
                             "original_max_position > 0",
                             "rope_scaling");
    const double old_len = s.original_max_position;
    const double low_wavelen = old_len / s.low_freq_factor;
    const double high_wavelen = old_len / s.high_freq_factor;
    for (auto& x : f) {
      const double wavelen = 2.0 * std::numbers::pi / x;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        x /= s.factor;
      } else {
        const double t = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        x = (1.0 - t) * x / s.factor + t * x;
      }
    }
    return f;
  }
  throw invalid_argument("unsupported rope scaling type '" + s.type + "' (none, linear, llama3)",
                         "rope_scaling.type");
}

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
