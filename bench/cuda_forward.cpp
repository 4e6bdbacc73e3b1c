// Forward-pass throughput of the CUDA backend: tokens per second of
// cuda::Backend::forward (embedding, all layers, logits at the last position)
// at 8k and 32k tokens, with every head full or every head SWA (w = 1024, no
// sinks), the SWA speedup (time all-full / time all-SWA), and a batch of four
// sequences under four different masks (forward_batch) against four separate
// forwards. TFLOP/s counts the model's useful operations (Backend::flops:
// 2 x weights per token, attention 4 x head_dim per visible pair, logits) and
// is compared with the H200 SXM dense bf16 peak of 989 TFLOP/s.
//
//   bench_cuda_forward [google benchmark flags, e.g. --benchmark_format=json]
//
// The model is $BOSCH_MODEL (a GGUF file or HF directory) when set and
// loadable; otherwise random weights of SmolLM2-135M's shape (30 layers,
// hidden 576, 9 query / 3 KV heads of 64, FFN 1536, vocab 49152) - the output
// says which. Times are wall-clock per call (each call synchronizes).
// Without a usable GPU it prints "SKIPPED: no CUDA device: <reason>" and
// exits with status 0.

#include "random_model.hpp"

#include <bosch/cuda/backend.hpp>
#include <bosch/model/model.hpp>

#include <benchmark/benchmark.h>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace bosch;
using clock_type = std::chrono::steady_clock;

constexpr double kPeakTflops = 989.0;  // H200 SXM, dense BF16 tensor cores

std::unique_ptr<model::Model> g_model;
std::unique_ptr<cuda::Backend> g_backend;

std::vector<int> random_tokens(int n, int vocab, std::uint64_t seed) {
  boost::random::mt19937_64 rng(seed);
  boost::random::uniform_int_distribution<int> u(0, vocab - 1);
  std::vector<int> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = u(rng);
  return t;
}

AttentionWindows all_swa(int w) {
  return AttentionWindows::from_mask(HeadMask::filled(g_model->config.layout(), true), w, 0);
}

void forward(benchmark::State& state, int n, int window) {
  const auto tokens = random_tokens(n, g_model->config.vocab_size, 1);
  const std::vector<int> positions = {n - 1};
  const AttentionWindows w = window > 0 ? all_swa(window) : AttentionWindows::full();
  for (auto _ : state) {
    auto logits = g_backend->forward(tokens, w, positions);
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(n, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["TFLOP/s"] = benchmark::Counter(g_backend->flops(n, 1, w) / 1e12,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens"] = n;
  state.SetLabel(window > 0 ? "all-SWA w" + std::to_string(window) : "all-full");
}

double seconds_of(const std::vector<int>& tokens, const AttentionWindows& w) {
  const std::vector<int> positions = {static_cast<int>(tokens.size()) - 1};
  const auto t0 = clock_type::now();
  auto logits = g_backend->forward(tokens, w, positions);
  benchmark::DoNotOptimize(logits.data());
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Forward time all-full / all-SWA at n tokens.
void swa_speedup(benchmark::State& state, int n) {
  const auto tokens = random_tokens(n, g_model->config.vocab_size, 2);
  const AttentionWindows full = AttentionWindows::full(), swa = all_swa(1024);
  double t_full = 0, t_swa = 0;
  for (auto _ : state) {
    const double a = seconds_of(tokens, full), b = seconds_of(tokens, swa);
    t_full += a;
    t_swa += b;
    state.SetIterationTime(a + b);
  }
  state.counters["speedup"] = t_full / t_swa;
  state.counters["s_full"] = t_full / static_cast<double>(state.iterations());
  state.counters["s_swa"] = t_swa / static_cast<double>(state.iterations());
  state.SetLabel("forward time all-full / all-SWA w1024 at " + std::to_string(n) + " tokens");
}

// Four sequences of n tokens under four masks: one forward_batch vs four forwards.
void batch(benchmark::State& state, int n, bool batched) {
  const HeadLayout layout = g_model->config.layout();
  std::vector<std::vector<int>> sequences;
  std::vector<std::vector<int>> positions;
  std::vector<AttentionWindows> windows;
  for (int b = 0; b < 4; ++b) {
    sequences.push_back(random_tokens(n, g_model->config.vocab_size, 10 + b));
    positions.push_back({n - 1});
    HeadMask mask(layout);
    for (std::size_t i = 0; i < mask.size(); ++i) mask.set_flat(i, (i + static_cast<std::size_t>(b)) % 4 != 0);
    windows.push_back(AttentionWindows::from_mask(mask, 1024));
  }
  std::vector<const AttentionWindows*> ptrs;
  for (const auto& w : windows) ptrs.push_back(&w);
  for (auto _ : state) {
    if (batched) {
      auto r = g_backend->forward_batch(sequences, ptrs, positions);
      benchmark::DoNotOptimize(r.data());
    } else {
      for (int b = 0; b < 4; ++b) {
        auto r = g_backend->forward(sequences[b], windows[b], positions[b]);
        benchmark::DoNotOptimize(r.data());
      }
    }
  }
  state.counters["tokens/s"] = benchmark::Counter(4.0 * n, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(batched ? "forward_batch" : "4 x forward") + ", 4 masks (75% SWA w1024)");
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (!cuda::device_available(&why)) {
    std::printf("SKIPPED: no CUDA device: %s\n", why.c_str());
    return 0;
  }
  std::printf("device: %s\n", cuda::device_description().c_str());
  std::string note;
  if (const char* path = std::getenv("BOSCH_MODEL")) {
    try {
      g_model = std::make_unique<model::Model>(model::load(path));
      note = std::string("model: ") + path + " (" + g_model->config.name + ")";
    } catch (const std::exception& e) {
      note = std::string("model: BOSCH_MODEL could not be loaded (") + e.what() + "); ";
    }
  }
  if (!g_model) {
    g_model = std::make_unique<model::Model>(bench::random_model(bench::smollm2_config()));
    note += "model: random weights of SmolLM2-135M's shape";
  }
  std::printf("%s\n", note.c_str());
  try {
    g_backend = std::make_unique<cuda::Backend>(*g_model);
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
  std::printf("weights on the device: %.1f MiB (%s)\n",
              static_cast<double>(g_backend->weight_bytes()) / (1024.0 * 1024.0),
              cuda::to_string(g_backend->options().dtype));
  std::printf("tokens/s = tokens / wall time of one forward (logits at the last position);\n"
              "TFLOP/s = Backend::flops / time, to compare with the H200 SXM dense bf16 peak of %.0f TFLOP/s.\n",
              kPeakTflops);
  for (int n : {8192, 32768})
    for (int window : {0, 1024})
      benchmark::RegisterBenchmark(("forward/n" + std::to_string(n) + (window ? "/swa1024" : "/full")).c_str(),
                                   forward, n, window)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.5);
  benchmark::RegisterBenchmark("swa_speedup/n32768", swa_speedup, 32768)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(3);
  for (bool batched : {true, false})
    benchmark::RegisterBenchmark((std::string("batch4/n4096/") + (batched ? "forward_batch" : "separate")).c_str(),
                                 batch, 4096, batched)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.5);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_backend.reset();
  return 0;
}
