// One Stage-1 probe sequence of BOSCH on a real model, with and without the
// evaluator's residual-stream cache and its shared prefix, and seconds per
// evaluation at the main job's settings.
//
//   bench_eval_probe_cache [--context=N] [--samples=N] [--precision=fp32|bf16|automatic]
//                          [google benchmark flags]
//
// "no_prefix" variants turn TransformerEvaluatorOptions::shared_prefix off
// (every forward runs all rows); the summary prints the shared prefix's
// speedup on the probe sequence and on a full evaluation, and the largest
// score difference it makes (fp32 rounding).
//
// The probe sequence is what Stage 1 asks of the evaluator: layers from the top
// down, each probed with every way of making ceil(rho*Hkv) of its KV heads SWA
// (rho = 0.5), with the layers above already localized, each evaluation hinted
// with the incumbent (the search's reference mask). "cached" restarts every
// forward at the deepest cached layer of the mask's prefix; "uncached"
// (cache_bytes = 0) runs all layers. Both compute bit-identical scores (checked
// here). The summary prints the speedup (aim: >= 1.8x) and seconds per full
// evaluation. The model is $BOSCH_MODEL or the default cache path of
// scripts/fetch-model (SmolLM2-135M); natural text from $BOSCH_CACHE/text or
// the fixtures.
#include <bosch/cpu/backend.hpp>
#include <bosch/eval/suite.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/model/model.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace bosch;

int g_context = 512;
int g_samples = 1;
std::string g_precision = "fp32";
std::unique_ptr<model::Model> g_model;
std::unique_ptr<cpu::Backend> g_backend;
std::unique_ptr<TaskSuite> g_suite;
std::map<std::string, double> g_seconds;
std::map<std::string, std::size_t> g_evaluations;
std::map<std::string, double> g_checksum;

std::filesystem::path model_path() {
  if (const char* env = std::getenv("BOSCH_MODEL")) return env;
  const char* cache = std::getenv("BOSCH_CACHE");
  const char* home = std::getenv("HOME");
  std::filesystem::path base = cache ? std::filesystem::path(cache)
                                     : std::filesystem::path(home ? home : "/tmp") / ".cache" / "bosch";
  return base / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Every mask of a top-down probe sequence at ratio 0.5 (exhaustive per layer,
// the probe keeping the first candidate as the layer's choice), as
// (mask, reference) pairs in evaluation order.
std::vector<std::pair<HeadMask, HeadMask>> probe_sequence(const HeadLayout& layout) {
  const int h = layout.num_kv_heads;
  const int k = (h + 1) / 2;
  std::vector<std::pair<HeadMask, HeadMask>> out;
  HeadMask incumbent(layout);
  for (int l = layout.num_layers - 1; l >= 0; --l) {
    HeadMask first = incumbent;
    bool have_first = false;
    for (unsigned bits = 0; bits < (1u << h); ++bits) {
      if (__builtin_popcount(bits) != k) continue;
      HeadMask m = incumbent;
      for (int g = 0; g < h; ++g) m.set(l, g, (bits >> g) & 1u);
      out.emplace_back(m, incumbent);
      if (!have_first) {
        first = m;
        have_first = true;
      }
    }
    incumbent = first;
  }
  return out;
}

std::map<std::string, std::vector<double>> g_scores;

void run_probes(benchmark::State& state, bool cached, bool prefix = true) {
  TransformerEvaluatorOptions o;
  o.window = 64;
  o.shared_prefix = prefix;
  if (!cached) o.cache_bytes = 0;
  const auto seq = probe_sequence(g_backend->layout());
  for (auto _ : state) {
    TransformerEvaluator<cpu::Backend> e(*g_backend, g_suite->calibration, o);
    e.evaluate(HeadMask(e.layout()));  // the all-full anchor, as select() starts
    double sum = 0;
    std::vector<double> scores;
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& [mask, reference] : seq) {
      scores.push_back(e.evaluate(mask, EvaluationHint{&reference, first_changed_layer(mask, reference)}));
      sum += scores.back();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s);
    const std::string name = std::string(cached ? "cached" : "uncached") + (prefix ? "" : "_no_prefix");
    g_scores[name] = scores;
    g_seconds[name] = s;
    g_evaluations[name] = seq.size();
    g_checksum[name] = sum;
  }
  state.counters["evaluations"] = static_cast<double>(seq.size());
}

void BM_probe_sequence_cached(benchmark::State& s) { run_probes(s, true); }
void BM_probe_sequence_uncached(benchmark::State& s) { run_probes(s, false); }
void BM_probe_sequence_cached_no_prefix(benchmark::State& s) { run_probes(s, true, false); }

void full_evaluation(benchmark::State& state, bool prefix) {
  TransformerEvaluatorOptions o;
  o.window = 64;
  o.cache_bytes = 0;
  o.shared_prefix = prefix;
  TransformerEvaluator<cpu::Backend> e(*g_backend, g_suite->calibration, o);
  HeadMask m(e.layout());
  for (int l = 0; l < m.layout().num_layers; l += 2) m.set(l, 0, true);
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(e.evaluate(m));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s);
    g_seconds[prefix ? "full" : "full_no_prefix"] = s;  // the last (warm) iteration
  }
}

