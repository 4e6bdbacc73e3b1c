// A two-layer decoder with hand-planted attention heads whose long-context
// behaviour is known, for the static head-ranking tests:
//
//  - layer 0, KV head 0 ("previous-token head" P): both query heads attend to
//    position i - 1 (content-free, through RoPE: the Q/K biases put fixed
//    vectors on RoPE pairs 0-2 with the query rotated by one position); query
//    head 0 writes the previous token's identity into residual dims [48, 96).
//    Purely local: an SWA window >= 2 does not change it.
//  - layer 1, KV head 1 ("induction head" I): query head 2 matches the current
//    token's identity (dims [0, 48)) against the previous-token identity that P
//    wrote, so it attends to the token that followed an earlier occurrence of
//    the current token, and writes that token's identity back into dims
//    [0, 48) with a large gain: the model copies (greedy decoding continues a
//    sequence seen before). Query head 3 has no query (uniform attention) and
//    no output.
//  - every other head has random Q/K (tiny_model's weights, so random attention
//    patterns) and a ZERO output projection: converting it to SWA cannot change
//    any output.
//  - FFNs are zero (w_down = 0); norms have unit gains.
//
// Token identities: tokens 0 .. 47 are the one-hot directions e_t of dims
// [0, 48); tokens 48 .. 60 are unused random directions there. RoPE theta is
// 1e30 with head_dim 64, so pairs >= 4 rotate by < 2e-4 rad per token: the
// identity matching runs on them, position-free, over the <= 200-token
// sequences of the tests.
#pragma once

#include "cpu/tiny_model.hpp"

#include <bosch/model/model.hpp>
#include <bosch/tasks/task.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/normal_distribution.hpp>
#include <boost/random/uniform_int_distribution.hpp>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace bosch::test {

inline constexpr int planted_id_dims = 48;

/// The planted model (see the file comment).
inline model::Model planted_model(std::uint64_t seed) {
  model::Config c = tiny_config(model::Arch::qwen2, 2);
  c.name = "planted";
  c.vocab_size = 61;
  c.hidden_size = 128;
  c.intermediate_size = 16;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.max_position = 512;
  c.rms_eps = 1e-6;
  c.rope_theta = 1e30;
  c.rope_style = model::RopeStyle::neox;
  c.tie_embeddings = true;
  model::Model m = tiny_model(c, seed);
  auto& w = m.weights;
  const int d = c.hidden_size, hd = c.head_dim, half = hd / 2;

  // Embeddings: one-hot identities for tokens < 48, random unit directions after.
  boost::random::mt19937_64 rng(seed ^ 0x5eedull);
  boost::random::normal_distribution<double> normal;
  std::fill(w.embedding.data.begin(), w.embedding.data.end(), 0.0f);
  for (int t = 0; t < c.vocab_size; ++t) {
    float* row = w.embedding.row(t);
    if (t < planted_id_dims) {
      row[t] = 1.0f;
    } else {
      double norm = 0;
      std::vector<double> v(planted_id_dims);
      for (auto& x : v) x = normal(rng), norm += x * x;
      for (int r = 0; r < planted_id_dims; ++r) row[r] = static_cast<float>(v[static_cast<std::size_t>(r)] / std::sqrt(norm));
    }
  }
  auto zero = [](model::Matrix& mat) { std::fill(mat.data.begin(), mat.data.end(), 0.0f); };
  for (auto& L : w.layers) {
    std::fill(L.attn_norm.begin(), L.attn_norm.end(), 1.0f);
    std::fill(L.ffn_norm.begin(), L.ffn_norm.end(), 1.0f);
    zero(L.w_down);
    zero(L.wo);
  }
  std::fill(w.final_norm.begin(), w.final_norm.end(), 1.0f);

  // RoPE inverse frequencies theta^(-2p/d).
  auto theta = [&](int p) { return std::pow(c.rope_theta, -2.0 * p / hd); };
  // Frozen dims of a head for identity r (pairs >= 4: dims 4..31 and 36..63).
  auto frozen = [&](int r) { return r < half - 4 ? 4 + r : half + 4 + (r - (half - 4)); };

  // Layer 0, KV head 0: previous-token head. Score(delta) = sum_p s_p cos((delta - 1) theta_p),
  // through q = a_p (cos theta_p, -sin theta_p) and k = (1, 0) on pair p; a_p = sqrt(hd) s_p.
  {
    auto& L = w.layers[0];
    const double s[3] = {400.0, 60.0, 100.0};
    for (int h = 0; h < 2; ++h)
      for (int r = 0; r < hd; ++r) {
        std::fill_n(L.wq.row(h * hd + r), d, 0.0f);
        L.bq[static_cast<std::size_t>(h * hd + r)] = 0.0f;
      }
    for (int r = 0; r < hd; ++r) {
      std::fill_n(L.wk.row(r), d, 0.0f);
      L.bk[static_cast<std::size_t>(r)] = 0.0f;
      std::fill_n(L.wv.row(r), d, 0.0f);
      L.bv[static_cast<std::size_t>(r)] = 0.0f;
    }
    for (int p = 0; p < 3; ++p) {
      const double a = std::sqrt(static_cast<double>(hd)) * s[p], th = theta(p);
      for (int h = 0; h < 2; ++h) {
        L.bq[static_cast<std::size_t>(h * hd + p)] = static_cast<float>(a * std::cos(th));
        L.bq[static_cast<std::size_t>(h * hd + p + half)] = static_cast<float>(-a * std::sin(th));
      }
      L.bk[static_cast<std::size_t>(p)] = 1.0f;
    }
    // Value: the token identity (h = sqrt(d) e_t in layer 0, so scale 1/sqrt(d)).
    for (int r = 0; r < planted_id_dims; ++r) L.wv.row(r)[r] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    // Output of query head 0 -> residual dims [48, 96).
    for (int r = 0; r < planted_id_dims; ++r) L.wo.row(planted_id_dims + r)[r] = 1.0f;
  }
  // Layer 1, KV head 1 (query heads 2, 3): induction head.
  {
    auto& L = w.layers[1];
    const double A = 3.0, C = 1.0;
    for (int h = 2; h < 4; ++h)
      for (int r = 0; r < hd; ++r) {
        std::fill_n(L.wq.row(h * hd + r), d, 0.0f);
        L.bq[static_cast<std::size_t>(h * hd + r)] = 0.0f;
      }
    for (int r = hd; r < 2 * hd; ++r) {
      std::fill_n(L.wk.row(r), d, 0.0f);
      L.bk[static_cast<std::size_t>(r)] = 0.0f;
      std::fill_n(L.wv.row(r), d, 0.0f);
      L.bv[static_cast<std::size_t>(r)] = 0.0f;
    }
    for (int r = 0; r < planted_id_dims; ++r) {
      L.wq.row(2 * hd + frozen(r))[r] = static_cast<float>(A);                 // current identity
      L.wk.row(hd + frozen(r))[planted_id_dims + r] = 1.0f;                    // previous identity
      L.wv.row(hd + r)[r] = 1.0f;                                              // attended identity
      L.wo.row(r)[2 * hd + r] = static_cast<float>(C);                         // back into [0, 48)
    }
  }
  return m;
}

