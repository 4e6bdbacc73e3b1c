// The Qwen3-MoE feed-forward of the CPU backend (cpu::moe_ffn) against a
// dense SwiGLU of the same active size (inner size k x F, the work one token
// does in the mixture), on a layer shaped like a scaled-down Qwen3-30B-A3B
// (hidden 1024, 32 experts of 384, top-4; the real model: 2048, 128 of 768,
// top-8). Rows: 1 (a decoded token), 64 and 512 (prefill). The counter
// "GFLOP/s" is of the active work (router + k experts, or the dense FFN), so
// the two rows of one size compare directly: their ratio is what grouping
// rows by expert costs over one dense GEMM of the same FLOPs.
//
//   build/bench/bench_cpu_moe --benchmark_min_time=0.5

#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/moe.hpp>
#include <bosch/model/config.hpp>
#include <bosch/model/weights.hpp>

#include <benchmark/benchmark.h>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <cmath>
#include <vector>

namespace {

using namespace bosch;

constexpr int hidden = 1024, experts = 32, used = 4, expert_ffn = 384;

model::Matrix random_matrix(boost::random::mt19937_64& rng, int rows, int cols) {
  boost::random::uniform_real_distribution<float> u(-1.0f, 1.0f);
  model::Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.data.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  const float scale = std::sqrt(3.0f / static_cast<float>(cols));
  for (float& x : m.data) x = u(rng) * scale;
  return m;
}

struct Layer {
  model::Config config;
  model::LayerWeights weights;
  Layer() {
    config.arch = model::Arch::qwen3moe;
    config.hidden_size = hidden;
    config.intermediate_size = used * expert_ffn;
    config.num_layers = 1;
    config.moe.num_experts = experts;
    config.moe.num_experts_used = used;
    config.moe.expert_intermediate_size = expert_ffn;
    config.moe.sparse_layers = {true};
    boost::random::mt19937_64 rng(7);
    weights.router = random_matrix(rng, experts, hidden);
    weights.gate_exps = random_matrix(rng, experts * expert_ffn, hidden);
    weights.up_exps = random_matrix(rng, experts * expert_ffn, hidden);
    weights.down_exps = random_matrix(rng, experts * hidden, expert_ffn);
    weights.w_gate = random_matrix(rng, used * expert_ffn, hidden);
    weights.w_up = random_matrix(rng, used * expert_ffn, hidden);
    weights.w_down = random_matrix(rng, hidden, used * expert_ffn);
  }
};

const Layer& layer() {
  static const Layer l;
  return l;
}

std::vector<float> input(int rows) {
  boost::random::mt19937_64 rng(11);
  boost::random::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> h(static_cast<std::size_t>(rows) * hidden);
  for (float& x : h) x = u(rng);
  return h;
}

void BM_moe_ffn(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0));
  const Layer& l = layer();
  const auto h = input(rows);
  std::vector<float> y(h.size());
  cpu::MoeScratch scratch;
  for (auto _ : state) {
    cpu::moe_ffn(h.data(), static_cast<std::size_t>(rows), l.weights, l.config, scratch, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(model::ffn_flops(l.config, 0) * rows * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_dense_ffn_same_active_size(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0));
  const Layer& l = layer();
  const auto h = input(rows);
  const auto n = static_cast<std::size_t>(rows);
  const std::size_t ff = static_cast<std::size_t>(used) * expert_ffn;
  std::vector<float> gate(n * ff), up(n * ff), y(h.size());
  for (auto _ : state) {
    cpu::linear(h.data(), n, l.weights.w_gate, nullptr, gate.data());
    cpu::linear(h.data(), n, l.weights.w_up, nullptr, up.data());
    cpu::silu_mul(gate.data(), up.data(), n * ff);
    cpu::linear(gate.data(), n, l.weights.w_down, nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  model::Config dense = l.config;
  dense.moe = {};
  state.counters["GFLOP/s"] = benchmark::Counter(model::ffn_flops(dense, 0) * rows * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(BM_moe_ffn)->Arg(1)->Arg(64)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_dense_ffn_same_active_size)->Arg(1)->Arg(64)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_MAIN();
