// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file margin.hpp
/// How clearly a search's choice beats the other masks it scored: the
/// runner-up (the best other mask with the target count scored in full) and,
/// when the evaluator scores per sample (racing, screening), the paired
/// difference over the calibration samples with its 95% interval, treating
/// the samples as draws from the task distribution. A choice whose interval
/// reaches 0, or with several masks within the noise, could have gone
/// another way on other calibration samples: a second run (another
/// task_seed) with a selection between them is then worth its cost
/// (docs/results/draws-0.75). The bosch program prints it after a search and
/// writes it into the mask metadata ("choice").
///
/// @code
/// bosch::Result r = bosch::select(evaluator, options);
/// bosch::ChoiceMargin m = bosch::choice_margin(r);
/// if (m.close > 0) { /* masks the samples cannot tell from the choice */ }
/// @endcode

#include <bosch/mask.hpp>
#include <bosch/options.hpp>
#include <bosch/search/race.hpp>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <string>
#include <unordered_set>
#include <vector>

namespace bosch {

/// See the file comment. Scores are the evaluator's (higher is better).
struct ChoiceMargin {
  /// Whether another mask with the target count was scored in full.
  bool has_runner_up = false;
  HeadMask runner_up;
  double runner_up_score = std::numeric_limits<double>::quiet_NaN();
  /// Result::score minus runner_up_score (>= 0 when the search chose its best).
  double gap = std::numeric_limits<double>::quiet_NaN();
  /// The 95% interval of the mean per-sample difference choice - runner-up
  /// (Student t over `samples` samples); NaN without per-sample scores.
  double gap_low = std::numeric_limits<double>::quiet_NaN();
  double gap_high = std::numeric_limits<double>::quiet_NaN();
  std::size_t samples = 0;
  /// Other target-count masks scored in full whose paired difference to the
  /// choice has an interval reaching 0: masks the samples cannot tell from it.
  std::size_t close = 0;
  /// Other target-count masks scored in full with per-sample scores (those
  /// `close` counts among).
  std::size_t compared = 0;
};

namespace detail {
/// Mean and 95% Student-t half-width of `d` (NaN half-width below 2 values).
inline std::pair<double, double> mean_and_halfwidth(const std::vector<double>& d) {
  const double n = static_cast<double>(d.size());
  double mean = 0;
  for (double x : d) mean += x;
  mean /= n;
  if (d.size() < 2) return {mean, std::numeric_limits<double>::quiet_NaN()};
  double ss = 0;
  for (double x : d) ss += (x - mean) * (x - mean);
  const double se = std::sqrt(ss / (n - 1) / n);
  return {mean, search::student_t_quantile(0.975, static_cast<int>(d.size()) - 1) * se};
}
}  // namespace detail

/// The margin of `r`'s choice over the other masks of its log (see the file comment).
inline ChoiceMargin choice_margin(const Result& r) {
  ChoiceMargin m;
  const std::size_t target = r.mask.count();
  const EvaluationRecord* chosen = nullptr;
  std::vector<const EvaluationRecord*> others;  // the last full record of each other target-count mask
  std::unordered_set<HeadMask> seen;
  for (auto it = r.log.rbegin(); it != r.log.rend(); ++it) {
    if (it->eliminated || it->mask.count() != target || !seen.insert(it->mask).second) continue;
    if (it->mask == r.mask) chosen = &*it;
    else others.push_back(&*it);
  }
  for (const EvaluationRecord* rec : others)
    if (!m.has_runner_up || rec->score > m.runner_up_score) {
      m.has_runner_up = true;
      m.runner_up = rec->mask;
      m.runner_up_score = rec->score;
    }
  if (m.has_runner_up) m.gap = r.score - m.runner_up_score;
  if (!chosen || chosen->sample_scores.empty()) return m;
  for (const EvaluationRecord* rec : others) {
    if (rec->sample_scores.size() != chosen->sample_scores.size()) continue;
    std::vector<double> d(rec->sample_scores.size());
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = chosen->sample_scores[i] - rec->sample_scores[i];
    const auto [mean, half] = detail::mean_and_halfwidth(d);
    ++m.compared;
    if (std::isfinite(half) && mean - half <= 0.0) ++m.close;
    if (rec->mask == m.runner_up && std::isfinite(half)) {
      m.gap_low = mean - half;
      m.gap_high = mean + half;
      m.samples = d.size();
    }
  }
  return m;
}

/// One line for a search's summary, "" without a runner-up:
/// "choice: 0.0142 above the runner-up (95% interval of the per-sample
/// difference [-0.0101, 0.0385], 8 samples); 3 of 12 other masks are within
/// the noise: another task seed may choose differently\n".
inline std::string to_string(const ChoiceMargin& m) {
  if (!m.has_runner_up) return {};
  auto fixed = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.4f", v);
    return std::string(b);
  };
  std::string s = "choice: " + fixed(m.gap) + " above the runner-up";
  if (m.samples == 0) return s + " (no per-sample scores for an interval)\n";
  s += " (95% interval of the per-sample difference [" + fixed(m.gap_low) + ", " + fixed(m.gap_high) + "], " +
       std::to_string(m.samples) + " samples); ";
  if (m.close == 0) return s + "no other mask is within the noise\n";
  return s + std::to_string(m.close) + " of " + std::to_string(m.compared) +
         " other masks are within the noise: another task seed may choose differently\n";
}

}  // namespace bosch