/// A copy sample for the planted model: position 0 a filler token, the needle
/// (8 distinct tokens from [0, 24)) at positions 1..8, fillers from [24, 48)
/// up to `length` tokens, then the needle's first 4 tokens as the cue; the
/// answer is the needle's last 4 tokens. The needle is recorded as queried.
inline tasks::Sample planted_copy_sample(int length, std::uint64_t seed) {
  boost::random::mt19937_64 rng(seed);
  std::vector<int> needle;
  while (needle.size() < 8) {
    boost::random::uniform_int_distribution<int> u(0, 23);
    const int t = u(rng);
    if (std::find(needle.begin(), needle.end(), t) == needle.end()) needle.push_back(t);
  }
  boost::random::uniform_int_distribution<int> filler(24, planted_id_dims - 1);
  tasks::Sample s;
  s.kind = tasks::TaskKind::copy;
  s.task = "planted_copy";
  s.prompt.push_back(filler(rng));
  s.prompt.insert(s.prompt.end(), needle.begin(), needle.end());
  while (static_cast<int>(s.prompt.size()) < length - 8) s.prompt.push_back(filler(rng));
  s.prompt.insert(s.prompt.end(), needle.begin(), needle.begin() + 4);
  s.answer.assign(needle.begin() + 4, needle.end());
  tasks::Needle n;
  n.begin = 1;
  n.end = 9;
  n.queried = true;
  s.needles.push_back(n);
  s.context_begin = 0;
  s.context_end = static_cast<int>(s.prompt.size());
  s.max_new_tokens = 8;
  return s;
}

inline tasks::TaskSet planted_copy_tasks(int samples, int length, std::uint64_t seed) {
  tasks::TaskSet set;
  for (int i = 0; i < samples; ++i) set.samples.push_back(planted_copy_sample(length, seed + static_cast<std::uint64_t>(i)));
  return set;
}

}  // namespace bosch::test
