// bosch::choice_margin: the runner-up, the paired interval of the per-sample
// difference, and the masks the samples cannot tell from the choice.
#include <doctest/doctest.h>

#include "planted.hpp"
#include "test_support.hpp"
#include <bosch/bosch.hpp>
#include <bosch/io/search_metadata.hpp>

using bosch::EvaluationRecord;
using bosch::HeadLayout;
using bosch::HeadMask;

namespace {

EvaluationRecord record(const HeadMask& m, std::vector<double> samples, bool eliminated = false) {
  EvaluationRecord r;
  r.mask = m;
  double sum = 0;
  for (double x : samples) sum += x;
  r.score = samples.empty() ? 0.0 : sum / static_cast<double>(samples.size());
  r.samples = samples.size();
  r.sample_scores = std::move(samples);
  r.eliminated = eliminated;
  return r;
}

HeadMask with(const HeadLayout& lay, std::initializer_list<std::size_t> swa) {
  HeadMask m(lay);
  for (std::size_t i : swa) m.set_flat(i, true);
  return m;
}

}  // namespace

TEST_CASE("the margin of a logged choice, computed by hand") {
  const HeadLayout lay{2, 2, 2};
  const HeadMask choice = with(lay, {0, 1}), close = with(lay, {0, 2}), far = with(lay, {1, 3}),
                 raced_out = with(lay, {2, 3}), other_count = with(lay, {0});
  bosch::Result r;
  r.mask = choice;
  r.log = {record(other_count, {5, 5, 5, 5}),              // another SWA count: not a rival
           record(close, {0.8, 0.9, 0.7, 0.8}),
           record(raced_out, {0.99, 0.99}, true),          // eliminated: not scored in full
           record(far, {0.1, 0.1, 0.1, 0.1}),
           record(choice, {1.0, 0.9, 1.1, 1.0})};
  r.score = r.log.back().score;
  const bosch::ChoiceMargin m = bosch::choice_margin(r);
  REQUIRE(m.has_runner_up);
  CHECK(m.runner_up == close);
  CHECK(m.runner_up_score == doctest::Approx(0.8));
  CHECK(m.gap == doctest::Approx(0.2));
  // d = 0.2, 0, 0.4, 0.2: mean 0.2, sd sqrt(0.08 / 3), t(0.975, 3) = 3.1824463.
  const double half = 3.1824463 * std::sqrt(0.08 / 3.0) / 2.0;
  CHECK(m.gap_low == doctest::Approx(0.2 - half).epsilon(1e-6));
  CHECK(m.gap_high == doctest::Approx(0.2 + half).epsilon(1e-6));
  CHECK(m.samples == 4);
  CHECK(m.compared == 2);
  CHECK(m.close == 1);  // `close` only: `far` is 0.9 below with a tight interval
  CHECK(bosch::to_string(m).find("1 of 2 other masks are within the noise") != std::string::npos);

  const nlohmann::json meta = bosch::search_metadata(bosch::Options{}, r);
  REQUIRE(meta.contains("choice"));
  CHECK(meta["choice"]["close"] == 1);
  CHECK(meta["choice"]["gap"].get<double>() == doctest::Approx(0.2));

  // Without per-sample scores: the gap, no interval.
  for (auto& rec : r.log) rec.sample_scores.clear();
  const bosch::ChoiceMargin plain = bosch::choice_margin(r);
  CHECK(plain.gap == doctest::Approx(0.2));
  CHECK(plain.samples == 0);
  CHECK(std::isnan(plain.gap_low));
  CHECK(bosch::to_string(plain).find("no per-sample scores") != std::string::npos);
  // No rival at all: no line, no metadata.
  r.log = {record(choice, {1.0})};
  CHECK_FALSE(bosch::choice_margin(r).has_runner_up);
  CHECK(bosch::to_string(bosch::choice_margin(r)).empty());
  CHECK_FALSE(bosch::search_metadata(bosch::Options{}, r).contains("choice"));
}

TEST_CASE("a raced search's margin: the runner-up is a scored rival and the choice beats it") {
  for (std::uint64_t s = 0; s < 4; ++s) {
    CAPTURE(s);
    bosch::test::NoisySamples<bosch::test::EntangledEvaluator> e(
        bosch::test::EntangledEvaluator({6, 8, 4}, 1, bosch::test::seed(900 + s)));
    e.sigma = 0.05;
    bosch::Options o;
    o.target_ratio = 0.5;
    o.seed = s;
    o.race = true;
    const bosch::Result r = bosch::select(e, o);
    const bosch::ChoiceMargin m = bosch::choice_margin(r);
    REQUIRE(m.has_runner_up);
    CHECK(m.runner_up != r.mask);
    CHECK(m.runner_up.count() == r.mask.count());
    CHECK(m.gap >= 0.0);  // the search keeps its best full score
    CHECK(m.samples == e.sample_count());
    CHECK(m.gap_low <= m.gap_high);
    CHECK(m.close <= m.compared);
    CHECK(m.compared > 0);
  }
}
