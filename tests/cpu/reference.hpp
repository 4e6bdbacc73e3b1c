// A naive O(n^2) decoder forward in double precision with plain loops and an
// explicit visibility mask (AttentionWindows::visible), written independently
// of the backend (its own RoPE frequencies, norms and softmax, and the
// Qwen3-MoE router and experts, ref_moe): the oracle the tiled fp32 forward
// pass is compared with. Optionally reduces the attention
// probabilities to the HeadStats quantities.
#pragma once

#include <bosch/cpu/backend.hpp>
#include <bosch/model/model.hpp>
#include <bosch/model/windows.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <span>
#include <vector>

namespace bosch::test {

using Mat = std::vector<std::vector<double>>;  // [rows][cols]

/// RoPE inverse frequencies, Hugging Face formulas (llama3 / linear scaling).
inline std::vector<double> ref_inv_freq(const model::Config& c) {
  std::vector<double> f;
  for (int i = 0; i < c.head_dim / 2; ++i) f.push_back(1.0 / std::pow(c.rope_theta, (2.0 * i) / c.head_dim));
  const auto& s = c.rope_scaling;
  if (s.type == "linear") {
    for (auto& x : f) x /= s.factor;
  } else if (s.type == "llama3") {
    const double low_wl = s.original_max_position / s.low_freq_factor;
    const double high_wl = s.original_max_position / s.high_freq_factor;
    for (auto& x : f) {
      const double wl = 2 * std::numbers::pi / x;
      if (wl < high_wl) {
      } else if (wl > low_wl) {
        x = x / s.factor;
      } else {
        const double smooth = (s.original_max_position / wl - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        x = (1 - smooth) * x / s.factor + smooth * x;
      }
    }
  }
  return f;
}

inline std::vector<double> ref_linear(const model::Matrix& w, const std::vector<double>& x,
                                      const std::vector<float>& bias) {
  std::vector<double> y(static_cast<std::size_t>(w.rows), 0.0);
  for (int r = 0; r < w.rows; ++r) {
    double s = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(r)];
    for (int c = 0; c < w.cols; ++c) s += static_cast<double>(w.row(r)[c]) * x[static_cast<std::size_t>(c)];
    y[static_cast<std::size_t>(r)] = s;
  }
  return y;
}

/// Rows [row0, row0 + rows) of w times x: one expert's block of a stacked
/// expert matrix.
inline std::vector<double> ref_linear_rows(const model::Matrix& w, int row0, int rows, const std::vector<double>& x) {
  std::vector<double> y(static_cast<std::size_t>(rows), 0.0);
  for (int r = 0; r < rows; ++r) {
    double s = 0.0;
    for (int c = 0; c < w.cols; ++c) s += static_cast<double>(w.row(row0 + r)[c]) * x[static_cast<std::size_t>(c)];
    y[static_cast<std::size_t>(r)] = s;
  }
  return y;
}

/// The Qwen3-MoE feed-forward of one token h (after the FFN norm), written
/// from transformers' Qwen3MoeSparseMoeBlock: softmax over all router logits,
/// the top-k probabilities (stable sort: ties to the lower expert), divided
/// by their sum when norm_topk_prob, and the weighted sum of the chosen
/// experts' SwiGLUs. `margin` (when given) is lowered to the gap between the
/// k-th and (k+1)-th router logit: how far the choice is from a tie.
inline std::vector<double> ref_moe(const model::Config& c, const model::LayerWeights& L, const std::vector<double>& h,
                                   double* margin = nullptr) {
  const int E = c.moe.num_experts, k = c.moe.num_experts_used, F = c.moe.expert_intermediate_size;
  const int d = c.hidden_size;
  const auto logits = ref_linear(L.router, h, {});
  const double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(static_cast<std::size_t>(E));
  double sum = 0;
  for (int e = 0; e < E; ++e) sum += p[static_cast<std::size_t>(e)] = std::exp(logits[static_cast<std::size_t>(e)] - mx);
  for (auto& v : p) v /= sum;
  std::vector<int> order(static_cast<std::size_t>(E));
  for (int e = 0; e < E; ++e) order[static_cast<std::size_t>(e)] = e;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return p[static_cast<std::size_t>(a)] > p[static_cast<std::size_t>(b)]; });
  if (margin && k < E)
    *margin = std::min(*margin, logits[static_cast<std::size_t>(order[static_cast<std::size_t>(k - 1)])] -
                                    logits[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])]);
  double chosen = 0;
  for (int j = 0; j < k; ++j) chosen += p[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])];
  std::vector<double> y(static_cast<std::size_t>(d), 0.0);
  for (int j = 0; j < k; ++j) {
    const int e = order[static_cast<std::size_t>(j)];
    const double w = p[static_cast<std::size_t>(e)] / (c.moe.norm_topk_prob ? chosen : 1.0);
    auto g = ref_linear_rows(L.gate_exps, e * F, F, h);
    const auto u = ref_linear_rows(L.up_exps, e * F, F, h);
    for (int i = 0; i < F; ++i) g[static_cast<std::size_t>(i)] = g[static_cast<std::size_t>(i)] / (1 + std::exp(-g[static_cast<std::size_t>(i)])) * u[static_cast<std::size_t>(i)];
    const auto o = ref_linear_rows(L.down_exps, e * d, d, g);
    for (int i = 0; i < d; ++i) y[static_cast<std::size_t>(i)] += w * o[static_cast<std::size_t>(i)];
  }
  return y;
}

