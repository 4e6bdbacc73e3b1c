// Exploration (issue 51): a planted problem whose per-sample scores differ by
// what each sample needs: sample s needs each critical layer with probability
// p; an SWA head in a needed critical layer costs `penalty` on that sample.
// A calibration draw is `n` samples of a population. The population optimum
// keeps the critical layers full; a draw in which no sample needs one makes it
// look cheap.
#include "planted.hpp"
#include <bosch/bosch.hpp>
#include <cstdio>
#include <set>

struct Hetero {
  bosch::HeadLayout lay;
  std::vector<double> cost;
  std::vector<int> critical;
  double penalty = 0.5;
  static inline double scale = 1.0;
  std::vector<std::vector<int>> needs;  // per drawn sample: critical layers it needs
  std::size_t scored = 0;
  Hetero(bosch::HeadLayout l, std::uint64_t problem, std::uint64_t draw, std::size_t n, double p) : lay(l), cost(l.size()) {
    boost::random::mt19937_64 g(problem);
    boost::random::uniform_real_distribution<double> d(0.01, 0.05);
    for (auto& c : cost) c = d(g);
    critical = {1, l.num_layers / 2, l.num_layers - 3};
    boost::random::mt19937_64 h(draw * 7919 + 13);
    boost::random::uniform_real_distribution<double> u(0, 1);
    for (std::size_t s = 0; s < n; ++s) {
      std::vector<int> ns;
      for (int c : critical) if (u(h) < p) ns.push_back(c);
      needs.push_back(ns);
    }
  }
  bosch::HeadLayout layout() const { return lay; }
  std::size_t sample_count() const { return needs.size(); }
  std::vector<std::size_t> race_order() const {
    std::vector<std::size_t> o(needs.size());
    for (std::size_t i = 0; i < o.size(); ++i) o[i] = i;
    return o;
  }
  double sample_score(const bosch::HeadMask& m, std::size_t s) const {
    double v = 0;
    const int H = lay.num_kv_heads;
    for (int l = 0; l < lay.num_layers; ++l)
      for (int k = 0; k < H; ++k)
        if (m.swa(l, k)) v -= cost[static_cast<std::size_t>(l * H + k)];
    for (int c : needs[s])
      for (int k = 0; k < H; ++k)
        if (m.swa(c, k)) v -= penalty * scale;
    return v;
  }
  std::vector<double> score_samples(const bosch::HeadMask& m, const bosch::EvaluationHint&, std::span<const std::size_t> idx) {
    std::vector<double> out;
    for (auto s : idx) out.push_back(sample_score(m, s));
    scored += idx.size();
    return out;
  }
  static double reduce(std::span<const double> v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
  }
  double evaluate(const bosch::HeadMask& m) {
    std::vector<std::size_t> all = race_order();
    return reduce(score_samples(m, {}, all));
  }
};

int main(int argc, char** argv) {
  const double p = argc > 1 ? atof(argv[1]) : 0.25;
  if (argc > 4) Hetero::scale = atof(argv[4]);
  const int L = argc > 2 ? atoi(argv[2]) : 16;
  const bosch::HeadLayout lay{L, 9, 3};
  for (std::size_t n : {8u, 16u, 32u}) {
    int critical_swa_draws = 0;
    double total_cost = 0;
    std::printf("n=%zu:", n);
    for (std::uint64_t draw = 0; draw < 8; ++draw) {
      Hetero e(lay, 100, draw, n, p);
      bosch::Options o;
      o.target_ratio = 0.75;
      o.seed = draw;
      o.race = argc > 3 ? atoi(argv[3]) : 1;
      o.chunk_budget = 16;
      o.refine_budget = 16; if (argc > 6) o.race_min_samples = atoi(argv[6]); if (argc > 7) o.race_confidence = atof(argv[7]);
      o.probe_samples = argc > 5 ? atoi(argv[5]) : 4;
      const auto r = bosch::select(e, o);
      int crit = 0;
      for (int c : e.critical)
        for (int k = 0; k < 3; ++k) crit += r.mask.swa(c, k);
      critical_swa_draws += crit > 0;
      total_cost += static_cast<double>(e.scored);
      std::printf(" %d", crit);
    }
    std::printf("  | draws with a critical SWA head: %d/8, mean sample forwards %.0f\n", critical_swa_draws, total_cost / 8);
  }
}
