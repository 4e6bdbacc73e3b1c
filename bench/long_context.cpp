// Long-context scoring on the CPU (issue 50): one forward of n prompt tokens
// with logits at the last position (the scoring path and the prefill) at
// each --tokens length, for all-full attention and for masks at each
// --ratios SWA ratio with window --window, in fp32 and bf16; beside the
// plain Eigen GEMM and the bf16 product of the FFN's shape measured in the
// same run, so each row's rate reads as a share of the GEMM rate of its
// precision ("what the FLOP count allows": the row's FLOPs at that rate).
//
//   bench_long_context [--tokens=2048,8192,16384,32768] [--window=1024] [--ratios=0,0.5,0.75]
//                      [--precisions=fp32,bf16] [--threads=T] [google benchmark flags]
//
// Each row runs once (a 32k-token forward takes minutes); the row's peak
// memory is the process's peak resident set during it (VmHWM, reset before
// the row through /proc/self/clear_refs), printed with the resident set
// before it (weights, the packed bf16 weights and the mapped GGUF). Freed
// memory stays with the allocator, so for each row's own peak run one length
// and precision per process (scripts/long-context-bench does). Rates per
// CPU-second beside the wall rates: on a shared machine the wall rates of
// every row drop together. The model is $BOSCH_MODEL or Qwen2.5-Coder-0.5B-Instruct from the
// default cache path of scripts/fetch-model (`--model qwen2.5-coder-0.5b`);
// trained to 32768 tokens. Masks at ratio r make round(r x KV heads) heads
// SWA, spread evenly over the layers (the cost depends on the count only).

#include <bosch/cpu/backend.hpp>
#include <bosch/cpu/bf16.hpp>
#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/precision.hpp>
#include <bosch/model/model.hpp>

#include "cpu_time.hpp"

#include <benchmark/benchmark.h>
#include <omp.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace bosch;
using clock_type = std::chrono::steady_clock;

std::unique_ptr<model::Model> g_model;
std::vector<int> g_lengths{2048, 8192, 16384, 32768};
std::vector<double> g_ratios{0.0, 0.5, 0.75};
std::vector<cpu::Precision> g_precisions{cpu::Precision::fp32, cpu::Precision::bf16};
int g_window = 1024;

struct Row {
  int n = 0;
  double ratio = 0;
  cpu::Precision precision = cpu::Precision::fp32;
  double seconds = 0, cpu_seconds = 0, flops = 0;
  double rss_before_mib = 0, peak_mib = 0;
};
std::vector<Row> g_rows;
double g_gemm_rate = 0, g_bf16_rate = 0;  // GFLOP/s wall

using bench::process_cpu_seconds;

/// A field of /proc/self/status in MiB ("VmHWM", "VmRSS").
double status_mib(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::atof(line.c_str() + key.size()) / 1024.0;
  return -1;
}

void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

HeadMask spread_mask(const HeadLayout& layout, double ratio) {
  HeadMask m(layout);
  const int H = layout.num_kv_heads, L = layout.num_layers;
  const auto total = static_cast<int>(std::lround(ratio * L * H));
  for (int l = 0; l < L; ++l) {
    const int upto = (l + 1) * total / L, from = l * total / L;
    for (int h = 0; h < upto - from; ++h) m.set(l, h, true);
  }
  return m;
}

std::vector<int> tokens(int n, int vocab) {
  std::vector<int> t(static_cast<std::size_t>(n));
  std::uint64_t x = 88172645463325252ull;
  for (auto& v : t) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v = static_cast<int>(x % static_cast<std::uint64_t>(vocab));
  }
  return t;
}

void BM_row(benchmark::State& state, int n, double ratio, cpu::Precision precision) {
  const cpu::Backend backend(*g_model, {.precision = precision});
  const auto toks = tokens(n, g_model->config.vocab_size);
  const std::vector<int> last{n - 1};
  const auto windows = ratio > 0 ? AttentionWindows::from_mask(spread_mask(g_model->config.layout(), ratio), g_window, 0)
                                 : AttentionWindows::full();
  Row row{n, ratio, precision};
  row.flops = backend.flops(n, 1, windows);
  for (auto _ : state) {
    row.rss_before_mib = status_mib("VmRSS");
    reset_peak();
    const double c0 = process_cpu_seconds();
    const auto t0 = clock_type::now();
    benchmark::DoNotOptimize(backend.forward(toks, windows, last));
    row.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    row.cpu_seconds = process_cpu_seconds() - c0;
    row.peak_mib = status_mib("VmHWM");
    state.SetIterationTime(row.seconds);
  }
  state.counters["tokens/s"] = n / row.seconds;
  state.counters["GFLOP/s"] = row.flops / row.seconds / 1e9;
  state.counters["peak_MiB"] = row.peak_mib;
  g_rows.push_back(row);
}

