// CPU forward-pass throughput on SmolLM2-135M at 2048 tokens, beside a plain
// Eigen GEMM measured in the same run; the bf16 forward (cpu/precision.hpp,
// docs/precision.md) against the fp32 forward; attention time all-SWA
// (w = n/16) against all-full; peak memory.
//
//   bench_cpu_forward [--tokens=N] [--threads=T] [--rounds=R] [google benchmark flags]
//
// The precision comparison (the search's case: --tokens=512) runs R rounds
// (default 5) of four measurements interleaved, the order reversed every
// other round: the fp32 forward, the bf16 forward (Precision::bf16: the
// AVX512_BF16 kernel, or the emulation on a CPU without it), the plain Eigen
// GEMM and the bf16 product of the same shape (input rounding included). Its
// ratios are medians of the per-round ratios, so load that drifts during the
// run cancels; the dispatch's choice for Precision::automatic is printed
// with its reason.
//
// --threads sets the OpenMP thread count of everything measured (the plain
// GEMM included); default: OpenMP's (all cores). Besides wall-clock rates
// the summary gives rates per CPU-second (process user+system time of the
// best iteration), and the load average before and after: on a machine
// shared with other work the wall-clock rates of all rows drop together,
// while the per-CPU-second rates stay comparable (spin-waiting counts as CPU
// time, for the plain GEMM's threads as for ours).
// The model is $BOSCH_MODEL or the default cache path of scripts/fetch-model;
// when it is absent (or cannot be loaded) a random-weight model of the same
// shape is used, and the output says so. After the Google Benchmark table a
// summary states each number's unit and what it is compared with.

#include <bosch/cpu/attention.hpp>
#include <bosch/cpu/backend.hpp>
#include <bosch/cpu/bf16.hpp>
#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/precision.hpp>
#include <bosch/model/model.hpp>

#include "cpu_time.hpp"
#include "random_model.hpp"

#include <benchmark/benchmark.h>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace bosch;
using clock_type = std::chrono::steady_clock;

int g_tokens = 2048;
int g_rounds = 5;
std::unique_ptr<model::Model> g_model;
std::string g_model_note;
std::map<std::string, double> g_best;  // benchmark name -> best seconds per iteration
std::map<std::string, double> g_cpu;   // benchmark name -> CPU seconds of that iteration

std::vector<float> uniform(boost::random::mt19937_64& rng, std::size_t n, double a) {
  boost::random::uniform_real_distribution<double> u(-a, a);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(u(rng));
  return v;
}

model::Matrix random_matrix(boost::random::mt19937_64& rng, int rows, int cols) {
  model::Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.data = uniform(rng, static_cast<std::size_t>(rows) * cols, std::sqrt(3.0 / cols));
  return m;
}

