// The percentile bootstrap of eval/bootstrap.hpp on crafted inputs: coverage
// on normal samples, determinism, stratification, pairing, edge cases; and the
// held-out summaries built on it (eval/report.hpp).
#include <bosch/eval/bootstrap.hpp>
#include <bosch/eval/report.hpp>
#include <bosch/search/rng.hpp>

#include <doctest/doctest.h>

#include "test_support.hpp"

#include <boost/random/normal_distribution.hpp>

#include <cmath>
#include <limits>
#include <vector>

using namespace bosch;
using namespace bosch::eval;

namespace {

std::vector<double> normal_sample(search::engine& g, std::size_t n, double mean, double sd) {
  boost::random::normal_distribution<double> d(mean, sd);
  std::vector<double> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

}  // namespace

TEST_CASE("bootstrap: a 95% interval of the mean covers the true mean of a normal sample about 95% of the time") {
  search::engine g(test::seed(1));
  BootstrapOptions o;
  o.resamples = 1000;
  const int trials = 400;
  const std::size_t n = 40;
  int covered = 0;
  double width = 0;
  for (int t = 0; t < trials; ++t) {
    o.seed = static_cast<std::uint64_t>(t);
    const auto v = normal_sample(g, n, 2.0, 1.5);
    const Interval ci = bootstrap_mean_ci(v, {}, o);
    REQUIRE(ci.valid());
    CHECK(ci.low <= mean_of(v));
    CHECK(mean_of(v) <= ci.high);
    covered += ci.contains(2.0) ? 1 : 0;
    width += ci.high - ci.low;
  }
  const double coverage = static_cast<double>(covered) / trials;
  INFO("coverage " << coverage);
  // Binomial sd at 95% over 400 trials is 1.1%; the percentile interval runs
  // slightly narrow at n = 40 (about 94%).
  CHECK(coverage > 0.88);
  CHECK(coverage < 0.985);
  // Mean width near the normal-theory 2 * 1.96 * sd / sqrt(n) (the bootstrap
  // uses the plug-in sd, a little smaller).
  const double expected = 2 * 1.96 * 1.5 / std::sqrt(static_cast<double>(n));
  CHECK(width / trials == doctest::Approx(expected).epsilon(0.1));
}

TEST_CASE("bootstrap: same inputs and seed, same interval; another seed, another one") {
  search::engine g(test::seed(2));
  const auto v = normal_sample(g, 25, 0.0, 1.0);
  const Interval a = bootstrap_mean_ci(v), b = bootstrap_mean_ci(v);
  CHECK(a.low == b.low);
  CHECK(a.high == b.high);
  BootstrapOptions other;
  other.seed = 1;
  const Interval c = bootstrap_mean_ci(v, {}, other);
  CHECK((c.low != a.low || c.high != a.high));
  // A fixed input gives fixed bounds on every platform (Boost.Random streams,
  // integer draws, a fixed order of summation): these are the values this
  // implementation computes; a change here changes every published interval.
  const std::vector<double> fixed{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const Interval f = bootstrap_mean_ci(fixed);
  CHECK(f.low == doctest::Approx(3.8).epsilon(1e-12));
  CHECK(f.high == doctest::Approx(7.2).epsilon(1e-12));
}

TEST_CASE("bootstrap: strata are resampled within themselves, so the task mix stays fixed") {
  // Stratum 0 always scores 0, stratum 1 always 1: every stratified resample
  // has the same mean (15 / 20), while an unstratified one varies.
  std::vector<double> v;
  std::vector<std::size_t> s;
  for (int i = 0; i < 5; ++i) v.push_back(0.0), s.push_back(0);
  for (int i = 0; i < 15; ++i) v.push_back(1.0), s.push_back(1);
  const Interval strat = bootstrap_mean_ci(v, s);
  CHECK(strat.low == doctest::Approx(0.75));
  CHECK(strat.high == doctest::Approx(0.75));
  const Interval plain = bootstrap_mean_ci(v);
  CHECK(plain.low < 0.65);
  CHECK(plain.high > 0.85);

  // A stratum resampled on its own (same id) draws exactly the resamples it
  // draws inside the stratified interval: with a constant other stratum, the
  // overall interval is the stratum's interval, shifted and scaled.
  search::engine g(test::seed(3));
  const auto a = normal_sample(g, 12, 0.0, 1.0);
  std::vector<double> both = a;
  std::vector<std::size_t> ids(a.size(), 3);
  for (int i = 0; i < 8; ++i) both.push_back(5.0), ids.push_back(7);
  const Interval alone = bootstrap_mean_ci(a, std::vector<std::size_t>(a.size(), 3));
  const Interval mixed = bootstrap_mean_ci(both, ids);
  CHECK(mixed.low == doctest::Approx((12 * alone.low + 8 * 5.0) / 20).epsilon(1e-9));
  CHECK(mixed.high == doctest::Approx((12 * alone.high + 8 * 5.0) / 20).epsilon(1e-9));
}

TEST_CASE("bootstrap: a paired difference resamples both vectors with the same indices") {
  search::engine g(test::seed(4));
  // b = a + 0.1 + small noise: the samples differ a lot among themselves, the
  // pairs little. The paired interval of a - b is narrow and below 0; the two
  // separate intervals overlap.
  const auto a = normal_sample(g, 30, 0.0, 1.0);
  auto b = a;
  const auto noise = normal_sample(g, 30, 0.0, 0.02);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] += 0.1 + noise[i];
  const PairedDifference d = paired_bootstrap(a, b);
  CHECK(d.samples == 30);
  CHECK(d.mean == doctest::Approx(mean_of(a) - mean_of(b)));
  REQUIRE(d.ci.valid());
  CHECK(d.ci.high < 0.0);
  CHECK(d.ci.high - d.ci.low < 0.05);
  const Interval ia = bootstrap_mean_ci(a), ib = bootstrap_mean_ci(b);
  CHECK(ia.high > ib.low);  // unpaired: no separation
  // A constant shift has a degenerate interval; a vector against itself, 0.
  std::vector<double> shifted = a;
  for (double& x : shifted) x -= 0.25;
  const PairedDifference s = paired_bootstrap(a, shifted);
  CHECK(s.ci.low == doctest::Approx(0.25));
  CHECK(s.ci.high == doctest::Approx(0.25));
  const PairedDifference z = paired_bootstrap(a, a);
  CHECK(z.ci.low == 0.0);
  CHECK(z.ci.high == 0.0);
  CHECK_THROWS_AS(paired_bootstrap(a, std::vector<double>(3, 0.0)), bosch::invalid_argument);
}

TEST_CASE("bootstrap: edge cases and bad options") {
  CHECK_FALSE(bootstrap_mean_ci(std::vector<double>{}).valid());
  const Interval one = bootstrap_mean_ci(std::vector<double>{0.3});
  CHECK(one.low == 0.3);
  CHECK(one.high == 0.3);
  CHECK_FALSE(bootstrap_mean_ci(std::vector<double>{1.0, std::nan("")}).valid());
  CHECK_FALSE(bootstrap_mean_ci(std::vector<double>{1.0, INFINITY}).valid());
  const std::vector<double> v{1, 2};
  CHECK_THROWS_AS(bootstrap_mean_ci(v, std::vector<std::size_t>{0}), bosch::invalid_argument);
  BootstrapOptions bad;
  bad.level = 1.0;
  CHECK_THROWS_AS(bootstrap_mean_ci(v, {}, bad), bosch::invalid_argument);
  bad = {};
  bad.resamples = 0;
  CHECK_THROWS_AS(bootstrap_mean_ci(v, {}, bad), bosch::invalid_argument);
  // Quantiles interpolate between order statistics.
  const std::vector<double> sorted{0, 10, 20, 30};
  CHECK(sorted_quantile(sorted, 0.0) == 0.0);
  CHECK(sorted_quantile(sorted, 1.0) == 30.0);
  CHECK(sorted_quantile(sorted, 0.5) == doctest::Approx(15.0));
  CHECK(sorted_quantile(sorted, 0.25) == doctest::Approx(7.5));
  CHECK(std::isnan(sorted_quantile(std::vector<double>{}, 0.5)));
}

TEST_CASE("held-out summary: per-task and overall means with intervals; JSON round trip; paired differences") {
  std::vector<SampleScore> samples;
  search::engine g(test::seed(5));
  const auto lp = normal_sample(g, 24, -1.0, 0.5);
  for (std::size_t i = 0; i < lp.size(); ++i)
    samples.push_back({i % 3 == 0 ? "passkey" : "niah", lp[i], i % 4 == 0 ? 0.0 : 1.0, i % 2 == 0 ? 1.0 : 0.0});
  const HeldOutReport r = summarize_held_out(samples);
  CHECK(r.all.samples == 24);
  REQUIRE(r.per_task.size() == 2);
  CHECK(r.per_task[0].task == "passkey");  // first appearance
  CHECK(r.per_task[0].samples == 8);
  CHECK(r.per_task[1].samples == 16);
  CHECK(r.all.mean_logprob == doctest::Approx(mean_of(lp)));
  CHECK(r.all.probability == doctest::Approx(std::exp(r.all.mean_logprob)));
  CHECK(r.all.accuracy == doctest::Approx(18.0 / 24));
  CHECK(r.all.exact == doctest::Approx(0.5));
  for (const TaskScore* t : {&r.all, &r.per_task[0], &r.per_task[1]}) {
    CHECK(t->logprob_ci.contains(t->mean_logprob));
    CHECK(t->accuracy_ci.contains(t->accuracy));
    CHECK(t->exact_ci.contains(t->exact));
    CHECK(t->probability_ci.low == doctest::Approx(std::exp(t->logprob_ci.low)));
  }
  // The overall interval (stratified) equals a stratified bootstrap of all values.
  std::vector<std::size_t> ids;
  for (const auto& s : samples) ids.push_back(s.task == "passkey" ? 0 : 1);
  const Interval direct = bootstrap_mean_ci(lp, ids);
  CHECK(r.all.logprob_ci.low == direct.low);
  CHECK(r.all.logprob_ci.high == direct.high);

  // JSON: the samples come back and with them the same intervals.
  const nlohmann::json j = to_json(r);
  CHECK(j.at("all").at("logprob_ci").size() == 2);
  const HeldOutReport back = held_out_report_from_json(nlohmann::json::parse(j.dump()), "test");
  CHECK(back.samples.size() == 24);
  CHECK(back.all.logprob_ci.low == r.all.logprob_ci.low);
  CHECK(back.per_task[1].accuracy_ci.high == r.per_task[1].accuracy_ci.high);
  // Without samples (an older file): means kept, intervals unknown.
  const HeldOutReport old = held_out_report_from_json(to_json(r, false), "test");
  CHECK(old.all.mean_logprob == r.all.mean_logprob);
  CHECK(old.samples.empty());
  CHECK_FALSE(old.all.logprob_ci.valid());
  CHECK_THROWS_AS(held_out_report_from_json({{"all", 1}}, "test"), bosch::format_error);

  // Paired difference of two reports on the same samples.
  auto shifted = samples;
  for (auto& s : shifted) s.logprob -= 0.2;
  const HeldOutReport r2 = summarize_held_out(shifted);
  const PairedDifference d = paired_difference(r, r2, HeldOutMetric::logprob);
  CHECK(d.mean == doctest::Approx(0.2));
  CHECK(d.ci.low == doctest::Approx(0.2));
  const PairedDifference pk = paired_difference(r, r2, HeldOutMetric::accuracy, "passkey");
  CHECK(pk.samples == 8);
  CHECK(pk.mean == doctest::Approx(0.0));
  auto other = samples;
  other[0].task = "niah";
  CHECK_THROWS_AS(paired_difference(r, summarize_held_out(other), HeldOutMetric::logprob), bosch::invalid_argument);
  CHECK(std::isnan(paired_difference(r, old, HeldOutMetric::logprob).mean));
}

TEST_CASE("held-out summary: file tasks' match is summarized over their samples only and round-trips") {
  std::vector<SampleScore> samples;
  for (int i = 0; i < 12; ++i) {
    const bool file = i % 2 == 0;
    samples.push_back({file ? "file:qa.jsonl" : "passkey", -1.0 - 0.1 * i, 0.5, i % 3 == 0 ? 1.0 : 0.0,
                       file ? (i % 4 == 0 ? 1.0 : 0.0) : std::numeric_limits<double>::quiet_NaN()});
  }
  const HeldOutReport r = summarize_held_out(samples);
  CHECK(r.all.match == doctest::Approx(0.5));  // 3 of the 6 file samples
  REQUIRE(r.per_task.size() == 2);
  CHECK(r.per_task[0].match == doctest::Approx(0.5));
  CHECK(std::isnan(r.per_task[1].match));
  CHECK(r.all.match_ci.contains(r.all.match));
  const nlohmann::json j = to_json(r);
  CHECK(j.at("all").contains("match"));
  CHECK_FALSE(j.at("per_task")[1].contains("match"));
  const HeldOutReport back = held_out_report_from_json(nlohmann::json::parse(j.dump()), "test");
  CHECK(back.all.match == r.all.match);
  CHECK(back.all.match_ci.low == r.all.match_ci.low);
  CHECK(std::isnan(back.samples[1].match));
  // Paired match counts the file samples only: here 6, all equal, so 0.
  auto better = samples;
  for (auto& sc : better)
    if (std::isfinite(sc.match)) sc.match = 1.0;
  const auto pm = paired_difference(summarize_held_out(better), r, HeldOutMetric::match);
  CHECK(pm.samples == 6);
  CHECK(pm.mean == doctest::Approx(0.5));  // 3 of 6 went from 0 to 1
  // A report without file tasks has no "match" anywhere, as before.
  std::vector<SampleScore> builtin(samples.begin() + 1, samples.begin() + 2);
  const nlohmann::json b = to_json(summarize_held_out(builtin));
  CHECK_FALSE(b.at("all").contains("match"));
  CHECK_FALSE(b.at("samples").contains("match"));
}