inline void ref_rms(std::vector<double>& x, std::size_t begin, std::size_t size, const std::vector<float>& g, double eps) {
  double ss = 0;
  for (std::size_t c = 0; c < size; ++c) ss += x[begin + c] * x[begin + c];
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(size) + eps);
  for (std::size_t c = 0; c < size; ++c) x[begin + c] = x[begin + c] * scale * g[c];
}

inline void ref_rope(std::vector<double>& v, std::size_t begin, int hd, int pos, const std::vector<double>& f,
                     model::RopeStyle style) {
  const int h2 = hd / 2;
  for (int i = 0; i < h2; ++i) {
    const std::size_t a = begin + (style == model::RopeStyle::interleaved ? 2 * i : i);
    const std::size_t b = begin + (style == model::RopeStyle::interleaved ? 2 * i + 1 : i + h2);
    const double ang = pos * f[static_cast<std::size_t>(i)];
    const double x = v[a], y = v[b];
    v[a] = x * std::cos(ang) - y * std::sin(ang);
    v[b] = x * std::sin(ang) + y * std::cos(ang);
  }
}

/// Statistics of the reference run (same layout and meaning as cpu::HeadStats).
struct RefStats {
  cpu::HeadStats s;
};

/// Logits [positions.size()][vocab] of the naive forward. When `stats` is
/// given, accumulates HeadStats for the rows of `request` (all rows >= query_begin
/// or the listed rows), with a_ij from the reference's own probabilities.
/// Sparse (Qwen3-MoE) layers run ref_moe; `router_margin`, when given, is
/// set to the smallest gap between a token's k-th and (k+1)-th router logit
/// over all tokens and sparse layers (+infinity when there is none).
inline Mat reference_logits(const model::Model& m, std::span<const int> tokens, const AttentionWindows& win,
                            std::span<const int> positions, cpu::HeadStats* stats = nullptr,
                            const cpu::StatsRequest* request = nullptr, double* router_margin = nullptr) {
  if (router_margin) *router_margin = INFINITY;
  const auto& c = m.config;
  const auto& W = m.weights;
  const int n = static_cast<int>(tokens.size()), d = c.hidden_size, hd = c.head_dim;
  const int H = c.num_heads, Hkv = c.num_kv_heads, G = H / Hkv;
  const auto f = ref_inv_freq(c);
  Mat x(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < d; ++k) x[i].push_back(W.embedding.row(tokens[static_cast<std::size_t>(i)])[k]);
  if (stats) {
    stats->num_layers = c.num_layers;
    stats->num_heads = H;
    const std::size_t size = static_cast<std::size_t>(c.num_layers * H);
    for (auto* v : {&stats->beyond_window_mass, &stats->mean_distance, &stats->entropy, &stats->sink_mass,
                    &stats->echo, &stats->induction})
      v->assign(size, 0.0);
  }
  std::vector<char> contributes(static_cast<std::size_t>(n), 0);
  if (stats) {
    if (!request->rows.empty())
      for (int r : request->rows) contributes[static_cast<std::size_t>(r)] = 1;
    else
      for (int i = request->query_begin; i < n; ++i) contributes[static_cast<std::size_t>(i)] = 1;
    for (char ch : contributes) stats->rows += ch;
  }
  for (int l = 0; l < c.num_layers; ++l) {
    const auto& L = W.layers[static_cast<std::size_t>(l)];
    Mat q(static_cast<std::size_t>(n)), k(static_cast<std::size_t>(n)), v(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      std::vector<double> h = x[i];
      ref_rms(h, 0, static_cast<std::size_t>(d), L.attn_norm, c.rms_eps);
      q[i] = ref_linear(L.wq, h, L.bq);
      k[i] = ref_linear(L.wk, h, L.bk);
      v[i] = ref_linear(L.wv, h, L.bv);
      if (c.qk_norm) {
        for (int a = 0; a < H; ++a) ref_rms(q[i], static_cast<std::size_t>(a * hd), static_cast<std::size_t>(hd), L.q_norm, c.rms_eps);
        for (int a = 0; a < Hkv; ++a) ref_rms(k[i], static_cast<std::size_t>(a * hd), static_cast<std::size_t>(hd), L.k_norm, c.rms_eps);
      }
      for (int a = 0; a < H; ++a) ref_rope(q[i], static_cast<std::size_t>(a * hd), hd, i, f, c.rope_style);
      for (int a = 0; a < Hkv; ++a) ref_rope(k[i], static_cast<std::size_t>(a * hd), hd, i, f, c.rope_style);
    }
    Mat att(static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(H * hd), 0.0));
    for (int a = 0; a < H; ++a) {
      const int g = a / G;
      for (int i = 0; i < n; ++i) {
        std::vector<double> s(static_cast<std::size_t>(i + 1), 0.0), p(s.size(), 0.0);
        double mx = -1e300;
        for (int j = 0; j <= i; ++j) {
          if (!win.visible(l, g, i, j)) continue;
          double dot = 0;
          for (int e = 0; e < hd; ++e) dot += q[i][static_cast<std::size_t>(a * hd + e)] * k[j][static_cast<std::size_t>(g * hd + e)];
          s[static_cast<std::size_t>(j)] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[static_cast<std::size_t>(j)]);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j)
          if (win.visible(l, g, i, j)) sum += p[static_cast<std::size_t>(j)] = std::exp(s[static_cast<std::size_t>(j)] - mx);
        for (auto& e : p) e /= sum;
        for (int j = 0; j <= i; ++j)
          for (int e = 0; e < hd; ++e)
            att[i][static_cast<std::size_t>(a * hd + e)] += p[static_cast<std::size_t>(j)] * v[j][static_cast<std::size_t>(g * hd + e)];
        if (stats && contributes[static_cast<std::size_t>(i)]) {
          const std::size_t at = stats->at(l, a);
          for (int j = 0; j <= i; ++j) {
            const double pj = p[static_cast<std::size_t>(j)];
            if (pj > 0) stats->entropy[at] -= pj * std::log(pj);
            if (j < request->sinks) {
              stats->sink_mass[at] += pj;
              continue;
            }
            stats->mean_distance[at] += pj * (i - j);
            if (request->window >= 1 && j <= i - request->window) stats->beyond_window_mass[at] += pj;
          }
          if (request->period > 0)
            for (int mm = 1; i - mm * request->period >= 0; ++mm) {
              stats->echo[at] += p[static_cast<std::size_t>(i - mm * request->period)];
              stats->induction[at] += p[static_cast<std::size_t>(i - mm * request->period + 1)];
            }
        }
      }
    }
    for (int i = 0; i < n; ++i) {
      const auto o = ref_linear(L.wo, att[i], {});
      for (int e = 0; e < d; ++e) x[i][e] += o[e];
      std::vector<double> h = x[i];
      ref_rms(h, 0, static_cast<std::size_t>(d), L.ffn_norm, c.rms_eps);
      if (c.is_sparse_layer(l)) {
        const auto y = ref_moe(c, L, h, router_margin);
        for (int e = 0; e < d; ++e) x[i][e] += y[static_cast<std::size_t>(e)];
        continue;
      }
      auto gt = ref_linear(L.w_gate, h, {});
      const auto up = ref_linear(L.w_up, h, {});
      for (std::size_t e = 0; e < gt.size(); ++e) gt[e] = gt[e] / (1 + std::exp(-gt[e])) * up[e];
      const auto dn = ref_linear(L.w_down, gt, {});
      for (int e = 0; e < d; ++e) x[i][e] += dn[e];
    }
  }
  Mat out;
  for (int p : positions) {
    std::vector<double> h = x[static_cast<std::size_t>(p)];
    ref_rms(h, 0, static_cast<std::size_t>(d), W.final_norm, c.rms_eps);
    out.push_back(ref_linear(W.output(), h, {}));
  }
  return out;
}

/// max |a - b| over all entries, and max |b| (the logit scale).
struct Diff {
  double max_abs = 0;
  double scale = 0;
};
inline Diff compare(const std::vector<float>& got, const Mat& want) {
  Diff d;
  std::size_t vocab = want.empty() ? 0 : want[0].size();
  for (std::size_t r = 0; r < want.size(); ++r)
    for (std::size_t c = 0; c < vocab; ++c) {
      d.max_abs = std::max(d.max_abs, std::abs(static_cast<double>(got[r * vocab + c]) - want[r][c]));
      d.scale = std::max(d.scale, std::abs(want[r][c]));
    }
  return d;
}

}  // namespace bosch::test
