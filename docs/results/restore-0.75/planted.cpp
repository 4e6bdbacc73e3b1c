// Exploration (issue 51): a planted problem where a layer's worth shows only
// once the rest of the model is windowed. Every head costs c_h in [0.01,
// 0.05] when SWA; each SWA head of the critical layer costs in addition
// P * f^4 * u_s on sample s, f the SWA fraction of the other layers and u_s
// in [0.5, 1.5] the sample's need. Stage 1's cascade probes the critical
// layer with few other layers windowed (f ~ 0.3: an extra 0.03 per head,
// like any head), while at rho 0.75 (f ~ 0.8) each of its SWA heads costs
// about 1.2: the optimum keeps it entirely full, a count Stage 2's levels
// (1..3 SWA heads on 3 KV heads) never assign.
#include <bosch/bosch.hpp>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

struct Redundant {
  bosch::HeadLayout lay;
  std::vector<double> cost, need;
  int critical;
  double penalty = 3.0;
  std::size_t scored = 0;
  Redundant(bosch::HeadLayout l, std::uint64_t problem, std::size_t n) : lay(l), cost(l.size()), critical(l.num_layers / 2) {
    boost::random::mt19937_64 g(problem);
    boost::random::uniform_real_distribution<double> d(0.01, 0.05), u(0.5, 1.5);
    for (auto& c : cost) c = d(g);
    for (std::size_t s = 0; s < n; ++s) need.push_back(u(g));
  }
  bosch::HeadLayout layout() const { return lay; }
  std::size_t sample_count() const { return need.size(); }
  std::vector<std::size_t> race_order() const {
    std::vector<std::size_t> o(need.size());
    for (std::size_t i = 0; i < o.size(); ++i) o[i] = i;
    return o;
  }
  double sample_score(const bosch::HeadMask& m, std::size_t s) const {
    const int H = lay.num_kv_heads;
    double v = 0;
    int others = 0, crit = 0;
    for (int l = 0; l < lay.num_layers; ++l)
      for (int k = 0; k < H; ++k)
        if (m.swa(l, k)) {
          v -= cost[static_cast<std::size_t>(l * H + k)];
          (l == critical ? crit : others) += 1;
        }
    const double f = static_cast<double>(others) / ((lay.num_layers - 1) * H);
    return v - crit * penalty * std::pow(f, 4) * need[s];
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
  double evaluate(const bosch::HeadMask& m) { return reduce(score_samples(m, {}, race_order())); }
};

int main(int argc, char** argv) {
  const std::size_t restore = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 0;
  const int L = argc > 2 ? std::atoi(argv[2]) : 16;
  const bosch::HeadLayout lay{L, 9, 3};
  int kept = 0;
  double forwards = 0, gap = 0;
  std::printf("restore_layers %zu, %d layers: critical layer's SWA heads per seed:", restore, L);
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    Redundant e(lay, 100 + seed, 8);
    bosch::Options o;
    o.target_ratio = 0.75;
    o.seed = seed;
    o.race = true;
    o.probe_samples = 4;
    o.chunk_budget = 16;
    o.refine_budget = 16;
    o.restore_layers = restore;
    const auto r = bosch::select(e, o);
    int crit = 0;
    for (int k = 0; k < 3; ++k) crit += r.mask.swa(e.critical, k);
    // The optimum: the critical layer full, the cheapest T heads elsewhere.
    std::vector<double> c;
    for (int l = 0; l < L; ++l)
      for (int k = 0; k < 3; ++k)
        if (l != e.critical) c.push_back(e.cost[static_cast<std::size_t>(l * 3 + k)]);
    std::sort(c.begin(), c.end());
    double opt = 0;
    for (std::size_t i = 0; i < r.mask.count(); ++i) opt -= c[i];
    gap += opt - r.score;
    kept += crit == 0;
    forwards += static_cast<double>(e.scored);
    std::printf(" %d", crit);
  }
  std::printf(" | critical layer kept full on %d/8 seeds, mean gap to the optimum %.4f, mean sample forwards %.0f\n",
              kept, gap / 8, forwards / 8);
}
