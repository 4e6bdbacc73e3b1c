// Planted test problems for the search core: evaluators with known optima.
#pragma once

#include <bosch/bosch.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace bosch::test {

/// The mean of per-sample scores (0 for none): the reduce of the planted
/// per-sample evaluators.
inline double mean_of(std::span<const double> v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

/// Separable objective: score = -sum of per-head costs of the SWA heads.
/// The optimum with T SWA heads is the T cheapest heads (global quota).
struct SeparableEvaluator {
  HeadLayout lay;
  std::vector<double> cost;  // per flat head, > 0
  std::size_t calls = 0;

  SeparableEvaluator(HeadLayout l, std::uint64_t seed) : lay(l), cost(l.size()) {
    boost::random::mt19937_64 g(seed);
    boost::random::uniform_real_distribution<double> d(0.1, 1.0);
    for (auto& c : cost) c = d(g);
  }
  HeadLayout layout() const { return lay; }
  double evaluate(const HeadMask& m) {
    ++calls;
    double s = 0.0;
    for (std::size_t i = 0; i < m.size(); ++i)
      if (m[i]) s -= cost[i];
    return s;
  }
  /// Best achievable score for per-layer counts `counts` (cheapest heads per layer).
  double best_for_counts(const std::vector<int>& counts) const {
    double s = 0.0;
    const std::size_t H = static_cast<std::size_t>(lay.num_kv_heads);
    for (std::size_t l = 0; l < counts.size(); ++l) {
      std::vector<double> c(cost.begin() + static_cast<std::ptrdiff_t>(l * H),
                            cost.begin() + static_cast<std::ptrdiff_t>((l + 1) * H));
      std::sort(c.begin(), c.end());
      for (int i = 0; i < counts[l]; ++i) s -= c[static_cast<std::size_t>(i)];
    }
    return s;
  }
  /// Global optimum with T SWA heads (the T cheapest heads anywhere).
  double global_best(std::size_t t) const {
    std::vector<double> c = cost;
    std::sort(c.begin(), c.end());
    double s = 0.0;
    for (std::size_t i = 0; i < t; ++i) s -= c[i];
    return s;
  }
};

/// Counts calls and can batch; wraps any evaluator.
template <class Inner>
struct BatchingEvaluator {
  Inner inner;
  std::size_t batch_calls = 0;
  std::size_t max_batch = 0;
  HeadLayout layout() const { return inner.layout(); }
  double evaluate(const HeadMask& m) { return inner.evaluate(m); }
  std::vector<double> evaluate_batch(std::span<const HeadMask> ms) {
    ++batch_calls;
    max_batch = std::max(max_batch, ms.size());
    std::vector<double> out;
    for (const auto& m : ms) out.push_back(inner.evaluate(m));
    return out;
  }
};

}  // namespace bosch::test

namespace bosch::test {

/// Entangled objective with pairwise interactions. In every layer, `pairs`
/// disjoint pairs of "partner" heads cost 0.5 each when SWA alone but earn a
/// 0.95 bonus when both are SWA (net 0.05 per pair); the other heads cost
/// U(0.1, 0.3) each. With 2*pairs SWA heads per layer the optimum takes
/// exactly the partner pairs (score -0.05 * pairs * L), while ranking heads
/// one at a time (single-head cost) ranks the partners most global and never
/// picks them.
struct EntangledEvaluator {
  HeadLayout lay;
  std::vector<double> cost;
  std::vector<int> partner;  // flat index of the partner, -1 if none
  std::size_t calls = 0;

