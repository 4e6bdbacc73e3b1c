// SPDX-License-Identifier: Apache-2.0
// Percentile bootstrap intervals over samples (see bosch/eval/bootstrap.hpp).

#include <bosch/error.hpp>
#include <bosch/eval/bootstrap.hpp>
#include <bosch/search/rng.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

namespace bosch::eval {

bool Interval::valid() const noexcept { return std::isfinite(low) && std::isfinite(high); }

bool Interval::contains(double x) const noexcept { return low <= x && x <= high; }

void validate(const BootstrapOptions& o) {
  if (o.resamples < 1) throw invalid_argument("must be at least 1, got 0", "resamples");
  if (!(o.level > 0.0 && o.level < 1.0))
    throw invalid_argument("must lie in (0, 1), got " + std::to_string(o.level), "level");
}

double sorted_quantile(std::span<const double> sorted, double p) {
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double h = std::clamp(p, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

Interval bootstrap_mean_ci(std::span<const double> values, std::span<const std::size_t> strata,
                           const BootstrapOptions& options) {
  validate(options);
  if (!strata.empty() && strata.size() != values.size())
    throw invalid_argument("strata has " + std::to_string(strata.size()) + " entries for " +
                               std::to_string(values.size()) + " values",
                           "bootstrap_mean_ci");
  Interval out;
  if (values.empty()) return out;
  for (double v : values)
    if (!std::isfinite(v)) return out;
  if (values.size() == 1) return {values[0], values[0]};

  // Members of each stratum, strata in ascending id order (a fixed order of
  // summation and of the streams' use).
  std::map<std::size_t, std::vector<double>> groups;
  for (std::size_t i = 0; i < values.size(); ++i) groups[strata.empty() ? 0 : strata[i]].push_back(values[i]);
  struct Stratum {
    const std::vector<double>* values;
    search::engine rng;
  };
  std::vector<Stratum> s;
  for (const auto& [id, v] : groups) s.push_back({&v, search::make_engine(options.seed, {id})});

  const double n = static_cast<double>(values.size());
  std::vector<double> stats(options.resamples);
  for (auto& stat : stats) {
    double total = 0;
    for (auto& st : s) {
      const auto& v = *st.values;
      const int last = static_cast<int>(v.size()) - 1;
      for (std::size_t j = 0; j < v.size(); ++j) total += v[static_cast<std::size_t>(search::uniform_int(st.rng, 0, last))];
    }
    stat = total / n;
  }
  std::sort(stats.begin(), stats.end());
  const double tail = (1.0 - options.level) / 2.0;
  out.low = sorted_quantile(stats, tail);
  out.high = sorted_quantile(stats, 1.0 - tail);
  return out;
}

PairedDifference paired_bootstrap(std::span<const double> a, std::span<const double> b,
                                  std::span<const std::size_t> strata, const BootstrapOptions& options) {
  if (a.size() != b.size())
    throw invalid_argument("paired scores differ in length (" + std::to_string(a.size()) + " and " +
                               std::to_string(b.size()) + ")",
                           "paired_bootstrap");
  std::vector<double> d(a.size());
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += (d[i] = a[i] - b[i]);
  PairedDifference out;
  out.samples = static_cast<int>(a.size());
  if (!a.empty()) out.mean = sum / static_cast<double>(a.size());
  out.ci = bootstrap_mean_ci(d, strata, options);
  return out;
}

}  // namespace bosch::eval