void BM_full_evaluation(benchmark::State& s) { full_evaluation(s, true); }
void BM_full_evaluation_no_prefix(benchmark::State& s) { full_evaluation(s, false); }

}  // namespace

BENCHMARK(BM_probe_sequence_cached)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_probe_sequence_uncached)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_probe_sequence_cached_no_prefix)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_full_evaluation)->UseManualTime()->Iterations(2)->Unit(benchmark::kSecond);
BENCHMARK(BM_full_evaluation_no_prefix)->UseManualTime()->Iterations(2)->Unit(benchmark::kSecond);

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--context=", 10) == 0) g_context = std::atoi(argv[i] + 10);
    else if (std::strncmp(argv[i], "--samples=", 10) == 0) g_samples = std::atoi(argv[i] + 10);
    else if (std::strncmp(argv[i], "--precision=", 12) == 0) g_precision = argv[i] + 12;
    else rest.push_back(argv[i]);
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  try {
    const auto path = model_path();
    if (!std::filesystem::exists(path)) {
      std::fprintf(stderr, "bench_eval_probe_cache: model not found at %s (run scripts/fetch-model)\n",
                   path.string().c_str());
      return 1;
    }
    g_model = std::make_unique<model::Model>(model::load(path));
    cpu::Options bo;
    bo.precision = cpu::parse_precision(g_precision);
    g_backend = std::make_unique<cpu::Backend>(*g_model, bo);
    TaskSuiteOptions suite;
    suite.context_length = g_context;
    suite.calibration_samples = g_samples;
    suite.held_out_samples = 0;
    // The novels come from scripts/fetch-test-data (scripts/setup --with-text).
    g_suite = std::make_unique<TaskSuite>(make_task_suite(suite, g_model->tokenizer, false));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_eval_probe_cache: %s\n", e.what());
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  std::size_t tokens = 0;
  for (const auto& s : g_suite->calibration.samples) tokens += s.prompt.size() + s.answer.size() - 1;
  std::printf("\nsummary (%s; %zu calibration samples, %zu tokens per evaluation, window 64, %s: %s):\n",
              g_model->config.name.c_str(), g_suite->calibration.samples.size(), tokens,
              std::string(to_string(g_backend->precision().precision)).c_str(), g_backend->precision().reason.c_str());
  if (g_seconds.count("cached") && g_seconds.count("uncached")) {
    std::printf("  Stage-1 probe sequence, %zu evaluations: %.1f s uncached, %.1f s cached\n",
                g_evaluations["cached"], g_seconds["uncached"], g_seconds["cached"]);
    std::printf("  residual-cache speedup: %.2fx (aim >= 1.8x); scores identical: %s\n",
                g_seconds["uncached"] / g_seconds["cached"],
                g_checksum["cached"] == g_checksum["uncached"] ? "yes" : "NO");
  }
  if (g_seconds.count("cached") && g_seconds.count("cached_no_prefix")) {
    const auto& a = g_scores["cached"];
    const auto& b = g_scores["cached_no_prefix"];
    double diff = 0;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i]));
    std::printf("  shared prefix on the cached probe sequence: %.1f s against %.1f s without, %.2fx; "
                "largest score difference %.2e\n",
                g_seconds["cached"], g_seconds["cached_no_prefix"], g_seconds["cached_no_prefix"] / g_seconds["cached"],
                diff);
  }
  if (g_seconds.count("full"))
    std::printf("  one full evaluation (all layers): %.2f s\n", g_seconds["full"]);
  if (g_seconds.count("full") && g_seconds.count("full_no_prefix"))
    std::printf("  shared prefix on a full evaluation: %.2f s against %.2f s without, %.2fx\n", g_seconds["full"],
                g_seconds["full_no_prefix"], g_seconds["full_no_prefix"] / g_seconds["full"]);
  return 0;
}
