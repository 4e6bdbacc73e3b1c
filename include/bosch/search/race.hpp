// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file search/race.hpp
/// The decision rule of racing evaluations (Options::race, docs/algorithm.md
/// §Racing): a paired sequential test on the per-sample differences between
/// a candidate and the mask it must beat.
///
/// The score of a mask is the mean of N per-sample scores. A candidate c is
/// compared with a reference r whose N per-sample scores are known; c's
/// samples are scored one at a time in a fixed race order, giving the
/// differences d_i = c_i - r_i. The candidate matters only when its full score
/// reaches a threshold t, i.e. when the mean of all N differences reaches
/// delta = t - S(r). After n samples (min_samples <= n < N) the rule computes
///
///     UCB_n = mean(d_1..d_n) + q_n * s_n * sqrt((1 - n/N) / n),
///
/// with s_n the sample standard deviation of the n differences (n - 1 in the
/// denominator), sqrt(1 - n/N) the finite-population correction (after all N
/// samples the mean is exact), and q_n the Student-t quantile with n - 1
/// degrees of freedom at 1 - alpha / K, K = N - min_samples the number of
/// looks. The candidate is stopped at the first n with UCB_n < delta.
///
/// Error rate: if the first n differences of the race order were a simple
/// random sample (without replacement) of the N differences and their mean
/// close to normal, the chance of stopping a candidate whose full mean reaches
/// delta would be at most alpha at each look, and at most alpha over all K
/// looks together (Bonferroni), so at most alpha = 1 - confidence per
/// decision. The race order is fixed (interleaved by task), not random, and
/// the normal model is an approximation for small n; the planted tests
/// measure the actual rate (tests/search/race_test.cpp).
///
/// The quantiles are computed once per rule, by bisection on the closed-form
/// Student-t distribution function for whole degrees of freedom (plain
/// arithmetic, sqrt and atan: no special-function library); every other step
/// is plain arithmetic in a fixed order.

#include <bosch/error.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace bosch::search {

/// The distribution function of Student's t with `nu` >= 1 degrees of
/// freedom at `t`, from the closed forms for whole nu (Abramowitz and Stegun
/// 26.7.3 and 26.7.4): with theta = atan(t / sqrt(nu)),
///   nu odd:  1/2 + (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...)) / pi,
///   nu even: 1/2 + sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...) / 2,
/// each series to the power cos^(nu - 3) (odd) or cos^(nu - 2) (even).
inline double student_t_cdf(double t, int nu) {
  const double pi = 3.14159265358979323846;
  const double n = static_cast<double>(nu);
  const double r = std::sqrt(n + t * t);
  const double sn = t / r, cs = std::sqrt(n) / r, c2 = cs * cs;
  double sum = 1.0, term = 1.0;
  if (nu % 2 == 1) {
    const double theta = std::atan(t / std::sqrt(n));
    if (nu == 1) return 0.5 + theta / pi;
    for (int k = 2; k <= nu - 3; k += 2) {
      term *= c2 * static_cast<double>(k) / static_cast<double>(k + 1);
      sum += term;
    }
    return 0.5 + (theta + sn * cs * sum) / pi;
  }
  for (int k = 1; k <= nu - 3; k += 2) {
    term *= c2 * static_cast<double>(k) / static_cast<double>(k + 1);
    sum += term;
  }
  return 0.5 + 0.5 * sn * sum;
}

/// The quantile of Student's t with `nu` >= 1 degrees of freedom at
/// probability `p` in [1/2, 1): the t with student_t_cdf(t, nu) = p, by
/// bisection (a fixed number of halvings of a bracket found by doubling, so
/// the same inputs give the same bits).
inline double student_t_quantile(double p, int nu) {
  double lo = 0.0, hi = 1.0;
  while (student_t_cdf(hi, nu) < p && hi < 1e300) {
    lo = hi;
    hi *= 2.0;
  }
  for (int i = 0; i < 200 && hi - lo > 1e-15 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_cdf(mid, nu) < p ? lo : hi) = mid;
  }
  return hi;
}

/// The racing decision rule (see the file comment).
class RaceRule {
 public:
  RaceRule() = default;
  /// @param samples     N, the samples of a full score (>= 1)
  /// @param min_samples samples scored before the first look (>= 2)
  /// @param confidence  1 - alpha, in (0, 1)
  RaceRule(std::size_t samples, std::size_t min_samples, double confidence)
      : n_(samples), min_(min_samples), crit_(samples + 1, std::numeric_limits<double>::infinity()) {
    if (min_samples < 2)
      throw invalid_argument("at least 2 samples before the first look, got " + std::to_string(min_samples),
                             "race_min_samples");
    if (!(confidence > 0.0 && confidence < 1.0))
      throw invalid_argument("confidence must lie in (0, 1), got " + std::to_string(confidence),
                             "race_confidence");
    if (min_samples >= samples) return;  // no look before the full score
    const double looks = static_cast<double>(samples - min_samples);
    const double alpha = (1.0 - confidence) / looks;
    for (std::size_t n = min_samples; n < samples; ++n)
      crit_[n] = student_t_quantile(1.0 - alpha, static_cast<int>(n - 1));
  }

  /// N, the samples of a full score.
  std::size_t samples() const noexcept { return n_; }
  /// Samples scored before the first look.
  std::size_t min_samples() const noexcept { return min_; }
  /// Whether any look happens before the full score (min_samples < N).
  bool active() const noexcept { return min_ < n_; }
  /// q_n, the critical value of the look after n samples (+inf when there is none).
  double critical(std::size_t n) const noexcept {
    return n < crit_.size() ? crit_[n] : std::numeric_limits<double>::infinity();
  }

  /// The mean of `d`.
  static double mean(std::span<const double> d) {
    double s = 0;
    for (double x : d) s += x;
    return d.empty() ? 0.0 : s / static_cast<double>(d.size());
  }
  /// The standard error of mean(d) as an estimate of the mean of all N
  /// differences: s_n * sqrt((1 - n/N) / n) (0 for n < 2 or n >= N).
  double standard_error(std::span<const double> d) const {
    const std::size_t n = d.size();
    if (n < 2 || n >= n_) return 0.0;
    const double m = mean(d);
    double ss = 0;
    for (double x : d) ss += (x - m) * (x - m);
    const double var = ss / static_cast<double>(n - 1);
    const double nn = static_cast<double>(n);
    return std::sqrt(var * (1.0 - nn / static_cast<double>(n_)) / nn);
  }
  /// UCB_n of the differences `d` (n = d.size(); +inf when there is no look at n).
  double upper_bound(std::span<const double> d) const {
    const double q = critical(d.size());
    if (!std::isfinite(q)) return std::numeric_limits<double>::infinity();
    return mean(d) + q * standard_error(d);
  }
  /// True when the candidate with differences `d` is to be stopped: a look
  /// happens at n = d.size() and UCB_n < delta.
  bool stop(std::span<const double> d, double delta) const { return upper_bound(d) < delta; }

 private:
  std::size_t n_ = 0, min_ = 2;
  std::vector<double> crit_;  // q_n by n; +inf where no look happens
};

}  // namespace bosch::search