void load_model() {
  std::filesystem::path p;
  if (const char* env = std::getenv("BOSCH_MODEL")) {
    p = env;
  } else {
    const char* home = std::getenv("HOME");
    p = std::filesystem::path(home ? home : "/tmp") / ".cache/bosch/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  }
  if (std::filesystem::exists(p)) {
    try {
      g_model = std::make_unique<model::Model>(model::load(p));
      g_model_note = "model " + p.string() + " (dequantized to fp32)";
      return;
    } catch (const std::exception& e) {
      g_model_note = std::string("could not load ") + p.string() + " (" + e.what() + "); ";
    }
  } else {
    g_model_note = "default model not found at " + p.string() + "; ";
  }
  g_model = std::make_unique<model::Model>(bench::random_model(bench::smollm2_config()));
  g_model_note += "using RANDOM weights of SmolLM2-135M's shape";
}

std::vector<int> tokens(int n, int vocab) {
  boost::random::mt19937_64 rng(7);
  boost::random::uniform_int_distribution<int> u(0, vocab - 1);
  std::vector<int> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = u(rng);
  return t;
}

using bench::process_cpu_seconds;

/// Runs `body` per iteration, records the best wall time under `name` and
/// the process CPU time of that iteration.
template <class F>
void timed(benchmark::State& state, const std::string& name, F&& body) {
  double best = std::numeric_limits<double>::infinity(), best_cpu = 0;
  for (auto _ : state) {
    const double c0 = process_cpu_seconds();
    const auto t0 = clock_type::now();
    body();
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    const double c = process_cpu_seconds() - c0;
    if (s < best) {
      best = s;
      best_cpu = c;
    }
    state.SetIterationTime(s);
  }
  g_best[name] = best;
  g_cpu[name] = best_cpu;
}

double load_average() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

HeadMask all_swa(const model::Config& c) { return HeadMask::filled(c.layout(), true); }

void BM_reference_gemm(benchmark::State& state) {
  // The FFN up projection's size: [n, hidden] x [hidden, intermediate].
  const auto& c = g_model->config;
  cpu::ReferenceGemm gemm(g_tokens, c.hidden_size, c.intermediate_size);
  gemm.run();  // warm up
  timed(state, "gemm", [&] {
    gemm.run();
    benchmark::DoNotOptimize(gemm.checksum());
  });
  state.counters["GFLOP/s"] = gemm.flops() / g_best["gemm"] / 1e9;
}

/// The bf16 product of the plain GEMM's shape: [n, hidden] x [hidden, intermediate]
/// (the FFN up projection), input rounding to bf16 included.
struct Bf16Gemm {
  cpu::PackedMatrix w;
  std::vector<float> x, y;
  cpu::Bf16Vector xb;
  cpu::Bf16Kernel kernel;
  Bf16Gemm(int n, int k, int m, cpu::Bf16Kernel kern) : kernel(kern) {
    boost::random::mt19937_64 rng(5);
    w = cpu::pack_bf16(random_matrix(rng, m, k));
    x = uniform(rng, static_cast<std::size_t>(n) * k, 1.0);
    y.resize(static_cast<std::size_t>(n) * m);
    xb.resize(static_cast<std::size_t>(n) * cpu::bf16_stride(k));
  }
  void run() {
    const std::size_t n = x.size() / static_cast<std::size_t>(w.cols);
    cpu::convert_bf16(x.data(), n, w.cols, xb.data(), kernel);
    cpu::gemm_bf16(xb.data(), n, w, nullptr, y.data(), kernel);
  }
  double flops() const { return 2.0 * static_cast<double>(x.size()) * w.rows; }
};

cpu::Bf16Kernel bf16_kernel() { return cpu::choose_precision(cpu::Precision::bf16).kernel; }

void BM_bf16_gemm(benchmark::State& state) {
  const auto& c = g_model->config;
  Bf16Gemm gemm(g_tokens, c.hidden_size, c.intermediate_size, bf16_kernel());
  gemm.run();  // warm up
  timed(state, "bf16_gemm", [&] {
    gemm.run();
    benchmark::DoNotOptimize(gemm.y.data());
  });
  state.counters["GFLOP/s"] = gemm.flops() / g_best["bf16_gemm"] / 1e9;
}

/// Wall and CPU seconds of each interleaved measurement, per round.
std::map<std::string, std::vector<std::pair<double, double>>> g_rounds_time;

void BM_precision_interleaved(benchmark::State& state) {
  const auto& c = g_model->config;
  const cpu::Backend fp32(*g_model);
  const cpu::Backend bf16(*g_model, {.precision = cpu::Precision::bf16});
  cpu::ReferenceGemm gemm(g_tokens, c.hidden_size, c.intermediate_size);
  Bf16Gemm bgemm(g_tokens, c.hidden_size, c.intermediate_size, bf16.precision().kernel);
  const auto toks = tokens(g_tokens, c.vocab_size);
  const std::vector<int> pos{g_tokens - 1};
  const std::vector<std::pair<std::string, std::function<void()>>> items{
      {"fp32 forward", [&] { benchmark::DoNotOptimize(fp32.forward(toks, AttentionWindows::full(), pos)); }},
      {"bf16 forward", [&] { benchmark::DoNotOptimize(bf16.forward(toks, AttentionWindows::full(), pos)); }},
      {"plain GEMM", [&] {
         gemm.run();
         benchmark::DoNotOptimize(gemm.checksum());
       }},
      {"bf16 GEMM", [&] {
         bgemm.run();
         benchmark::DoNotOptimize(bgemm.y.data());
       }}};
  for (const auto& [name, body] : items) body();  // warm up
  int round = 0;
  for (auto _ : state) {
    double total = 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto& [name, body] = items[round % 2 == 0 ? i : items.size() - 1 - i];
      const double c0 = process_cpu_seconds();
      const auto t0 = clock_type::now();
      body();
      const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
      g_rounds_time[name].emplace_back(s, process_cpu_seconds() - c0);
      total += s;
    }
    state.SetIterationTime(total);
    ++round;
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Median over rounds of a's time / b's time (wall time, or CPU time when cpu_time).
double round_ratio(const std::string& a, const std::string& b, bool cpu_time) {
  const auto& ta = g_rounds_time[a];
  const auto& tb = g_rounds_time[b];
  std::vector<double> r;
  for (std::size_t i = 0; i < std::min(ta.size(), tb.size()); ++i) {
    const double x = cpu_time ? ta[i].second : ta[i].first, y = cpu_time ? tb[i].second : tb[i].first;
    if (y > 0) r.push_back(x / y);
  }
  return median(r);
}

double round_median(const std::string& a, bool cpu_time) {
  std::vector<double> v;
  for (const auto& [w, c] : g_rounds_time[a]) v.push_back(cpu_time ? c : w);
  return median(v);
}

void print_precision_summary() {
  if (g_rounds_time.empty()) return;
  const auto& c = g_model->config;
  const auto automatic = cpu::choose_precision(cpu::Precision::automatic);
  const auto forced = cpu::choose_precision(cpu::Precision::bf16);
  std::printf("  precision: automatic -> %s (%s)\n", automatic.name().c_str(), automatic.reason.c_str());
  std::printf("  precision comparison, %zu interleaved rounds at %d tokens (medians; the bf16 rows run %s):\n",
              g_rounds_time["fp32 forward"].size(), g_tokens, forced.name().c_str());
  const double gemm_flops = 2.0 * g_tokens * c.hidden_size * c.intermediate_size;
  for (const char* name : {"fp32 forward", "bf16 forward"}) {
    const double w = round_median(name, false), cpu_s = round_median(name, true);
    std::printf("    %-12s %.3f s wall, %.0f tokens/s; %.3f CPU-s, %.0f tokens per CPU-second\n", name, w,
                g_tokens / w, cpu_s, g_tokens / std::max(cpu_s, 1e-9));
  }
  for (const char* name : {"plain GEMM", "bf16 GEMM"}) {
    const double w = round_median(name, false), cpu_s = round_median(name, true);
    std::printf("    %-12s [%d x %d] x [%d x %d]: %.2f ms wall, %.1f GFLOP/s; %.1f GFLOP per CPU-second\n", name,
                g_tokens, c.hidden_size, c.hidden_size, c.intermediate_size, 1e3 * w, gemm_flops / w / 1e9,
                gemm_flops / std::max(cpu_s, 1e-9) / 1e9);
  }
  std::printf("    bf16 forward speed-up (fp32 time / bf16 time): %.2fx wall, %.2fx CPU time (target >= 1.5x "
              "with AVX512_BF16)\n",
              round_ratio("fp32 forward", "bf16 forward", false), round_ratio("fp32 forward", "bf16 forward", true));
  std::printf("    bf16 GEMM speed-up over the plain Eigen GEMM: %.2fx wall, %.2fx CPU time\n",
              round_ratio("plain GEMM", "bf16 GEMM", false), round_ratio("plain GEMM", "bf16 GEMM", true));
}

void BM_forward(benchmark::State& state, bool all_logits, cpu::Precision precision) {
  const cpu::Backend backend(*g_model, {.precision = precision});
  const auto toks = tokens(g_tokens, g_model->config.vocab_size);
  std::vector<int> pos{g_tokens - 1};
  if (all_logits) {
    pos.resize(static_cast<std::size_t>(g_tokens));
    for (int i = 0; i < g_tokens; ++i) pos[static_cast<std::size_t>(i)] = i;
  }
  const std::string name = std::string(all_logits ? "forward_all" : "forward_last") +
                           (precision == cpu::Precision::fp32 ? "" : "_bf16");
  timed(state, name, [&] { benchmark::DoNotOptimize(backend.forward(toks, AttentionWindows::full(), pos)); });
  const double flops = backend.flops(g_tokens, static_cast<int>(pos.size()), AttentionWindows::full());
  state.counters["GFLOP/s"] = flops / g_best[name] / 1e9;
  state.counters["tokens/s"] = g_tokens / g_best[name];
}

void BM_forward_swa(benchmark::State& state) {
  const cpu::Backend backend(*g_model);
  const auto toks = tokens(g_tokens, g_model->config.vocab_size);
  const std::vector<int> pos{g_tokens - 1};
  const auto win = AttentionWindows::from_mask(all_swa(g_model->config), g_tokens / 16, 4);
  timed(state, "forward_swa", [&] { benchmark::DoNotOptimize(backend.forward(toks, win, pos)); });
  state.counters["tokens/s"] = g_tokens / g_best["forward_swa"];
}

void BM_attention(benchmark::State& state, bool swa, bool bf16) {
  // One layer's attention on random Q, K, V of the model's shape.
  const auto& c = g_model->config;
  const int n = g_tokens, hd = c.head_dim;
  boost::random::mt19937_64 rng(3);
  const auto q = uniform(rng, static_cast<std::size_t>(n) * c.num_heads * hd, 1.0);
  const auto k = uniform(rng, static_cast<std::size_t>(n) * c.num_kv_heads * hd, 1.0);
  const auto v = uniform(rng, static_cast<std::size_t>(n) * c.num_kv_heads * hd, 1.0);
  std::vector<float> out(q.size());
  cpu::AttentionShape shape{c.num_heads, c.num_kv_heads, hd, static_cast<std::size_t>(c.num_heads) * hd,
                            static_cast<std::size_t>(c.num_kv_heads) * hd, static_cast<std::size_t>(c.num_heads) * hd};
  const std::vector<cpu::HeadWindow> win(static_cast<std::size_t>(c.num_kv_heads),
                                         swa ? cpu::HeadWindow{n / 16, 0} : cpu::HeadWindow{});
  const std::vector<int> offsets{0, n};
  const std::string name = std::string(swa ? "attention_swa" : "attention_full") + (bf16 ? "_bf16" : "");
  std::optional<cpu::Bf16Kernel> kernel;
  if (bf16) kernel = bf16_kernel();
  cpu::AttentionWork work;
  timed(state, name, [&] {
    work = cpu::attention(q.data(), k.data(), v.data(), out.data(), offsets, shape, win, {}, kernel);
    benchmark::DoNotOptimize(out.data());
  });
  double visible = 0;
  for (int i = 0; i < n; ++i) visible += swa ? std::min(i + 1, n / 16) : i + 1;
  const double flops = 4.0 * hd * visible * c.num_heads;
  state.counters["GFLOP/s"] = flops / g_best[name] / 1e9;
  state.counters["scores"] = static_cast<double>(work.scores);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--tokens=", 9) == 0)
      g_tokens = std::atoi(argv[i] + 9);
    else if (std::strncmp(argv[i], "--threads=", 10) == 0)
      threads = std::atoi(argv[i] + 10);
    else if (std::strncmp(argv[i], "--rounds=", 9) == 0)
      g_rounds = std::atoi(argv[i] + 9);
    else
      rest.push_back(argv[i]);
  }
  if (threads > 0) omp_set_num_threads(threads);
  argc = static_cast<int>(rest.size());
  argv = rest.data();
  const double load_before = load_average();
  if (g_tokens < 16) {
    std::fprintf(stderr, "bench_cpu_forward: --tokens must be >= 16\n");
    return 2;
  }
  if (g_rounds < 1) {
    std::fprintf(stderr, "bench_cpu_forward: --rounds must be >= 1\n");
    return 2;
  }
  load_model();
  std::printf("%s\n", g_model_note.c_str());
  const auto& c = g_model->config;
  std::printf("config: %s, %d layers, hidden %d, %d query / %d KV heads x %d, FFN %d, vocab %d; "
              "%d tokens; %d OpenMP threads\n",
              c.name.c_str(), c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim,
              c.intermediate_size, c.vocab_size, g_tokens, omp_get_max_threads());

  benchmark::RegisterBenchmark("precision_interleaved_fp32_bf16", BM_precision_interleaved)
      ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(g_rounds);
  benchmark::RegisterBenchmark("reference_eigen_gemm", BM_reference_gemm)
      ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(10);
  benchmark::RegisterBenchmark("bf16_gemm", BM_bf16_gemm)
      ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(10);
  benchmark::RegisterBenchmark("forward_full_logits_last", BM_forward, false, cpu::Precision::fp32)
      ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
  benchmark::RegisterBenchmark("forward_bf16_full_logits_last", BM_forward, false, cpu::Precision::bf16)
      ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
  benchmark::RegisterBenchmark("forward_full_logits_all", BM_forward, true, cpu::Precision::fp32)
      ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(2);
  benchmark::RegisterBenchmark("forward_all_swa_w_n/16_s4", BM_forward_swa)
      ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(2);
  benchmark::RegisterBenchmark("attention_layer_full", BM_attention, false, false)
      ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(10);
  benchmark::RegisterBenchmark("attention_layer_swa_w_n/16", BM_attention, true, false)
      ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(20);
  benchmark::RegisterBenchmark("attention_layer_full_bf16", BM_attention, false, true)
      ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(10);
  benchmark::RegisterBenchmark("attention_layer_swa_w_n/16_bf16", BM_attention, true, true)
      ->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(20);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  // Summary (best iteration of each).
  const cpu::Backend backend(*g_model);
  const double gemm_flops = 2.0 * g_tokens * c.hidden_size * c.intermediate_size;
  std::printf("\nsummary (best iteration each; %d tokens)\n", g_tokens);
  double gemm_rate = 0;
  double gemm_cpu_rate = 0;
  std::printf("  load average (1 min) before %.2f, after %.2f, on %d threads\n", load_before, load_average(),
              omp_get_max_threads());
  if (g_best.count("gemm")) {
    gemm_rate = gemm_flops / g_best["gemm"] / 1e9;
    gemm_cpu_rate = gemm_flops / std::max(g_cpu["gemm"], 1e-9) / 1e9;
    std::printf("  plain Eigen GEMM [%d x %d] x [%d x %d]: %.1f GFLOP/s wall, %.1f GFLOP per CPU-second "
                "(the yardstick)\n",
                g_tokens, c.hidden_size, c.hidden_size, c.intermediate_size, gemm_rate, gemm_cpu_rate);
  }
  for (const char* name : {"forward_last", "forward_last_bf16", "forward_all"}) {
    if (!g_best.count(name)) continue;
    const bool all = std::strcmp(name, "forward_all") == 0;
    const bool bf16 = std::strcmp(name, "forward_last_bf16") == 0;
    const double flops = backend.flops(g_tokens, all ? g_tokens : 1, AttentionWindows::full());
    const double rate = flops / g_best[name] / 1e9;
    std::printf("  forward%s, full attention, logits at %s: %.3f s, %.0f tokens/s, %.1f GFLOP/s "
                "(%.1f GFLOP counted: 2 x weights x tokens + attention 4 x head_dim per visible key)",
                bf16 ? (" in " + cpu::choose_precision(cpu::Precision::bf16).name()).c_str() : " in fp32",
                all ? "every position" : "the last position", g_best[name], g_tokens / g_best[name], rate,
                flops / 1e9);
    if (gemm_rate > 0) std::printf(" = %.0f%% of the plain GEMM's wall rate", 100.0 * rate / gemm_rate);
    const double cpu_rate = flops / std::max(g_cpu[name], 1e-9) / 1e9;
    std::printf("; %.1f GFLOP per CPU-second", cpu_rate);
    if (gemm_cpu_rate > 0) std::printf(" = %.0f%% of the GEMM's", 100.0 * cpu_rate / gemm_cpu_rate);
    std::printf("\n");
  }
  if (g_best.count("bf16_gemm"))
    std::printf("  bf16 product of the same shape (%s, input rounding included): %.1f GFLOP/s wall, %.1f GFLOP per "
                "CPU-second\n",
                cpu::choose_precision(cpu::Precision::bf16).name().c_str(), gemm_flops / g_best["bf16_gemm"] / 1e9,
                gemm_flops / std::max(g_cpu["bf16_gemm"], 1e-9) / 1e9);
  print_precision_summary();
  if (g_best.count("forward_swa") && g_best.count("forward_last"))
    std::printf("  forward, all heads SWA (w = %d, 4 sinks), logits at the last position: %.3f s, %.0f tokens/s "
                "(%.2fx the full-attention forward's time)\n",
                g_tokens / 16, g_best["forward_swa"], g_tokens / g_best["forward_swa"],
                g_best["forward_swa"] / g_best["forward_last"]);
  if (g_best.count("attention_full") && g_best.count("attention_swa"))
    std::printf("  attention of one layer (%d query heads): full %.2f ms, all-SWA w = %d %.2f ms; "
                "SWA / full wall time = %.3f (aim <= 1/6 = 0.167; exact visible-key ratio %.3f); "
                "CPU time ratio %.3f\n",
                c.num_heads, 1e3 * g_best["attention_full"], g_tokens / 16, 1e3 * g_best["attention_swa"],
                g_best["attention_swa"] / g_best["attention_full"],
                (static_cast<double>(g_tokens) * (g_tokens / 16) - (g_tokens / 16.0) * (g_tokens / 16 - 1) / 2) /
                    (static_cast<double>(g_tokens) * (g_tokens + 1) / 2),
                g_cpu["attention_swa"] / std::max(g_cpu["attention_full"], 1e-9));
  if (g_best.count("attention_full") && g_best.count("attention_full_bf16")) {
    double visible = 0;
    for (int i = 0; i < g_tokens; ++i) visible += i + 1;
    const double flops = 4.0 * c.head_dim * visible * c.num_heads;
    std::printf("  attention of one layer in %s: full %.2f ms (%.2fx fp32's time; %.1f GFLOP/s", 
                cpu::choose_precision(cpu::Precision::bf16).name().c_str(), 1e3 * g_best["attention_full_bf16"],
                g_best["attention_full_bf16"] / g_best["attention_full"], flops / g_best["attention_full_bf16"] / 1e9);
    if (g_best.count("bf16_gemm"))
      std::printf(" = %.0f%% of the bf16 product's wall rate",
                  100.0 * (flops / g_best["attention_full_bf16"]) / (gemm_flops / g_best["bf16_gemm"]));
    std::printf("; %.1f GFLOP per CPU-second, %.2fx fp32's CPU time", flops / std::max(g_cpu["attention_full_bf16"], 1e-9) / 1e9,
                g_cpu["attention_full_bf16"] / std::max(g_cpu["attention_full"], 1e-9));
    if (g_best.count("bf16_gemm"))
      std::printf(" = %.0f%% of the bf16 product's rate per CPU-second",
                  100.0 * (flops / g_cpu["attention_full_bf16"]) / (gemm_flops / std::max(g_cpu["bf16_gemm"], 1e-9)));
    std::printf(")");
    if (g_best.count("attention_swa_bf16"))
      std::printf(", all-SWA w = %d %.2f ms (%.2fx fp32's)", g_tokens / 16, 1e3 * g_best["attention_swa_bf16"],
                  g_best["attention_swa_bf16"] / std::max(g_best["attention_swa"], 1e-12));
    std::printf("\n");
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("  memory: weights %.1f MiB fp32; forward scratch at %d tokens %.1f MiB (+ residual %.1f MiB, "
              "logits %.2f MiB per requested position); peak RSS %.1f MiB (getrusage maxrss, whole process)\n",
              backend.model().weights.bytes() / 1048576.0, g_tokens, backend.scratch_bytes(g_tokens) / 1048576.0,
              static_cast<double>(g_tokens) * c.hidden_size * 4 / 1048576.0, c.vocab_size * 4 / 1048576.0,
              ru.ru_maxrss / 1024.0);
  {
    const cpu::Backend bf16(*g_model, {.precision = cpu::Precision::bf16});
    std::printf("  memory in bf16: + %.1f MiB of packed layer weights; forward scratch at %d tokens %.1f MiB\n",
                bf16.packed_bytes() / 1048576.0, g_tokens, bf16.scratch_bytes(g_tokens) / 1048576.0);
  }
  return 0;
}