  EntangledEvaluator(HeadLayout l, int pairs, std::uint64_t seed)
      : lay(l), cost(l.size()), partner(l.size(), -1) {
    boost::random::mt19937_64 g(seed);
    boost::random::uniform_real_distribution<double> d(0.1, 0.3);
    for (auto& c : cost) c = d(g);
    const int H = l.num_kv_heads;
    for (int layer = 0; layer < l.num_layers; ++layer) {
      std::vector<int> k(static_cast<std::size_t>(H));
      for (int i = 0; i < H; ++i) k[static_cast<std::size_t>(i)] = i;
      bosch::search::shuffle(k, g);
      for (int p = 0; p < pairs; ++p) {
        const int a = layer * H + k[static_cast<std::size_t>(2 * p)];
        const int b = layer * H + k[static_cast<std::size_t>(2 * p + 1)];
        partner[static_cast<std::size_t>(a)] = b;
        partner[static_cast<std::size_t>(b)] = a;
        cost[static_cast<std::size_t>(a)] = cost[static_cast<std::size_t>(b)] = 0.5;
      }
    }
  }
  HeadLayout layout() const { return lay; }
  double evaluate(const HeadMask& m) {
    ++calls;
    double s = 0.0;
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (!m[i]) continue;
      s -= cost[i];
      const int p = partner[i];
      if (p > static_cast<int>(i) && m[static_cast<std::size_t>(p)]) s += 0.95;
    }
    return s;
  }
  /// Per-head "one at a time" importance: the score drop when only that head is SWA.
  std::vector<double> single_head_scores() {
    std::vector<double> out;
    for (std::size_t i = 0; i < lay.size(); ++i) {
      HeadMask m(lay);
      m.set_flat(i, true);
      out.push_back(-evaluate(m));  // larger drop = more global
    }
    return out;
  }
  /// The optimum with exactly the partner pairs SWA.
  HeadMask optimum() const {
    HeadMask m(lay);
    for (std::size_t i = 0; i < m.size(); ++i) m.set_flat(i, partner[i] >= 0);
    return m;
  }
};

}  // namespace bosch::test

namespace bosch::test {

/// Entangled objective with redundant pairs: in every layer, `pairs`
/// disjoint pairs of heads are individually almost free to make SWA (costs
/// 0.02 and 0.03) but cost 1.0 extra when both are SWA (they back each other
/// up); the other heads cost U(0.1, 0.3). Ranking heads one at a time picks
/// both heads of every pair first; the optimum takes one head per pair.
struct RedundantEvaluator {
  HeadLayout lay;
  std::vector<double> cost;
  std::vector<int> partner;
  std::size_t calls = 0;

  RedundantEvaluator(HeadLayout l, int pairs, std::uint64_t seed)
      : lay(l), cost(l.size()), partner(l.size(), -1) {
    boost::random::mt19937_64 g(seed);
    boost::random::uniform_real_distribution<double> d(0.1, 0.3);
    for (auto& c : cost) c = d(g);
    const int H = l.num_kv_heads;
    for (int layer = 0; layer < l.num_layers; ++layer) {
      std::vector<int> k(static_cast<std::size_t>(H));
      for (int i = 0; i < H; ++i) k[static_cast<std::size_t>(i)] = i;
      bosch::search::shuffle(k, g);
      for (int p = 0; p < pairs; ++p) {
        const auto a = static_cast<std::size_t>(layer * H + k[static_cast<std::size_t>(2 * p)]);
        const auto b = static_cast<std::size_t>(layer * H + k[static_cast<std::size_t>(2 * p + 1)]);
        partner[a] = static_cast<int>(b);
        partner[b] = static_cast<int>(a);
        cost[a] = 0.02;
        cost[b] = 0.03;
      }
    }
  }
  HeadLayout layout() const { return lay; }
  double evaluate(const HeadMask& m) {
    ++calls;
    double s = 0.0;
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (!m[i]) continue;
      s -= cost[i];
      const int p = partner[i];
      if (p > static_cast<int>(i) && m[static_cast<std::size_t>(p)]) s -= 1.0;
    }
    return s;
  }
  std::vector<double> single_head_scores() {
    std::vector<double> out;
    for (std::size_t i = 0; i < lay.size(); ++i) {
      HeadMask m(lay);
      m.set_flat(i, true);
      out.push_back(-evaluate(m));
    }
    return out;
  }
  /// Best score with `counts[l]` SWA heads in layer l (brute force per layer).
  double best_for_counts(const std::vector<int>& counts) {
    const int H = lay.num_kv_heads;
    double total = 0.0;
    for (int l = 0; l < lay.num_layers; ++l) {
      double best = -1e9;
      for (int bits = 0; bits < (1 << H); ++bits) {
        if (__builtin_popcount(static_cast<unsigned>(bits)) != counts[static_cast<std::size_t>(l)])
          continue;
        HeadMask m(lay);
        for (int k = 0; k < H; ++k) m.set(l, k, (bits >> k) & 1);
        best = std::max(best, evaluate(m));
      }
      total += best;
    }
    return total;
  }
};

}  // namespace bosch::test