void BM_gemms(benchmark::State& state) {
  // The FFN up projection's shape at 4096 rows: [4096, hidden] x [hidden, intermediate].
  const auto& c = g_model->config;
  const int rows = 4096;
  cpu::ReferenceGemm gemm(rows, c.hidden_size, c.intermediate_size);
  model::Matrix w;
  w.rows = c.intermediate_size;
  w.cols = c.hidden_size;
  w.data.assign(static_cast<std::size_t>(w.rows) * w.cols, 0.01f);
  const auto packed = cpu::pack_bf16(w);
  const auto kernel = cpu::choose_precision(cpu::Precision::bf16).kernel;
  std::vector<float> x(static_cast<std::size_t>(rows) * c.hidden_size, 0.5f), y(static_cast<std::size_t>(rows) * w.rows);
  cpu::Bf16Vector xb(static_cast<std::size_t>(rows) * cpu::bf16_stride(c.hidden_size));
  const double flops = 2.0 * rows * c.hidden_size * c.intermediate_size;
  double best_fp32 = 1e30, best_bf16 = 1e30;
  gemm.run();
  for (auto _ : state) {
    auto t0 = clock_type::now();
    gemm.run();
    best_fp32 = std::min(best_fp32, std::chrono::duration<double>(clock_type::now() - t0).count());
    t0 = clock_type::now();
    cpu::convert_bf16(x.data(), rows, c.hidden_size, xb.data(), kernel);
    cpu::gemm_bf16(xb.data(), rows, packed, nullptr, y.data(), kernel);
    best_bf16 = std::min(best_bf16, std::chrono::duration<double>(clock_type::now() - t0).count());
    state.SetIterationTime(best_fp32 + best_bf16);
  }
  benchmark::DoNotOptimize(gemm.checksum());
  benchmark::DoNotOptimize(y.data());
  g_gemm_rate = flops / best_fp32 / 1e9;
  g_bf16_rate = flops / best_bf16 / 1e9;
  state.counters["fp32_GFLOP/s"] = g_gemm_rate;
  state.counters["bf16_GFLOP/s"] = g_bf16_rate;
}

template <class T, class F>
std::vector<T> parse_list(const char* s, F f) {
  std::vector<T> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(f(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--tokens=", 9) == 0)
      g_lengths = parse_list<int>(argv[i] + 9, [](const std::string& s) { return std::stoi(s); });
    else if (std::strncmp(argv[i], "--ratios=", 9) == 0)
      g_ratios = parse_list<double>(argv[i] + 9, [](const std::string& s) { return std::stod(s); });
    else if (std::strncmp(argv[i], "--precisions=", 13) == 0)
      g_precisions = parse_list<cpu::Precision>(argv[i] + 13, [](const std::string& s) { return cpu::parse_precision(s); });
    else if (std::strncmp(argv[i], "--window=", 9) == 0)
      g_window = std::atoi(argv[i] + 9);
    else if (std::strncmp(argv[i], "--threads=", 10) == 0)
      threads = std::atoi(argv[i] + 10);
    else
      rest.push_back(argv[i]);
  }
  if (threads > 0) omp_set_num_threads(threads);
  for (int n : g_lengths)
    if (n < 16) {
      std::fprintf(stderr, "bench_long_context: every --tokens length must be >= 16\n");
      return 2;
    }
  for (double r : g_ratios)
    if (!(r >= 0 && r < 1)) {
      std::fprintf(stderr, "bench_long_context: --ratios must be in [0, 1)\n");
      return 2;
    }
  argc = static_cast<int>(rest.size());
  argv = rest.data();
  std::filesystem::path p;
  if (const char* env = std::getenv("BOSCH_MODEL")) {
    p = env;
  } else {
    const char* home = std::getenv("HOME");
    p = std::filesystem::path(home ? home : "/tmp") / ".cache/bosch/models/Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf";
  }
  try {
    g_model = std::make_unique<model::Model>(model::load(p));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_long_context: cannot load %s (%s); fetch it with scripts/fetch-model --model qwen2.5-coder-0.5b or set BOSCH_MODEL\n",
                 p.string().c_str(), e.what());
    return 2;
  }
  const auto& c = g_model->config;
  std::printf("model %s: %s, %d layers, hidden %d, %d query / %d KV heads x %d, FFN %d; window %d; %d OpenMP threads\n",
              p.string().c_str(), c.name.c_str(), c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim,
              c.intermediate_size, g_window, omp_get_max_threads());
  std::printf("bf16 runs %s\n", cpu::choose_precision(cpu::Precision::bf16).name().c_str());

  benchmark::RegisterBenchmark("gemm_fp32_and_bf16", BM_gemms)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
  for (int n : g_lengths)
    for (auto prec : g_precisions)
      for (double r : g_ratios) {
        char name[96];
        std::snprintf(name, sizeof name, "forward/%d/%s/rho%.3g", n, prec == cpu::Precision::fp32 ? "fp32" : "bf16", r);
        benchmark::RegisterBenchmark(name, BM_row, n, r, prec)->UseManualTime()->Unit(benchmark::kSecond)->Iterations(1);
      }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  double load[1] = {0};
  getloadavg(load, 1);
  std::printf("\nsummary (load average %.2f after the run; GEMM yardsticks [4096 x %d] x [%d x %d]: fp32 Eigen %.1f GFLOP/s, "
              "bf16 %.1f GFLOP/s)\n\n",
              load[0], c.hidden_size, c.hidden_size, c.intermediate_size, g_gemm_rate, g_bf16_rate);
  std::printf("| tokens | precision | SWA ratio | seconds | tokens/s | CPU s | GFLOP | GFLOP/s | GFLOP per CPU-s | %% of the GEMM rate | time at the GEMM rate (s) | peak RSS (MiB) | RSS before (MiB) |\n");
  std::printf("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& r : g_rows) {
    const double rate = r.precision == cpu::Precision::fp32 ? g_gemm_rate : g_bf16_rate;
    const double gf = r.flops / 1e9;
    std::printf("| %d | %s | %.3g | %.2f | %.0f | %.2f | %.0f | %.1f | %.1f | %.0f%% | %.2f | %.0f | %.0f |\n", r.n,
                r.precision == cpu::Precision::fp32 ? "fp32" : "bf16", r.ratio, r.seconds, r.n / r.seconds,
                r.cpu_seconds, gf, gf / r.seconds, gf / std::max(r.cpu_seconds, 1e-9), rate > 0 ? 100.0 * gf / r.seconds / rate : 0.0,
                rate > 0 ? gf / rate : 0.0, r.peak_mib, r.rss_before_mib);
  }
  return 0;
}
