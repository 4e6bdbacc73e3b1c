// Random weights of SmolLM2-135M's shape for the benchmarks that must run
// where the real model cannot be fetched (a GPU machine without a network):
// bench_cuda_forward, bench_kv_cache --random-weights and bench_cpu_forward
// when the default model is not cached.
#pragma once

#include <bosch/model/model.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <cmath>
#include <cstddef>
#include <vector>

namespace bosch::bench {

/// SmolLM2-135M's configuration: 30 layers, hidden 576, 9 query / 3 KV heads
/// of 64, FFN 1536, vocab 49152, interleaved RoPE (theta 1e5), tied output.
inline model::Config smollm2_config() {
  model::Config c;
  c.arch = model::Arch::llama;
  c.name = "random weights, SmolLM2-135M shape";
  c.vocab_size = 49152;
  c.hidden_size = 576;
  c.intermediate_size = 1536;
  c.num_layers = 30;
  c.num_heads = 9;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  c.max_position = 32768;
  c.rms_eps = 1e-5;
  c.rope_theta = 100000.0;
  c.rope_style = model::RopeStyle::interleaved;
  c.tie_embeddings = true;
  return c;
}

/// Random weights, uniform with variance 1/in (unit-scale activations); a
/// 2^20-value pool repeated with a shift keeps construction fast.
inline model::Model random_model(const model::Config& c) {
  boost::random::mt19937_64 rng(20260407);
  boost::random::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> pool(std::size_t{1} << 20);
  for (float& f : pool) f = u(rng);
  std::size_t at = 0;
  auto values = [&](std::size_t n, double scale) {
    std::vector<float> v(n);
    for (auto& x : v) {
      x = static_cast<float>(pool[at % pool.size()] * scale);
      at += 7919;
    }
    return v;
  };
  auto matrix = [&](int rows, int cols) {
    model::Matrix m;
    m.rows = rows;
    m.cols = cols;
    m.data = values(static_cast<std::size_t>(rows) * cols, std::sqrt(3.0 / cols));
    return m;
  };
  auto gains = [&](int n) {
    auto v = values(static_cast<std::size_t>(n), 0.1);
    for (auto& x : v) x += 1.0f;
    return v;
  };
  model::Model m;
  m.config = c;
  const int q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  m.weights.embedding = matrix(c.vocab_size, c.hidden_size);
  for (int l = 0; l < c.num_layers; ++l) {
    model::LayerWeights w;
    w.attn_norm = gains(c.hidden_size);
    w.wq = matrix(q, c.hidden_size);
    w.wk = matrix(kv, c.hidden_size);
    w.wv = matrix(kv, c.hidden_size);
    w.wo = matrix(c.hidden_size, q);
    w.ffn_norm = gains(c.hidden_size);
    w.w_gate = matrix(c.intermediate_size, c.hidden_size);
    w.w_up = matrix(c.intermediate_size, c.hidden_size);
    w.w_down = matrix(c.hidden_size, c.intermediate_size);
    m.weights.layers.push_back(std::move(w));
  }
  m.weights.final_norm = gains(c.hidden_size);
  return m;
}

}  // namespace bosch::bench
