// SPDX-License-Identifier: Apache-2.0
// run_probed_layer: one decoder layer from the public CPU kernels, exposing
// its queries and keys and blending one KV head's attention output between
// full and sliding-window attention (the SWA-gate FISHER score).

#include <bosch/cpu/attention.hpp>
#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/rope.hpp>
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
  const std::size_t N = static_cast<std::size_t>(x.n_tokens);
  if (N == 0) return;

  // The backend's order of operations (src/cpu/backend.cpp, run_packed).
  const auto& L = model.weights.layers[static_cast<std::size_t>(layer)];
  const int d = c.hidden_size, hd = c.head_dim;
  const float eps = static_cast<float>(c.rms_eps);
  std::vector<float> h(N * d), q(N * c.num_heads * hd), k(N * c.num_kv_heads * hd),
      v(N * c.num_kv_heads * hd), att(N * c.num_heads * hd);
  float* xs = x.data.data();
  cpu::rms_norm(xs, h.data(), N, d, L.attn_norm.data(), eps);
  cpu::linear(h.data(), N, L.wq, L.bq.empty() ? nullptr : L.bq.data(), q.data());
  cpu::linear(h.data(), N, L.wk, L.bk.empty() ? nullptr : L.bk.data(), k.data());
  cpu::linear(h.data(), N, L.wv, L.bv.empty() ? nullptr : L.bv.data(), v.data());
  if (!L.q_norm.empty()) cpu::rms_norm(q.data(), q.data(), N * c.num_heads, hd, L.q_norm.data(), eps);
  if (!L.k_norm.empty()) cpu::rms_norm(k.data(), k.data(), N * c.num_kv_heads, hd, L.k_norm.data(), eps);
  cpu::AttentionShape shape;
  shape.num_heads = c.num_heads;
  shape.num_kv_heads = c.num_kv_heads;
  shape.head_dim = hd;
  shape.q_stride = shape.out_stride = static_cast<std::size_t>(c.num_heads) * hd;
  shape.kv_stride = static_cast<std::size_t>(c.num_kv_heads) * hd;
  const cpu::RopeTable rope(c, static_cast<int>(N));
  rope.apply(q.data(), N, shape.q_stride, c.num_heads, 0);
  rope.apply(k.data(), N, shape.kv_stride, c.num_kv_heads, 0);
  if (probe.visitor) probe.visitor(ProbeView{layer, static_cast<int>(N), q.data(), k.data(), shape});

  const int offsets[2] = {0, static_cast<int>(N)};
  const cpu::AttentionTiles tiles{};
  std::vector<cpu::HeadWindow> full(static_cast<std::size_t>(c.num_kv_heads));
  cpu::attention(q.data(), k.data(), v.data(), att.data(), offsets, shape, full, tiles);
  if (blend && probe.gate != 1.0f) {
    std::vector<cpu::HeadWindow> swa = full;
    swa[static_cast<std::size_t>(probe.blend_kv)] = cpu::HeadWindow{probe.window, probe.sinks};
    std::vector<float> att_swa(att.size());
    cpu::attention(q.data(), k.data(), v.data(), att_swa.data(), offsets, shape, swa, tiles);
    const int group = c.num_heads / c.num_kv_heads;
    const std::size_t c0 = static_cast<std::size_t>(probe.blend_kv) * group * hd;
    const std::size_t c1 = c0 + static_cast<std::size_t>(group) * hd;
    const float m = probe.gate, r = 1.0f - probe.gate;
    for (std::size_t i = 0; i < N; ++i) {
      float* o = att.data() + i * shape.out_stride;
      const float* s = att_swa.data() + i * shape.out_stride;
      for (std::size_t j = c0; j < c1; ++j) o[j] = m * o[j] + r * s[j];
    }
  }
  cpu::linear(att.data(), N, L.wo, nullptr, h.data());
  cpu::add_inplace(xs, h.data(), N * d);

  std::vector<float> gate(N * c.intermediate_size), up(N * c.intermediate_size);
  cpu::rms_norm(xs, h.data(), N, d, L.ffn_norm.data(), eps);
  cpu::linear(h.data(), N, L.w_gate, nullptr, gate.data());
  cpu::linear(h.data(), N, L.w_up, nullptr, up.data());
  cpu::silu_mul(gate.data(), up.data(), N * static_cast<std::size_t>(c.intermediate_size));
  cpu::linear(gate.data(), N, L.w_down, nullptr, h.data());
  cpu::add_inplace(xs, h.data(), N * d);
}

}  // namespace bosch::eval
