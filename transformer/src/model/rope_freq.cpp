// SPDX-License-Identifier: Apache-2.0
// bosch::model::rope_inv_freq: RoPE frequencies with linear and Llama 3 scaling
// (see model/config.hpp).

#include <bosch/error.hpp>
#include <bosch/model/config.hpp>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

namespace bosch::model {

std::vector<double> rope_inv_freq(const model::Config& config) {
  const int d = config.head_dim;
  if (d <= 0 || d % 2 != 0)
    throw invalid_argument("RoPE needs an even positive head_dim, got " + std::to_string(d), "head_dim");
  if (!(config.rope_theta > 0.0) || !std::isfinite(config.rope_theta))
    throw invalid_argument("rope_theta must be positive and finite, got " + std::to_string(config.rope_theta),
                           "rope_theta");
  std::vector<double> f(static_cast<std::size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i) f[i] = std::pow(config.rope_theta, -2.0 * i / d);

  const auto& s = config.rope_scaling;
  if (s.type == "none" || s.type.empty() || s.type == "default") return f;
  if (!(s.factor > 0.0) || !std::isfinite(s.factor))
    throw invalid_argument("rope scaling factor must be positive and finite, got " + std::to_string(s.factor),
                           "rope_scaling.factor");
  if (s.type == "linear") {
    for (auto& x : f) x /= s.factor;
    return f;
  }
  if (s.type == "llama3") {
    if (!(s.high_freq_factor > s.low_freq_factor) || !(s.low_freq_factor > 0.0) ||
        !std::isfinite(s.high_freq_factor) || s.original_max_position <= 0)
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

}  // namespace bosch::model
