// Tiny random-weight decoders built in memory for the CPU backend tests.
#pragma once

#include <bosch/model/model.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace bosch::test {

/// A small configuration: 2 layers, hidden 32, 4 query heads of 8, `kv` KV heads.
inline model::Config tiny_config(model::Arch arch = model::Arch::llama, int kv = 2) {
  model::Config c;
  c.arch = arch;
  c.name = std::string("tiny-") + model::to_string(arch);
  c.vocab_size = 61;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = kv;
  c.head_dim = 8;
  c.max_position = 256;
  c.rms_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.rope_style = arch == model::Arch::llama ? model::RopeStyle::interleaved : model::RopeStyle::neox;
  c.tie_embeddings = true;
  c.qkv_bias = arch == model::Arch::qwen2;
  c.qk_norm = arch == model::Arch::qwen3 || arch == model::Arch::qwen3moe;
  return c;
}

/// tiny_config(qwen3moe, kv) with experts: `layers` layers, all sparse but
/// those in `dense` (which keep the dense FFN of 48), `experts` experts of
/// 24 each, top-`used`, renormalized when `norm`.
inline model::Config tiny_moe_config(int kv = 2, int experts = 4, int used = 2, bool norm = true, int layers = 3,
                                     std::vector<int> dense = {1}) {
  model::Config c = tiny_config(model::Arch::qwen3moe, kv);
  c.num_layers = layers;
  c.moe.num_experts = experts;
  c.moe.num_experts_used = used;
  c.moe.expert_intermediate_size = 24;
  c.moe.norm_topk_prob = norm;
  c.moe.sparse_layers.assign(static_cast<std::size_t>(layers), true);
  for (int l : dense) c.moe.sparse_layers[static_cast<std::size_t>(l)] = false;
  return c;
}

namespace detail {
inline std::vector<float> uniform(boost::random::mt19937_64& rng, std::size_t n, double lo, double hi) {
  boost::random::uniform_real_distribution<double> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(u(rng));
  return v;
}
inline model::Matrix matrix(boost::random::mt19937_64& rng, int rows, int cols, double gain = 1.0) {
  // Uniform with variance gain^2 / cols: outputs of unit-variance inputs keep unit scale.
  const double a = gain * std::sqrt(3.0 / cols);
  model::Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.data = uniform(rng, static_cast<std::size_t>(rows) * cols, -a, a);
  return m;
}
}  // namespace detail

/// Random weights for `config` (seeded, Boost.Random: the same on every
/// platform). Q gets gain 2 so that attention is far from uniform; norm gains
/// are 1 +- 0.2; biases (qkv_bias) +- 0.5; Q/K norm gains (qk_norm) 1 +- 0.3;
/// an untied output projection when !config.tie_embeddings. A sparse layer
/// (config.moe) gets a router of gain 2 (routing far from uniform) and
/// stacked experts of gain 1 instead of the dense FFN.
inline model::Model tiny_model(const model::Config& config, std::uint64_t seed) {
  boost::random::mt19937_64 rng(seed);
  model::Model m;
  m.config = config;
  auto& w = m.weights;
  const int d = config.hidden_size, hd = config.head_dim;
  const int qd = config.num_heads * hd, kvd = config.num_kv_heads * hd, ff = config.intermediate_size;
  w.embedding.rows = config.vocab_size;
  w.embedding.cols = d;
  w.embedding.data = detail::uniform(rng, static_cast<std::size_t>(config.vocab_size) * d, -1.0, 1.0);
  for (int l = 0; l < config.num_layers; ++l) {
    model::LayerWeights L;
    L.attn_norm = detail::uniform(rng, d, 0.8, 1.2);
    L.wq = detail::matrix(rng, qd, d, 2.0);
    L.wk = detail::matrix(rng, kvd, d, 1.0);
    L.wv = detail::matrix(rng, kvd, d, 1.0);
    L.wo = detail::matrix(rng, d, qd, 1.0);
    if (config.qkv_bias) {
      L.bq = detail::uniform(rng, qd, -0.5, 0.5);
      L.bk = detail::uniform(rng, kvd, -0.5, 0.5);
      L.bv = detail::uniform(rng, kvd, -0.5, 0.5);
    }
    if (config.qk_norm) {
      L.q_norm = detail::uniform(rng, hd, 0.7, 1.3);
      L.k_norm = detail::uniform(rng, hd, 0.7, 1.3);
    }
    L.ffn_norm = detail::uniform(rng, d, 0.8, 1.2);
    if (config.is_sparse_layer(l)) {
      const int E = config.moe.num_experts, F = config.moe.expert_intermediate_size;
      L.router = detail::matrix(rng, E, d, 2.0);
      L.gate_exps = detail::matrix(rng, E * F, d, 1.0);
      L.up_exps = detail::matrix(rng, E * F, d, 1.0);
      L.down_exps = detail::matrix(rng, E * d, F, 1.0);
    } else {
      L.w_gate = detail::matrix(rng, ff, d, 1.0);
      L.w_up = detail::matrix(rng, ff, d, 1.0);
      L.w_down = detail::matrix(rng, d, ff, 1.0);
    }
    w.layers.push_back(std::move(L));
  }
  w.final_norm = detail::uniform(rng, d, 0.8, 1.2);
  if (!config.tie_embeddings) w.lm_head = detail::matrix(rng, config.vocab_size, d, 1.0);
  return m;
}

/// n random token ids in [0, vocab).
inline std::vector<int> random_tokens(int n, int vocab, std::uint64_t seed) {
  boost::random::mt19937_64 rng(seed);
  boost::random::uniform_int_distribution<int> u(0, vocab - 1);
  std::vector<int> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = u(rng);
  return t;
}

/// Positions 0 .. n-1.
inline std::vector<int> all_positions(int n) {
  std::vector<int> p(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = i;
  return p;
}

}  // namespace bosch::test
