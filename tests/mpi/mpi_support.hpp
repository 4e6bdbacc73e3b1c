// Helpers of the MPI suite: the environment, and a synthetic evaluator that
// scores a contiguous share of its "samples" (a SampleEvaluator) with
// per-sample values of very different magnitudes, so that any change in the
// order or grouping of the reduction would change the score's bits.
#pragma once

#include <bosch/evaluator.hpp>
#include <bosch/mask.hpp>
#include <bosch/mpi/environment.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bosch::test::mpi {

/// Set by mpi_main.cpp.
extern const bosch::mpi::Environment* environment;
inline const bosch::mpi::Communicator& world() { return environment->world(); }

/// Per-sample scores of a mask: a head-dependent quality (so the search has
/// something to find) times a per-sample scale from 1e-3 to 1e3, plus a
/// mask-hash perturbation.
class SampleToy {
 public:
  struct Score {
    double mean_logprob = 0;
  };
  SampleToy(HeadLayout layout, std::size_t samples) : layout_(layout), n_(samples), end_(samples) {}

  HeadLayout layout() const { return layout_; }
  std::size_t sample_count() const noexcept { return n_; }
  void set_sample_range(std::size_t b, std::size_t e) {
    begin_ = b;
    end_ = e;
  }
  std::pair<std::size_t, std::size_t> sample_range() const { return {begin_, end_}; }

  static double value(const HeadMask& m, std::size_t s) {
    const auto& lay = m.layout();
    double q = 0;
    std::uint64_t h = 1469598103934665603ull ^ s;
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (m[i]) {
        const int l = static_cast<int>(i) / lay.num_kv_heads, k = static_cast<int>(i) % lay.num_kv_heads;
        q -= (1.0 + std::sin(1.7 * l + 0.9 * k)) * (0.5 + 0.25 * std::cos(static_cast<double>(s) + k));
      }
      h = (h ^ (m[i] ? 0x9e3779b97f4a7c15ull : 0x85ebca6bull)) * 1099511628211ull;
    }
    const double scale = std::pow(10.0, static_cast<double>(s % 7) - 3.0);
    return scale * (q + static_cast<double>(h % 1000003) * 1e-7);
  }
  std::vector<Score> sample_scores(const HeadMask& m, const EvaluationHint& = {}) {
    ++calls_;
    scored_ += end_ - begin_;
    std::vector<Score> out;
    for (std::size_t s = begin_; s < end_; ++s) out.push_back({value(m, s)});
    return out;
  }
  /// Racing (bosch::PerSampleEvaluator): odd samples first, then even ones.
  std::vector<std::size_t> race_order() const {
    std::vector<std::size_t> out;
    for (std::size_t s = 1; s < n_; s += 2) out.push_back(s);
    for (std::size_t s = 0; s < n_; s += 2) out.push_back(s);
    return out;
  }
  std::vector<double> score_samples(const HeadMask& m, const EvaluationHint&, std::span<const std::size_t> idx) {
    ++calls_;
    scored_ += idx.size();
    std::vector<double> out;
    for (std::size_t s : idx) out.push_back(value(m, s));
    return out;
  }
  /// Samples scored so far (bosch::CostedEvaluator: one sample forward each).
  double cost() const { return static_cast<double>(scored_); }
  static double reduce(std::span<const double> v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
  }
  double evaluate(const HeadMask& m) {
    std::vector<double> v;
    for (const auto& s : sample_scores(m)) v.push_back(s.mean_logprob);
    return reduce(v);
  }
  std::size_t calls() const noexcept { return calls_; }

 private:
  HeadLayout layout_;
  std::size_t n_, begin_ = 0, end_;
  std::size_t calls_ = 0, scored_ = 0;
};

}  // namespace bosch::test::mpi
