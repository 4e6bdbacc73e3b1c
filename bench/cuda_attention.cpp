// Throughput of the CUDA attention kernel (bosch::cuda::ops::AttentionBench),
// in useful TFLOP/s: 4 x head_dim floating-point operations per (query head,
// visible key) pair (QK^T and PV; masked tile corners not credited), divided
// by the kernel time measured with CUDA events. Compared with the dense bf16
// tensor-core peak of an H200 SXM, 989 TFLOP/s (NVIDIA's H200 datasheet, "BF16
// Tensor Core 1,979 TFLOPS with sparsity": half of it without sparsity; the
// same chip as H100 SXM). Shapes: SmolLM2-135M (9 query / 3 KV heads of 64)
// and Llama-3-8B (32 / 8 heads of 128), at 8k and 32k tokens, all heads full
// or all SWA (w = 1024, 4 sinks); tile shapes; and the SWA speedup (time of
// all-full / time of all-SWA at 32k).
//
//   bench_cuda_attention [google benchmark flags, e.g. --benchmark_format=json]
//
// Without a usable GPU it prints "SKIPPED: no CUDA device: <reason>" and
// exits with status 0.

#include <bosch/cuda/backend.hpp>
#include <bosch/cuda/ops.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

using namespace bosch;

constexpr double kPeakTflops = 989.0;  // H200 SXM, dense BF16/FP16 tensor cores

struct Shape {
  const char* name;
  int hq;
  int hkv;
  int d;
};
constexpr Shape kShapes[] = {{"smollm2", 9, 3, 64}, {"llama3_8b", 32, 8, 128}};

cuda::ops::AttentionProblem problem(const Shape& s, int n, int window, int sinks) {
  cuda::ops::AttentionProblem p;
  p.num_q_heads = s.hq;
  p.num_kv_heads = s.hkv;
  p.head_dim = s.d;
  p.lengths = {n};
  p.windows.assign(static_cast<std::size_t>(s.hkv), window);
  p.sinks = {sinks};
  return p;
}

void attention(benchmark::State& state, Shape shape, int n, int window, cuda::Options options) {
  const auto p = problem(shape, n, window, window > 0 ? 4 : 0);
  cuda::ops::AttentionBench bench(p, options, 20260407);
  double total_ms = 0;
  for (auto _ : state) {
    const double ms = bench.run(1);
    state.SetIterationTime(ms * 1e-3);
    total_ms += ms;
  }
  const double iterations = static_cast<double>(state.iterations());
  const double tflops = p.flops() * iterations / (total_ms * 1e-3) / 1e12;
  state.counters["TFLOP/s"] = tflops;
  state.counters["pct_of_989_peak"] = 100.0 * tflops / kPeakTflops;
  state.counters["ms"] = total_ms / iterations;
  state.counters["tokens"] = n;
  state.counters["window"] = window;
  state.SetLabel(std::string(shape.name) + (window > 0 ? " all-SWA w" + std::to_string(window) : " all-full") +
                 " " + cuda::to_string(options.dtype) + " tiles " + std::to_string(options.query_tile) +
                 "x" + std::to_string(options.key_tile));
}

// Time of all-full over time of all-SWA (w = 1024, 4 sinks) at n tokens.
void swa_speedup(benchmark::State& state, Shape shape, int n) {
  cuda::ops::AttentionBench full(problem(shape, n, 0, 0), cuda::Options{}, 1);
  cuda::ops::AttentionBench swa(problem(shape, n, 1024, 4), cuda::Options{}, 1);
  double t_full = 0, t_swa = 0;
  for (auto _ : state) {
    const double a = full.run(1), b = swa.run(1);
    t_full += a;
    t_swa += b;
    state.SetIterationTime((a + b) * 1e-3);
  }
  state.counters["speedup"] = t_full / t_swa;
  state.counters["ms_full"] = t_full / static_cast<double>(state.iterations());
  state.counters["ms_swa"] = t_swa / static_cast<double>(state.iterations());
  state.SetLabel(std::string(shape.name) + " attention time all-full / all-SWA w1024 at " +
                 std::to_string(n) + " tokens");
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (!cuda::device_available(&why)) {
    std::printf("SKIPPED: no CUDA device: %s\n", why.c_str());
    return 0;
  }
  std::printf("device: %s\n", cuda::device_description().c_str());
  std::printf("TFLOP/s = useful attention FLOPs (4 x head_dim per visible query-key pair and query head) / kernel time;\n"
              "pct_of_989_peak compares with the H200 SXM dense bf16 tensor-core peak of 989 TFLOP/s.\n");
  for (const Shape& s : kShapes) {
    for (int n : {8192, 32768}) {
      for (int window : {0, 1024}) {
        const std::string name = std::string("attention/") + s.name + "/n" + std::to_string(n) +
                                 (window ? "/swa1024" : "/full");
        benchmark::RegisterBenchmark(name.c_str(), attention, s, n, window, cuda::Options{})
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.3);
      }
    }
    // Tile shapes at 32k, full attention, and fp16.
    for (auto [qt, kt] : {std::pair{64, 32}, std::pair{128, 64}, std::pair{128, 32}}) {
      cuda::Options o;
      o.query_tile = qt;
      o.key_tile = kt;
      const std::string name = std::string("attention_tiles/") + s.name + "/n32768/full/q" +
                               std::to_string(qt) + "_k" + std::to_string(kt);
      benchmark::RegisterBenchmark(name.c_str(), attention, s, 32768, 0, o)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3);
    }
    cuda::Options fp16;
    fp16.dtype = cuda::DType::fp16;
    benchmark::RegisterBenchmark((std::string("attention_fp16/") + s.name + "/n32768/full").c_str(),
                                 attention, s, 32768, 0, fp16)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.3);
    benchmark::RegisterBenchmark((std::string("swa_speedup/") + s.name + "/n32768").c_str(),
                                 swa_speedup, s, 32768)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(3);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
