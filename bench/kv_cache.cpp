// Hybrid KV cache savings (docs/deployment.md, "Hybrid KV cache"): for each
// context length and mask, one prefill of the context and `decode` cached
// decode steps on SmolLM2-135M, reporting the KV cache's allocated bytes
// (checked against the exact formula, Backend::kv_bytes: cpu::kv_bytes on
// the CPU, 16-bit values on CUDA), prefill and decode tokens/s and the
// process's resident memory, with every ratio to all-full taken within the
// same run. The backend is a template parameter: the same code decodes with
// cpu::Backend or, with --device=cuda in a build with CUDA, cuda::Backend.
//
//   bench_kv_cache [--contexts=2048,4096,8160] [--decode=32] [--window=64]
//                  [--sinks=4] [--rhos=0.5,0.75] [--mask=FILE] [--threads=T]
//                  [--device=cpu|cuda] [--random-weights] [--out=DIR]
//                  [google benchmark flags]
//
// --random-weights: when the model file is absent, random weights of
// SmolLM2-135M's shape instead of stopping (a GPU machine without a network;
// bytes and speed depend only on the shape). With --device=cuda and no
// usable GPU the program prints "SKIPPED: no CUDA device" and exits 0.
//
// Masks: all-full, then for each rho a deterministic mask of
// target_count(layout, rho) SWA heads (the first heads of a fixed seeded
// permutation, so rho 0.75 contains rho 0.5's heads), then --mask FILE when
// given (its layout must be the model's). With --out the program writes, each
// atomically, DIR/kv-savings.md (the table: bytes, formula, RSS, tokens/s and
// ratios to all-full), DIR/kv-bytes.svg and DIR/decode-tok-s.svg (each
// against context, one line per mask) and DIR/kv-savings.json (the rows).
//
// Counters per row: kv_bytes (allocated), kv_formula (the formula, must be
// equal: the program fails otherwise), kv_ratio (to all-full's formula at the
// same context), prefill_tok_s, decode_tok_s, rss_bytes (resident set after
// the row's decode, /proc/self/statm: the weights, this row's cache and
// whatever freed memory of earlier rows the allocator kept, so an upper
// bound) and peak_rss_bytes (getrusage maxrss of the whole process so far,
// monotone over the rows). For the peak memory of one configuration alone
// run `bosch generate --mask M.json --stats` (one process per run).
// The model is $BOSCH_MODEL or the default cache path of scripts/fetch-model;
// when absent the program stops (the table is meant for the real model)
// unless --random-weights is given.

#include "random_model.hpp"

#include <bosch/cpu/backend.hpp>
#if BOSCH_BENCH_CUDA
#include <bosch/cuda/backend.hpp>
#endif
#include <bosch/cpu/kv_cache.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/io/svg.hpp>
#include <bosch/mask.hpp>
#include <bosch/model/model.hpp>

#include <benchmark/benchmark.h>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <nlohmann/json.hpp>
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace bosch;
using clock_type = std::chrono::steady_clock;

struct MaskCase {
  std::string name;
  AttentionWindows windows;
};

struct Row {
  int context = 0;
  std::string mask;
  double rho = 0;
  std::size_t kv_bytes = 0, kv_formula = 0, kv_full = 0;
  double prefill_tok_s = 0, decode_tok_s = 0;
  long long rss = 0, peak_rss = 0;
};

std::unique_ptr<model::Model> g_model;
std::unique_ptr<cpu::Backend> g_cpu;
#if BOSCH_BENCH_CUDA
std::unique_ptr<cuda::Backend> g_cuda;
#endif
std::vector<MaskCase> g_masks;
std::vector<Row> g_rows;
int g_decode = 32;

long long peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<long long>(ru.ru_maxrss) * 1024;
}

long long rss_bytes() {
  std::ifstream in("/proc/self/statm");
  long long size = 0, resident = 0;
  in >> size >> resident;
  return in ? resident * static_cast<long long>(sysconf(_SC_PAGESIZE)) : -1;
}

std::vector<int> tokens(int n, int vocab, std::uint64_t seed) {
  boost::random::mt19937_64 rng(seed);
  boost::random::uniform_int_distribution<int> u(0, vocab - 1);
  std::vector<int> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = u(rng);
  return t;
}

