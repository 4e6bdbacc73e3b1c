// The search's own cost per evaluation: bosch::select with a trivial,
// deterministic evaluator (a weighted bit count, a few ns per mask), so the
// time measured is memoization, proposal generation, logging and bookkeeping.
// Counters (per select() run):
//   evals         evaluations (distinct masks scored) per run
//   time_per_eval wall time per evaluation, seconds (SI-prefixed: u = microseconds)
// Compared with: BM_trivial_evaluator, the evaluator alone on the same
// layout, and the real evaluator (a transformer forward pass over a long
// calibration set, seconds to minutes per evaluation), against which the
// overhead must be negligible.
#include <benchmark/benchmark.h>

#include <bosch/bosch.hpp>

#include <cstdint>
#include <vector>

namespace {

struct Trivial {
  bosch::HeadLayout lay;
  std::vector<double> w;
  explicit Trivial(bosch::HeadLayout l) : lay(l), w(l.size()) {
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] = 0.1 + static_cast<double>((i * 2654435761u) % 1000) / 1000.0;
  }
  bosch::HeadLayout layout() const { return lay; }
  double evaluate(const bosch::HeadMask& m) const {
    double s = 0.0;
    for (std::size_t i = 0; i < m.size(); ++i)
      if (m[i]) s -= w[i];
    return s;
  }
};

const bosch::HeadLayout layouts[] = {{5, 8, 4}, {30, 9, 3}, {28, 16, 8}, {48, 32, 8}};

void BM_select(benchmark::State& state) {
  const bosch::HeadLayout lay = layouts[state.range(0)];
  Trivial e(lay);
  bosch::Options o;
  o.target_ratio = 0.5;
  o.seed = 1;
  o.variant = static_cast<bosch::Variant>(state.range(1));
  std::size_t evals = 0;
  for (auto _ : state) {
    const bosch::Result r = bosch::select(e, o);
    evals += r.evaluations;
    benchmark::DoNotOptimize(r.score);
  }
  state.SetLabel(std::to_string(lay.num_layers) + "x" + std::to_string(lay.num_kv_heads) + " " +
                 bosch::to_string(o.variant));
  state.counters["evals"] =
      benchmark::Counter(static_cast<double>(evals), benchmark::Counter::kAvgIterations);
  state.counters["time_per_eval"] = benchmark::Counter(
      static_cast<double>(evals), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_select)
    ->ArgsProduct({{0, 1, 2, 3},
                   {static_cast<long>(bosch::Variant::full),
                    static_cast<long>(bosch::Variant::layer)}})
    ->Unit(benchmark::kMillisecond);

void BM_trivial_evaluator(benchmark::State& state) {
  const bosch::HeadLayout lay = layouts[state.range(0)];
  Trivial e(lay);
  bosch::HeadMask m(lay);
  std::size_t i = 0;
  for (auto _ : state) {
    m.set_flat(i++ % m.size(), true);
    benchmark::DoNotOptimize(e.evaluate(m));
  }
  state.SetLabel(std::to_string(lay.num_layers) + "x" + std::to_string(lay.num_kv_heads));
  state.counters["time_per_eval"] =
      benchmark::Counter(static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_trivial_evaluator)->DenseRange(0, 3);

}  // namespace

BENCHMARK_MAIN();
