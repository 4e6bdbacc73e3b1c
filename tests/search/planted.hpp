// Planted test problems for the search core: evaluators with known optima.
#pragma once

#include <bosch/bosch.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bosch::test {

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