/// target_count(layout, rho) SWA heads: the first of a fixed permutation.
HeadMask rho_mask(const HeadLayout& layout, double rho) {
  std::vector<std::size_t> order(layout.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  boost::random::mt19937_64 rng(19);
  for (std::size_t i = order.size(); i > 1; --i) {
    boost::random::uniform_int_distribution<std::size_t> u(0, i - 1);
    std::swap(order[i - 1], order[u(rng)]);
  }
  HeadMask m(layout);
  const std::size_t k = target_count(layout, rho);
  for (std::size_t i = 0; i < k; ++i) m.set_flat(order[i], true);
  return m;
}

/// One row: prefill `context` tokens and decode g_decode more with `backend`
/// (cpu::Backend or cuda::Backend: the same prefill / decode_step calls).
template <class Backend>
void BM_kv(benchmark::State& state, const Backend* backend_ptr, int context, std::size_t mask_index) {
  const Backend& backend = *backend_ptr;
  const MaskCase& mc = g_masks[mask_index];
  const auto& c = g_model->config;
  const auto prompt = tokens(context, c.vocab_size, 7);
  const auto extra = tokens(g_decode, c.vocab_size, 8);
  Row row;
  row.context = context;
  row.mask = mc.name;
  row.rho = mc.windows.mask.size() ? mc.windows.mask.ratio() : 0.0;
  double best_prefill = 1e300, best_decode = 1e300;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    auto s = backend.prefill(prompt, mc.windows, nullptr, context + g_decode);
    const double prefill = std::chrono::duration<double>(clock_type::now() - t0).count();
    const auto t1 = clock_type::now();
    for (int t : extra) benchmark::DoNotOptimize(backend.decode_step(s, t, mc.windows));
    const double decode = std::chrono::duration<double>(clock_type::now() - t1).count();
    state.SetIterationTime(prefill + decode);
    best_prefill = std::min(best_prefill, prefill);
    best_decode = std::min(best_decode, decode);
    row.kv_bytes = s.bytes();
    row.rss = rss_bytes();
  }
  row.kv_formula = backend.kv_bytes(mc.windows, context + g_decode);
  row.kv_full = backend.kv_bytes(AttentionWindows::full(), context + g_decode);
  if (row.kv_bytes != row.kv_formula) {
    state.SkipWithError("allocated KV bytes differ from the formula");
    std::fprintf(stderr, "bench_kv_cache: %s at %d tokens: allocated %zu bytes, formula %zu\n", mc.name.c_str(),
                 context, row.kv_bytes, row.kv_formula);
    std::exit(1);
  }
  row.prefill_tok_s = context / best_prefill;
  row.decode_tok_s = g_decode / best_decode;
  row.peak_rss = peak_rss_bytes();
  state.counters["kv_bytes"] = static_cast<double>(row.kv_bytes);
  state.counters["kv_formula"] = static_cast<double>(row.kv_formula);
  state.counters["kv_ratio"] = static_cast<double>(row.kv_bytes) / static_cast<double>(row.kv_full);
  state.counters["prefill_tok_s"] = row.prefill_tok_s;
  state.counters["decode_tok_s"] = row.decode_tok_s;
  state.counters["rss_bytes"] = static_cast<double>(row.rss);
  state.counters["peak_rss_bytes"] = static_cast<double>(row.peak_rss);
  g_rows.push_back(row);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// The all-full row of the same context, or nullptr.
const Row* full_row(int context) {
  for (const auto& r : g_rows)
    if (r.context == context && r.mask == "all-full") return &r;
  return nullptr;
}

void write_outputs(const std::filesystem::path& dir, const std::string& note, int window, int sinks) {
  std::filesystem::create_directories(dir);
  std::ostringstream md;
  md << "| context | mask | SWA ratio | KV bytes | formula | KV / all-full | RSS MiB | peak RSS MiB | prefill tok/s | "
        "prefill / all-full | decode tok/s | decode / all-full |\n"
        "|---:|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : g_rows) {
    const Row* f = full_row(r.context);
    const double kv_ratio = static_cast<double>(r.kv_bytes) / static_cast<double>(r.kv_full);
    const double pre_ratio = f ? r.prefill_tok_s / f->prefill_tok_s : 0;
    const double dec_ratio = f ? r.decode_tok_s / f->decode_tok_s : 0;
    md << "| " << r.context << " | " << r.mask << " | " << fmt("%.3f", r.rho) << " | " << r.kv_bytes << " | "
       << r.kv_formula << " | " << fmt("%.3f", kv_ratio) << " | " << fmt("%.1f", r.rss / 1048576.0) << " | "
       << fmt("%.1f", r.peak_rss / 1048576.0) << " | " << fmt("%.1f", r.prefill_tok_s) << " | "
       << (f ? fmt("%.2f", pre_ratio) : "n/a") << " | " << fmt("%.2f", r.decode_tok_s) << " | "
       << (f ? fmt("%.2f", dec_ratio) : "n/a") << " |\n";
    rows.push_back({{"context", r.context},
                    {"mask", r.mask},
                    {"swa_ratio", r.rho},
                    {"kv_bytes", r.kv_bytes},
                    {"kv_formula", r.kv_formula},
                    {"kv_bytes_all_full", r.kv_full},
                    {"rss_bytes", r.rss},
                    {"peak_rss_bytes", r.peak_rss},
                    {"prefill_tok_s", r.prefill_tok_s},
                    {"decode_tok_s", r.decode_tok_s},
                    {"decode_steps", g_decode}});
  }
  md << "\n" << note << "; window " << window << ", " << sinks << " sinks; " << g_decode
     << " decode steps after each context (the cache allocated for context + steps); " << omp_get_max_threads()
     << " OpenMP threads. KV bytes: allocated by the hybrid cache, equal to the formula Backend::kv_bytes. "
        "RSS: resident set after the row's decode (an upper bound: the allocator may keep earlier rows' freed "
        "memory); peak RSS: getrusage maxrss of the process so far (monotone over the rows; `bosch generate "
        "--stats` gives one configuration's own peak). "
        "Ratios: to all-full at the same context, in the same run.\n";
  io::write_file_atomic(dir / "kv-savings.md", md.str());
  io::write_file_atomic(dir / "kv-savings.json",
                        nlohmann::json{{"note", note}, {"window", window}, {"sinks", sinks}, {"rows", rows}}.dump(2) +
                            "\n");
  io::LinePlot bytes, speed;
  bytes.title = "KV-cache bytes vs context (window " + std::to_string(window) + ", " + std::to_string(sinks) + " sinks)";
  bytes.x_label = "context (tokens)";
  bytes.y_label = "KV cache (MiB)";
  speed.title = "decode speed vs context";
  speed.x_label = "context (tokens)";
  speed.y_label = "decode tokens/s";
  bytes.y_min = speed.y_min = 0;
  for (const auto& mc : g_masks) {
    io::Series b{mc.name, {}, {}}, s{mc.name, {}, {}};
    for (const auto& r : g_rows)
      if (r.mask == mc.name) {
        b.x.push_back(r.context);
        b.y.push_back(static_cast<double>(r.kv_bytes) / 1048576.0);
        s.x.push_back(r.context);
        s.y.push_back(r.decode_tok_s);
      }
    bytes.series.push_back(b);
    speed.series.push_back(s);
  }
  io::write_svg(dir / "kv-bytes.svg", io::line_plot_svg(bytes));
  io::write_svg(dir / "decode-tok-s.svg", io::line_plot_svg(speed));
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, window = 64, sinks = 4;
  bool random_weights = false;
  std::string contexts = "2048,4096,8160", rhos = "0.5,0.75", mask_file, out, device = "cpu";
  std::vector<char*> rest{argv[0]};
  auto value = [](const char* arg, const char* name) -> const char* {
    const std::size_t n = std::strlen(name);
    return std::strncmp(arg, name, n) == 0 ? arg + n : nullptr;
  };
  for (int i = 1; i < argc; ++i) {
    if (const char* v = value(argv[i], "--contexts=")) contexts = v;
    else if (const char* v2 = value(argv[i], "--decode=")) g_decode = std::atoi(v2);
    else if (const char* v3 = value(argv[i], "--window=")) window = std::atoi(v3);
    else if (const char* v4 = value(argv[i], "--sinks=")) sinks = std::atoi(v4);
    else if (const char* v5 = value(argv[i], "--rhos=")) rhos = v5;
    else if (const char* v6 = value(argv[i], "--mask=")) mask_file = v6;
    else if (const char* v7 = value(argv[i], "--threads=")) threads = std::atoi(v7);
    else if (const char* v8 = value(argv[i], "--out=")) out = v8;
    else if (const char* v9 = value(argv[i], "--device=")) device = v9;
    else if (std::strcmp(argv[i], "--random-weights") == 0) random_weights = true;
    else rest.push_back(argv[i]);
  }
  if (threads > 0) omp_set_num_threads(threads);
  if (g_decode < 1 || window < 1 || sinks < 0) {
    std::fprintf(stderr, "bench_kv_cache: --decode and --window must be >= 1, --sinks >= 0\n");
    return 2;
  }
#if BOSCH_BENCH_CUDA
  if (device != "cpu" && device != "cuda") {
    std::fprintf(stderr, "bench_kv_cache: --device must be cpu or cuda, got '%s'\n", device.c_str());
    return 2;
  }
  if (device == "cuda") {
    std::string why;
    if (!cuda::device_available(&why)) {
      std::printf("SKIPPED: no CUDA device: %s\n", why.c_str());
      return 0;
    }
  }
#else
  if (device != "cpu") {
    std::fprintf(stderr, "bench_kv_cache: --device must be cpu (this build has no CUDA), got '%s'\n",
                 device.c_str());
    return 2;
  }
#endif
  std::filesystem::path path;
  if (const char* env = std::getenv("BOSCH_MODEL")) {
    path = env;
  } else {
    const char* home = std::getenv("HOME");
    path = std::filesystem::path(home ? home : "/tmp") / ".cache/bosch/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  }
  std::string note;
  try {
    if (std::filesystem::exists(path)) {
      g_model = std::make_unique<model::Model>(model::load(path));
      note = "model " + path.filename().string();
    } else if (random_weights) {
      g_model = std::make_unique<model::Model>(bench::random_model(bench::smollm2_config()));
      note = "random weights of SmolLM2-135M's shape (" + path.string() + " not found)";
    } else {
      std::fprintf(stderr,
                   "bench_kv_cache: model not found at %s (run scripts/fetch-model, set BOSCH_MODEL or pass "
                   "--random-weights)\n",
                   path.string().c_str());
      return 2;
    }
#if BOSCH_BENCH_CUDA
    if (device == "cuda") {
      g_cuda = std::make_unique<cuda::Backend>(*g_model);
      note += ", CUDA " + cuda::device_description() + " (" + cuda::to_string(g_cuda->options().dtype) +
              " weights and KV cache)";
    }
#endif
    if (device == "cpu") {
      g_cpu = std::make_unique<cpu::Backend>(*g_model);
      note += ", CPU (fp32 weights and KV cache)";
    }
    const auto& c = g_model->config;
    g_masks.push_back({"all-full", AttentionWindows::full()});
    for (const auto& r : split(rhos)) {
      const double rho = std::atof(r.c_str());
      g_masks.push_back({"rho " + r, AttentionWindows::from_mask(rho_mask(c.layout(), rho), window, sinks)});
    }
    if (!mask_file.empty())
      g_masks.push_back({std::filesystem::path(mask_file).filename().string(),
                         AttentionWindows::from_mask(io::read_mask(mask_file, c.layout()), window, sinks)});
    std::printf("%s: %d layers x %d KV heads x head_dim %d; window %d, %d sinks; %d decode steps; %d threads\n",
                note.c_str(), c.num_layers, c.num_kv_heads, c.head_dim, window, sinks, g_decode,
                omp_get_max_threads());
    for (const auto& ctx : split(contexts)) {
      const int n = std::atoi(ctx.c_str());
      if (n < 1 || n + g_decode > c.max_position) {
        std::fprintf(stderr, "bench_kv_cache: context %s outside [1, %d - decode steps]\n", ctx.c_str(),
                     c.max_position);
        return 2;
      }
      for (std::size_t m = 0; m < g_masks.size(); ++m) {
        const std::string name = "kv/" + device + "/ctx:" + ctx + "/" + g_masks[m].name;
        benchmark::internal::Benchmark* b = nullptr;
#if BOSCH_BENCH_CUDA
        if (g_cuda) b = benchmark::RegisterBenchmark(name.c_str(), &BM_kv<cuda::Backend>, g_cuda.get(), n, m);
#endif
        if (g_cpu) b = benchmark::RegisterBenchmark(name.c_str(), &BM_kv<cpu::Backend>, g_cpu.get(), n, m);
        b->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_kv_cache: %s\n", e.what());
    return 1;
  }
  argc = static_cast<int>(rest.size());
  argv = rest.data();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  std::printf("\nsummary (ratios to all-full at the same context, this run)\n");
  for (const auto& r : g_rows) {
    const Row* f = full_row(r.context);
    std::printf("  %6d tokens, %-10s KV %8.2f MiB (%.3f of all-full; formula equal), decode %7.2f tok/s (%.2fx), "
                "prefill %7.1f tok/s (%.2fx), RSS %.1f MiB\n",
                r.context, r.mask.c_str(), r.kv_bytes / 1048576.0,
                static_cast<double>(r.kv_bytes) / static_cast<double>(r.kv_full), r.decode_tok_s,
                f ? r.decode_tok_s / f->decode_tok_s : 0.0, r.prefill_tok_s,
                f ? r.prefill_tok_s / f->prefill_tok_s : 0.0, r.rss / 1048576.0);
  }
  if (!out.empty()) {
    try {
      write_outputs(out, note, window, sinks);
      std::printf("wrote %s/kv-savings.md, kv-savings.json, kv-bytes.svg, decode-tok-s.svg\n", out.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_kv_cache: %s\n", e.what());
      return 1;
    }
  }
  return 0;
}
