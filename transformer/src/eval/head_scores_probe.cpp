// SPDX-License-Identifier: Apache-2.0
// run_probed_layer: the CPU backend's decoder layer with hooks that expose
// its queries and keys and blend one KV head's attention output between full
// and sliding-window attention (the SWA-gate FISHER score).

#include <bosch/cpu/attention.hpp>
#include <bosch/cpu/layer.hpp>
#include <bosch/error.hpp>
#include <bosch/eval/head_scores.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace bosch::eval {

void run_probed_layer(const cpu::Backend& backend, cpu::Residual& x, int layer,
                      const LayerProbe& probe) {
  const auto& model = backend.model();
  const auto& c = model.config;
  if (layer < 0 || layer >= c.num_layers)
    throw invalid_argument("layer " + std::to_string(layer) + " outside [0, " +
                               std::to_string(c.num_layers) + ")",
                           "run_probed_layer");
  if (x.hidden != c.hidden_size || x.n_tokens < 0 ||
      x.data.size() != static_cast<std::size_t>(x.n_tokens) * static_cast<std::size_t>(c.hidden_size))
    throw invalid_argument("residual stream does not fit hidden size " + std::to_string(c.hidden_size),
                           "run_probed_layer");
  const bool blend = probe.blend_kv >= 0;
  if (blend) {
    if (probe.blend_kv >= c.num_kv_heads)
      throw invalid_argument("KV head " + std::to_string(probe.blend_kv) + " outside [0, " +
                                 std::to_string(c.num_kv_heads) + ")",
                             "LayerProbe.blend_kv");
    if (probe.window < 1 || probe.sinks < 0)
      throw invalid_argument("the blended head needs window >= 1 and sinks >= 0", "LayerProbe.window");
    if (!std::isfinite(probe.gate)) throw invalid_argument("gate must be finite", "LayerProbe.gate");
  }
  // The backend's decoder layer, all heads full, with two hooks: the visitor
  // sees the queries and keys; the blend mixes the KV head's attention output
  // with its sliding-window attention.
  cpu::LayerHooks hooks;
  if (probe.visitor)
    hooks.inspect = [&](const cpu::LayerView& v) { probe.visitor(ProbeView{v.layer, v.rows, v.q, v.k, v.shape}); };
  if (blend && probe.gate != 1.0f)
    hooks.blend = [&](const cpu::LayerView& v, float* att) {
      std::vector<cpu::HeadWindow> swa(v.windows.begin(), v.windows.end());
      swa[static_cast<std::size_t>(probe.blend_kv)] = cpu::HeadWindow{probe.window, probe.sinks};
      const std::size_t N = static_cast<std::size_t>(v.rows);
      std::vector<float> att_swa(N * v.shape.out_stride);
      const auto& o = backend.options();
      cpu::attention(v.q, v.k, v.v, att_swa.data(), v.offsets, v.shape, swa, cpu::AttentionTiles{o.tile, o.swa_tile});
      const int group = c.num_heads / c.num_kv_heads;
      const std::size_t c0 = static_cast<std::size_t>(probe.blend_kv) * group * c.head_dim;
      const std::size_t c1 = c0 + static_cast<std::size_t>(group) * c.head_dim;
      const float m = probe.gate, r = 1.0f - probe.gate;
      for (std::size_t i = 0; i < N; ++i) {
        float* out = att + i * v.shape.out_stride;
        const float* s = att_swa.data() + i * v.shape.out_stride;
        for (std::size_t j = c0; j < c1; ++j) out[j] = m * out[j] + r * s[j];
      }
    };
  backend.run_layers(x, layer, layer + 1, AttentionWindows::full(), hooks);
}

}  // namespace bosch::eval