namespace bosch::test {

/// A planted problem shaped like the high-ratio case of a real model: a few
/// costly "retrieval" heads, many cheap ones, and entanglement inside layers
/// and between neighbouring layers that single-head rankings cannot see.
///
/// Each head costs c_i when SWA: U(0.005, 0.03) for most heads, U(0.3, 1.0)
/// for `key_heads` randomly placed retrieval heads. `redundant_pairs` pairs
/// of cheap heads, each pair inside one layer or across neighbouring layers,
/// back each other up: either may be SWA for free (cost 0.002 each), but both
/// SWA costs `pair_cost` extra. The score is minus the total cost. The exact
/// optimum for any SWA count is found by dynamic programming over layers
/// (state: the previous layer's bits and the count so far), so tests can
/// measure the gap to it.
struct CircuitEvaluator {
  HeadLayout lay;
  std::vector<double> cost;
  std::vector<int> partner;  // flat index of the backup head, -1 if none
  double pair_cost = 0.5;
  std::size_t calls = 0;

  CircuitEvaluator(HeadLayout l, int key_heads, int redundant_pairs, std::uint64_t seed)
      : lay(l), cost(l.size()), partner(l.size(), -1) {
    boost::random::mt19937_64 g(seed);
    boost::random::uniform_real_distribution<double> cheap(0.005, 0.03), costly(0.3, 1.0);
    for (auto& c : cost) c = cheap(g);
    const int n = static_cast<int>(l.size());
    std::vector<int> idx(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = i;
    bosch::search::shuffle(idx, g);
    std::size_t next = 0;
    for (int k = 0; k < key_heads && next < idx.size(); ++k)
      cost[static_cast<std::size_t>(idx[next++])] = costly(g);
    const int H = l.num_kv_heads;
    for (int p = 0; p < redundant_pairs && next < idx.size(); ++p) {
      const int a = idx[next++];
      // A partner in the same or the next layer that is still free and cheap.
      int b = -1;
      for (std::size_t j = next; j < idx.size(); ++j) {
        const int c = idx[j];
        const int la = a / H, lc = c / H;
        if (lc == la || lc == la + 1 || lc == la - 1) {
          b = c;
          std::swap(idx[j], idx[next]);
          ++next;
          break;
        }
      }
      if (b < 0) continue;
      partner[static_cast<std::size_t>(a)] = b;
      partner[static_cast<std::size_t>(b)] = a;
      cost[static_cast<std::size_t>(a)] = cost[static_cast<std::size_t>(b)] = 0.002;
    }
  }
  HeadLayout layout() const { return lay; }
  double score(const std::vector<std::uint8_t>& bits) const {
    double s = 0.0;
    for (std::size_t i = 0; i < bits.size(); ++i) {
      if (!bits[i]) continue;
      s -= cost[i];
      const int p = partner[i];
      if (p > static_cast<int>(i) && bits[static_cast<std::size_t>(p)]) s -= pair_cost;
    }
    return s;
  }
  double evaluate(const HeadMask& m) {
    ++calls;
    return score(m.bits());
  }
  /// The best score with exactly `t` SWA heads (dynamic programming; Hkv <= 8).
  double optimum(std::size_t t) const {
    const int L = lay.num_layers, H = lay.num_kv_heads, S = 1 << H;
    const double none = -1e300;
    // dp[state][count]: best score of layers 0..l with layer l in `state`.
    std::vector<std::vector<double>> dp(static_cast<std::size_t>(S),
                                        std::vector<double>(t + 1, none));
    auto layer_score = [&](int l, int state, int prev) {
      // Costs of layer l's SWA heads, pairs inside layer l, pairs with layer l-1.
      double s = 0.0;
      for (int k = 0; k < H; ++k) {
        if (!((state >> k) & 1)) continue;
        const int i = l * H + k;
        s -= cost[static_cast<std::size_t>(i)];
        const int p = partner[static_cast<std::size_t>(i)];
        if (p < 0) continue;
        const int lp = p / H, kp = p % H;
        if (lp == l && p > i && ((state >> kp) & 1)) s -= pair_cost;
        if (lp == l - 1 && ((prev >> kp) & 1)) s -= pair_cost;
      }
      return s;
    };
    for (int st = 0; st < S; ++st) {
      const auto c = static_cast<std::size_t>(__builtin_popcount(static_cast<unsigned>(st)));
      if (c <= t) dp[static_cast<std::size_t>(st)][c] = layer_score(0, st, 0);
    }
    for (int l = 1; l < L; ++l) {
      std::vector<std::vector<double>> nd(static_cast<std::size_t>(S),
                                          std::vector<double>(t + 1, none));
      for (int prev = 0; prev < S; ++prev)
        for (std::size_t c0 = 0; c0 <= t; ++c0) {
          const double base = dp[static_cast<std::size_t>(prev)][c0];
          if (base == none) continue;
          for (int st = 0; st < S; ++st) {
            const std::size_t c =
                c0 + static_cast<std::size_t>(__builtin_popcount(static_cast<unsigned>(st)));
            if (c > t) continue;
            const double v = base + layer_score(l, st, prev);
            auto& cell = nd[static_cast<std::size_t>(st)][c];
            if (v > cell) cell = v;
          }
        }
      dp = std::move(nd);
    }
    double best = none;
    for (int st = 0; st < S; ++st) best = std::max(best, dp[static_cast<std::size_t>(st)][t]);
    return best;
  }
};

}  // namespace bosch::test

namespace bosch::test {

/// Wraps any evaluator and counts its cost the way a transformer evaluator
/// with a residual cache would (bosch::CostedEvaluator): `samples` samples
/// per evaluation, each restarted at the hint's first changed layer when a
/// hint is given (the unhinted evaluate() runs every layer).
template <class Inner>
struct CostedEvaluator {
  Inner inner;
  double samples = 4;
  std::size_t layer_applications = 0;
  HeadLayout layout() const { return inner.layout(); }
  double evaluate(const HeadMask& m) {
    layer_applications += static_cast<std::size_t>(samples) * static_cast<std::size_t>(layout().num_layers);
    return inner.evaluate(m);
  }
  double evaluate(const HeadMask& m, const EvaluationHint& h) {
    const int f = h.reference ? first_changed_layer(m, *h.reference) : 0;
    layer_applications += static_cast<std::size_t>(samples) * static_cast<std::size_t>(layout().num_layers - f);
    return inner.evaluate(m);
  }
  double cost() const {
    return static_cast<double>(layer_applications) / static_cast<double>(layout().num_layers);
  }
};

}  // namespace bosch::test

namespace bosch::test {

/// The main job's search settings above rho 0.5 (scripts/main-job.cfg) at
/// rho 0.75: racing, Stage 1 screened on 4 samples, budgets 16.
inline Options main_job_options(std::uint64_t seed) {
  Options o;
  o.target_ratio = 0.75;
  o.seed = seed;
  o.race = true;
  o.probe_samples = 4;
  o.chunk_budget = 16;
  o.refine_budget = 16;
  return o;
}

/// What HiddenCriticalLayer and LateCostHeads share: samples s = 0..N-1 with
/// a need u_s, scored in sample order by Derived::sample_score(m, s), which
/// makes them bosch::PerSampleEvaluators; `scored` counts the samples scored.
template <class Derived>
struct PerSampleProblem {
  HeadLayout lay;
  std::vector<double> need;
  std::size_t scored = 0;
  explicit PerSampleProblem(HeadLayout l) : lay(l) {}
  HeadLayout layout() const { return lay; }
  std::size_t sample_count() const { return need.size(); }
  std::vector<std::size_t> race_order() const {
    std::vector<std::size_t> o(need.size());
    for (std::size_t i = 0; i < o.size(); ++i) o[i] = i;
    return o;
  }
  std::vector<double> score_samples(const HeadMask& m, const EvaluationHint&,
                                    std::span<const std::size_t> idx) {
    std::vector<double> out;
    for (auto s : idx) out.push_back(static_cast<const Derived&>(*this).sample_score(m, s));
    scored += idx.size();
    return out;
  }
  static double reduce(std::span<const double> v) { return mean_of(v); }
  double evaluate(const HeadMask& m) { return reduce(score_samples(m, {}, race_order())); }
};

/// A layer whose worth shows only once the rest of the model is windowed
/// (docs/algorithm.md §Restoration): every head costs c_h in [0.01, 0.05]
/// when SWA; each SWA head of the critical layer (the middle one) costs in
/// addition 3 f^4 u_s on sample s, f the SWA fraction of the other layers and
/// u_s in [0.5, 1.5] the sample's need. Near all-full (f ~ 0.3) the critical
/// layer looks like any other; at rho 0.75 (f ~ 0.8) the optimum keeps it
/// entirely full. Per-sample scores in sample order; `scored` counts samples.
struct HiddenCriticalLayer : PerSampleProblem<HiddenCriticalLayer> {
  std::vector<double> cost;
  int critical;
  HiddenCriticalLayer(HeadLayout l, std::uint64_t problem, std::size_t samples)
      : PerSampleProblem(l), cost(l.size()), critical(l.num_layers / 2) {
    boost::random::mt19937_64 g(problem);
    boost::random::uniform_real_distribution<double> d(0.01, 0.05), u(0.5, 1.5);
    for (auto& c : cost) c = d(g);
    for (std::size_t s = 0; s < samples; ++s) need.push_back(u(g));
  }
  double sample_score(const HeadMask& m, std::size_t s) const {
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
    return v - crit * 3.0 * std::pow(f, 4) * need[s];
  }
  /// The optimum with t SWA heads: the critical layer full, the t cheapest heads elsewhere.
  double optimum(std::size_t t) const {
    std::vector<double> c;
    for (int l = 0; l < lay.num_layers; ++l)
      for (int k = 0; k < lay.num_kv_heads; ++k)
        if (l != critical) c.push_back(cost[static_cast<std::size_t>(l * lay.num_kv_heads + k)]);
    std::sort(c.begin(), c.end());
    double s = 0;
    for (std::size_t i = 0; i < t; ++i) s -= c[i];
    return s;
  }
};

/// Heads whose cost shows only once most of the model is windowed: SWA head
/// i costs a_i + b_i f^4 u_s on sample s, f the SWA fraction of the whole
/// mask and u_s in [0.5, 1.5]. Most heads have a small late term; `late` of
/// them (scattered over the layers) a large one. Stage 1 probes each layer
/// at the f of its cascade and Stage 2 plans the per-layer counts from those
/// drops, so at a high ratio the plan's counts are wrong in many layers, and
/// the optimum (the t heads of lowest a_i + b_i f^4 mean(u), f = t / n) lies
/// many cross-layer swaps away, each of them an improvement by itself.
struct LateCostHeads : PerSampleProblem<LateCostHeads> {
  std::vector<double> early, late_cost;
  LateCostHeads(HeadLayout l, std::uint64_t problem, std::size_t samples, double late = 0.2)
      : PerSampleProblem(l), early(l.size()), late_cost(l.size()) {
    boost::random::mt19937_64 g(problem);
    boost::random::uniform_real_distribution<double> a(0.01, 0.05), small(0.0, 0.02), large(0.2, 0.5),
        u(0.5, 1.5), pick(0.0, 1.0);
    for (std::size_t i = 0; i < early.size(); ++i) {
      early[i] = a(g);
      late_cost[i] = pick(g) < late ? large(g) : small(g);
    }
    for (std::size_t s = 0; s < samples; ++s) need.push_back(u(g));
  }
  double fraction(const HeadMask& m) const {
    return static_cast<double>(m.count()) / static_cast<double>(lay.size());
  }
  double sample_score(const HeadMask& m, std::size_t s) const {
    const double f4 = std::pow(fraction(m), 4);
    double v = 0;
    for (std::size_t i = 0; i < m.size(); ++i)
      if (m[i]) v -= early[i] + late_cost[i] * f4 * need[s];
    return v;
  }
  /// The optimum with t SWA heads: the t heads of lowest cost at f = t / n.
  double optimum(std::size_t t) const {
    const double f4 = std::pow(static_cast<double>(t) / static_cast<double>(lay.size()), 4);
    const double u = mean_of(need);
    std::vector<double> c(early.size());
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = early[i] + late_cost[i] * f4 * u;
    std::sort(c.begin(), c.end());
    double s = 0;
    for (std::size_t i = 0; i < t; ++i) s -= c[i];
    return s;
  }
};

/// A screening sample that misleads Stage 2 (Options::plan_candidates): SWA
/// head i costs c_i in [0.01, 0.05] on every sample, and a layer entirely SWA
/// costs p_l more: 0.3 for the decoys (every fourth layer, from layer 1),
/// [0, 0.05] for the others. On sample 0, the first of the race order and so
/// in every Stage 1 screen, a decoy entirely SWA scores `bonus` (2) higher:
/// on a screen of 4 samples the decoys look the cheapest layers to complete
/// (0.3 - 2/4 < 0), over all N samples they cost 0.3 - 2/N (0.175 at N =
/// 16). At rho 0.75 with 16 layers of 3 KV heads, Stage 2 completes 4
/// layers, the 4 decoys, and the optimum completes none of them.
struct MisleadingSample : PerSampleProblem<MisleadingSample> {
  std::vector<double> cost, complete;
  std::vector<bool> decoy;
  double bonus = 2.0;
  MisleadingSample(HeadLayout l, std::uint64_t problem, std::size_t samples)
      : PerSampleProblem(l), cost(l.size()), complete(static_cast<std::size_t>(l.num_layers)),
        decoy(static_cast<std::size_t>(l.num_layers)) {
    boost::random::mt19937_64 g(problem);
    boost::random::uniform_real_distribution<double> c(0.01, 0.05), p(0.0, 0.05), u(0.5, 1.5);
    for (auto& x : cost) x = c(g);
    for (std::size_t j = 0; j < complete.size(); ++j) {
      decoy[j] = j % 4 == 1;
      complete[j] = decoy[j] ? 0.3 : p(g);
    }
    for (std::size_t s = 0; s < samples; ++s) need.push_back(u(g));  // unused: one per sample
  }
  int decoys_complete(const HeadMask& m) const {
    int n = 0;
    for (int l = 0; l < lay.num_layers; ++l)
      n += decoy[static_cast<std::size_t>(l)] && m.count_in_layer(l) == lay.num_kv_heads;
    return n;
  }
  double sample_score(const HeadMask& m, std::size_t s) const {
    const int H = lay.num_kv_heads;
    double v = 0;
    for (int l = 0; l < lay.num_layers; ++l) {
      int n = 0;
      for (int k = 0; k < H; ++k)
        if (m.swa(l, k)) {
          v -= cost[static_cast<std::size_t>(l * H + k)];
          ++n;
        }
      const std::size_t li = static_cast<std::size_t>(l);
      if (n == H) v -= complete[li] - (decoy[li] && s == 0 ? bonus : 0.0);
    }
    return v;
  }
  /// The optimum with t SWA heads (of the mean over the samples): per layer
  /// j heads cost its j cheapest, plus its mean completion cost when j = Hkv;
  /// a knapsack over the layers.
  double optimum(std::size_t t) const {
    const int H = lay.num_kv_heads;
    const double ninf = -std::numeric_limits<double>::infinity();
    std::vector<double> best(t + 1, ninf);
    best[0] = 0;
    for (int l = 0; l < lay.num_layers; ++l) {
      std::vector<double> c(cost.begin() + l * H, cost.begin() + (l + 1) * H);
      std::sort(c.begin(), c.end());
      const std::size_t li = static_cast<std::size_t>(l);
      std::vector<double> next(t + 1, ninf);
      for (std::size_t have = 0; have <= t; ++have) {
        if (best[have] == ninf) continue;
        double v = 0;
        for (int j = 0; j <= H && have + static_cast<std::size_t>(j) <= t; ++j) {
          if (j > 0) v -= c[static_cast<std::size_t>(j - 1)];
          double w = v;
          if (j == H) w -= complete[li] - (decoy[li] ? bonus / static_cast<double>(need.size()) : 0.0);
          next[have + static_cast<std::size_t>(j)] = std::max(next[have + static_cast<std::size_t>(j)], best[have] + w);
        }
      }
      best = std::move(next);
    }
    return best[t];
  }
};

/// Per-sample noise on any planted objective, making it a
/// bosch::PerSampleEvaluator (racing) and a bosch::CostedEvaluator. There are
/// N = tasks * per_task samples, sample s belonging to task s / per_task
/// (task-major, as a task suite lists them); sample s scores
///
///     f(m) + sigma * task_scale[task] * (e_s(m) - mean_t e_t(m)),
///
/// with f the planted objective (its sample s's score when it has per-sample
/// scores, sample_score(m, s)) and e_s(m) a pseudo-random, roughly normal
/// draw (sum of four uniforms, centred, unit variance) seeded by the mask's
/// bits, `seed` and s. The noise sums to zero over the samples, so the score
/// (their mean) is f(m) up to rounding and the planted optimum stands, while
/// every single sample is noisy with a known spread. The race order
/// interleaves the tasks; cost() counts the samples scored (one sample
/// forward each). `parent_of` remembers, per mask, the hint's reference of
/// its last scoring (the parent a race compared it with).
template <class Inner>
struct NoisySamples {
  Inner inner;
  std::size_t tasks = 4, per_task = 2;
  double sigma = 0.05;
  std::vector<double> task_scale{0.5, 1.0, 1.5, 2.0};
  std::uint64_t seed = 0;
  std::size_t scored = 0;
  std::unordered_map<HeadMask, HeadMask> parent_of;

