// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file eval/bootstrap.hpp
/// Percentile bootstrap confidence intervals of a mean, over samples, with
/// optional strata, for the held-out figures of `bosch evaluate`, `select
/// --report` and `compare` (docs/cli.md, "Confidence intervals").
///
/// Why over samples: a held-out figure is a mean over a finite set of task
/// samples; another draw of samples from the same task generator would give
/// another mean. The interval says how far the figure could move under such a
/// redraw (the model and the mask are fixed; nothing else is random).
///
/// The method: B resamples; in each, every stratum (a task) draws as many
/// values as it holds, uniformly with replacement from its own values, and the
/// statistic is the mean over all drawn values; the interval is the
/// ((1 - level) / 2, (1 + level) / 2) quantiles of the B statistics (linear
/// interpolation between order statistics, "type 7"). Stratifying keeps the
/// task mix of every resample equal to the original's, so the overall
/// interval reflects sampling noise within tasks, not a changing task mix.
///
/// Determinism: stratum s draws from its own Boost.Random stream,
/// search::derive_seed(seed, {s}) (include/bosch/search/rng.hpp), one value
/// after the other through all B resamples. So the same values, strata and
/// seed give the same interval on every platform; a stratum resampled on its
/// own (a per-task interval, same id) sees exactly the resamples it sees
/// inside the stratified overall interval; and two metrics of the same
/// samples (two masks' scores, or their difference) are resampled with the
/// same indices: mean(a*) - mean(b*) = mean((a - b)*), so the interval of the
/// per-sample differences is the paired bootstrap of the difference of means.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace bosch::eval {

/// A two-sided interval; both bounds NaN when it could not be computed (no
/// samples, or a value that is not finite).
struct Interval {
  double low = std::numeric_limits<double>::quiet_NaN();
  double high = std::numeric_limits<double>::quiet_NaN();
  /// Both bounds finite.
  bool valid() const noexcept;
  /// low <= x <= high.
  bool contains(double x) const noexcept;
};

/// Settings of the percentile bootstrap.
struct BootstrapOptions {
  std::size_t resamples = 2000;  ///< B >= 1 (2000 gives quantiles of the 2.5% tails to ~1%)
  double level = 0.95;           ///< coverage in (0, 1)
  std::uint64_t seed = 0;        ///< master seed of the strata's streams
};

/// Throws bosch::invalid_argument (where = "resamples" or "level") for a value
/// outside its domain.
void validate(const BootstrapOptions& options);

/// The percentile interval of the mean of `values`. `strata` gives each value's
/// stratum id (same size as `values`; empty = all in stratum 0); the id also
/// picks the stratum's random stream, so a subset resampled with the same ids
/// reproduces its part of the full resamples. One value gives [v, v]; no value
/// or a non-finite one gives a NaN interval. Throws bosch::invalid_argument for
/// mismatched sizes or invalid options.
Interval bootstrap_mean_ci(std::span<const double> values, std::span<const std::size_t> strata = {},
                           const BootstrapOptions& options = {});

/// The p-quantile (p in [0, 1]) of ascending `sorted` values with linear
/// interpolation between order statistics (position p * (n - 1)); NaN for
/// an empty input.
double sorted_quantile(std::span<const double> sorted, double p);

/// A paired comparison of two score vectors over the same samples.
struct PairedDifference {
  int samples = 0;
  double mean = std::numeric_limits<double>::quiet_NaN();  ///< mean(a) - mean(b)
  Interval ci;                                             ///< paired bootstrap interval
};

/// mean(a) - mean(b) with the bootstrap interval of the per-sample differences
/// a[i] - b[i] (same strata rules as bootstrap_mean_ci): both vectors are
/// resampled with the same indices. Throws bosch::invalid_argument when the
/// sizes differ.
PairedDifference paired_bootstrap(std::span<const double> a, std::span<const double> b,
                                  std::span<const std::size_t> strata = {},
                                  const BootstrapOptions& options = {});

}  // namespace bosch::eval
