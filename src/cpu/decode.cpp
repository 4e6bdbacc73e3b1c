// SPDX-License-Identifier: Apache-2.0
// bosch::cpu::Backend::decode_step: one new token through all layers against
// the key/value cache that Backend::prefill built (incremental greedy decoding).

#include <bosch/cpu/backend.hpp>
#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/rope.hpp>
#include <bosch/error.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace bosch::cpu {
namespace {

void check_state(const DecodeState& state, const model::Config& c) {
  const auto L = static_cast<std::size_t>(c.num_layers);
  const int kvd = c.num_kv_heads * c.head_dim;
  if (state.positions < 1 || state.kv_dim != kvd || state.k.size() != L || state.v.size() != L)
    throw invalid_argument("decode state of " + std::to_string(state.k.size()) + " layers, kv_dim " +
                               std::to_string(state.kv_dim) + ", " + std::to_string(state.positions) +
                               " positions does not fit the model (" + std::to_string(c.num_layers) +
                               " layers, kv_dim " + std::to_string(kvd) + "); make it with prefill",
                           "DecodeState");
  const std::size_t rows = static_cast<std::size_t>(state.positions) * static_cast<std::size_t>(kvd);
  for (std::size_t l = 0; l < L; ++l)
    if (state.k[l].size() != rows || state.v[l].size() != rows)
      throw invalid_argument("decode state layer " + std::to_string(l) + " holds " +
                                 std::to_string(state.k[l].size()) + " key and " +
                                 std::to_string(state.v[l].size()) + " value floats, expected " +
                                 std::to_string(rows),
                             "DecodeState");
}

/// out = softmax(scale q . K_j) V_j over the visible keys j of one query head:
/// sinks [0, sink_end) and the band [lo, p]. `scores` holds >= p + 1 floats.
void attend_row(const float* q, const float* k, const float* v, std::size_t stride, int hd, int sink_end,
                int lo, int p, float scale, float* scores, std::vector<float>& qs, float* out) {
  for (int c = 0; c < hd; ++c) qs[static_cast<std::size_t>(c)] = q[c] * scale;
  int count = 0;
  float mx = -std::numeric_limits<float>::infinity();
  auto score = [&](int j) {
    const float* kj = k + static_cast<std::size_t>(j) * stride;
    float dot = 0.0f;
    for (int c = 0; c < hd; ++c) dot += qs[static_cast<std::size_t>(c)] * kj[c];
    scores[count++] = dot;
    mx = std::max(mx, dot);
  };
  for (int j = 0; j < sink_end; ++j) score(j);
  for (int j = lo; j <= p; ++j) score(j);
  const float sum = exp_shifted(scores, static_cast<std::size_t>(count), mx);
  std::fill_n(out, hd, 0.0f);
  int t = 0;
  auto accumulate = [&](int j) {
    const float a = scores[t++];
    const float* vj = v + static_cast<std::size_t>(j) * stride;
    for (int c = 0; c < hd; ++c) out[c] += a * vj[c];
  };
  for (int j = 0; j < sink_end; ++j) accumulate(j);
  for (int j = lo; j <= p; ++j) accumulate(j);
  const float inv = 1.0f / sum;
  for (int c = 0; c < hd; ++c) out[c] *= inv;
}

}  // namespace