  explicit NoisySamples(Inner i) : inner(std::move(i)) {}
  HeadLayout layout() const { return inner.layout(); }
  std::size_t sample_count() const { return tasks * per_task; }
  std::vector<std::size_t> race_order() const {
    std::vector<std::size_t> out;
    for (std::size_t k = 0; k < per_task; ++k)
      for (std::size_t t = 0; t < tasks; ++t) out.push_back(t * per_task + k);
    return out;
  }
  /// The noise of every sample of `m` (centred).
  std::vector<double> noise(const HeadMask& m) const {
    std::uint64_t h = seed ^ 0x9e3779b97f4a7c15ull;
    for (std::size_t i = 0; i < m.size(); ++i) h = bosch::search::mix64(h ^ (m[i] ? 0xa5a5u + i : i));
    std::vector<double> e(sample_count());
    double mean = 0;
    for (std::size_t s = 0; s < e.size(); ++s) {
      bosch::search::engine g(bosch::search::mix64(h + s));
      double u = 0;
      for (int k = 0; k < 4; ++k) u += bosch::search::uniform01(g);
      e[s] = (u - 2.0) * std::sqrt(3.0);
      mean += e[s];
    }
    mean /= static_cast<double>(e.size());
    for (auto& x : e) x -= mean;
    return e;
  }
  std::vector<double> score_samples(const HeadMask& m, const EvaluationHint& h, std::span<const std::size_t> idx) {
    if (h.reference) parent_of.insert_or_assign(m, *h.reference);
    const std::vector<double> e = noise(m);
    std::vector<double> out;
    if constexpr (requires { inner.sample_score(m, std::size_t{0}); }) {
      for (std::size_t s : idx)
        out.push_back(inner.sample_score(m, s) + sigma * task_scale[(s / per_task) % task_scale.size()] * e[s]);
      inner.scored += idx.size();
    } else {
      const double f = inner.evaluate(m);
      for (std::size_t s : idx) out.push_back(f + sigma * task_scale[(s / per_task) % task_scale.size()] * e[s]);
    }
    scored += idx.size();
    return out;
  }
  static double reduce(std::span<const double> v) { return mean_of(v); }
  double evaluate(const HeadMask& m) {
    std::vector<std::size_t> all(sample_count());
    for (std::size_t s = 0; s < all.size(); ++s) all[s] = s;
    const auto v = score_samples(m, {}, all);
    return reduce(v);
  }
  double cost() const { return static_cast<double>(scored); }
};

}  // namespace bosch::test