std::vector<float> Backend::decode_step(DecodeState& state, int token, const AttentionWindows& windows) const {
  const auto& c = config();
  check_state(state, c);
  if (AttentionWindows::first_difference(windows, state.windows, c.num_layers, c.num_kv_heads) != c.num_layers)
    throw invalid_argument("decode_step windows differ from those the state was prefilled with", "windows");
  if (token < 0 || token >= c.vocab_size)
    throw invalid_argument("token id " + std::to_string(token) + " outside the vocabulary of " +
                               std::to_string(c.vocab_size),
                           "token");
  if (state.positions == std::numeric_limits<int>::max())
    throw invalid_argument("decode state is full", "DecodeState");

  ThreadScope threads(options_.threads);
  const int p = state.positions;
  const int d = c.hidden_size, hd = c.head_dim, ff = c.intermediate_size;
  const int qd = c.num_heads * hd, kvd = state.kv_dim;
  const int G = c.num_heads / c.num_kv_heads;
  const float eps = static_cast<float>(c.rms_eps);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (state.rope.positions() <= p)
    state.rope = RopeTable(c, p < (1 << 29) ? std::max(64, 2 * (p + 1)) : std::numeric_limits<int>::max());

  std::vector<float> x(model_->weights.embedding.row(token), model_->weights.embedding.row(token) + d);
  std::vector<float> h(static_cast<std::size_t>(d)), q(static_cast<std::size_t>(qd)),
      k(static_cast<std::size_t>(kvd)), v(static_cast<std::size_t>(kvd)), att(static_cast<std::size_t>(qd)),
      gate(static_cast<std::size_t>(ff)), up(static_cast<std::size_t>(ff)),
      scores(static_cast<std::size_t>(p) + 1), qs(static_cast<std::size_t>(hd));
  const auto old_rows = static_cast<std::size_t>(p) * static_cast<std::size_t>(kvd);
  try {
    for (int l = 0; l < c.num_layers; ++l) {
      const auto& L = model_->weights.layers[static_cast<std::size_t>(l)];
      rms_norm(x.data(), h.data(), 1, d, L.attn_norm.data(), eps);
      linear(h.data(), 1, L.wq, L.bq.empty() ? nullptr : L.bq.data(), q.data());
      linear(h.data(), 1, L.wk, L.bk.empty() ? nullptr : L.bk.data(), k.data());
      linear(h.data(), 1, L.wv, L.bv.empty() ? nullptr : L.bv.data(), v.data());
      if (!L.q_norm.empty()) rms_norm(q.data(), q.data(), c.num_heads, hd, L.q_norm.data(), eps);
      if (!L.k_norm.empty()) rms_norm(k.data(), k.data(), c.num_kv_heads, hd, L.k_norm.data(), eps);
      state.rope.apply(q.data(), 1, static_cast<std::size_t>(qd), c.num_heads, p);
      state.rope.apply(k.data(), 1, static_cast<std::size_t>(kvd), c.num_kv_heads, p);
      auto& K = state.k[static_cast<std::size_t>(l)];
      auto& V = state.v[static_cast<std::size_t>(l)];
      K.insert(K.end(), k.begin(), k.end());
      V.insert(V.end(), v.begin(), v.end());

      for (int head = 0; head < c.num_heads; ++head) {
        const int g = head / G;
        const bool swa = windows.is_swa(l, g);
        const int lo = swa ? std::max(0, p - windows.window + 1) : 0;
        const int sink_end = swa ? std::min(windows.sinks, lo) : 0;
        const auto col = static_cast<std::size_t>(g) * static_cast<std::size_t>(hd);
        attend_row(q.data() + static_cast<std::size_t>(head) * hd, K.data() + col, V.data() + col,
                   static_cast<std::size_t>(kvd), hd, sink_end, lo, p, scale, scores.data(), qs,
                   att.data() + static_cast<std::size_t>(head) * hd);
      }
      linear(att.data(), 1, L.wo, nullptr, h.data());
      add_inplace(x.data(), h.data(), static_cast<std::size_t>(d));

      rms_norm(x.data(), h.data(), 1, d, L.ffn_norm.data(), eps);
      linear(h.data(), 1, L.w_gate, nullptr, gate.data());
      linear(h.data(), 1, L.w_up, nullptr, up.data());
      silu_mul(gate.data(), up.data(), static_cast<std::size_t>(ff));
      linear(gate.data(), 1, L.w_down, nullptr, h.data());
      add_inplace(x.data(), h.data(), static_cast<std::size_t>(d));
    }
  } catch (...) {
    for (std::size_t l = 0; l < state.k.size(); ++l) {
      state.k[l].resize(old_rows);
      state.v[l].resize(old_rows);
    }
    throw;
  }
  state.positions = p + 1;

  std::vector<float> out(static_cast<std::size_t>(c.vocab_size));
  rms_norm(x.data(), x.data(), 1, d, model_->weights.final_norm.data(), eps);
  linear(x.data(), 1, model_->weights.output(), nullptr, out.data());
  return out;
}

}  // namespace bosch::cpu
