// Stage 2: levels, weights, exact totals, monotonicity, buckets.
#include <doctest/doctest.h>

#include "test_support.hpp"

#include <bosch/bosch.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <numeric>

namespace bs = bosch::search;

TEST_CASE("automatic levels are the counts within level_spread of rho*Hkv") {
  bosch::Options o;  // automatic spread: max(1, round(Hkv / 4))
  CHECK(bs::count_levels({4, 8, 8}, 0.5, o) == std::vector<int>{2, 3, 4, 5, 6});
  // Extended down to Hkv - 2: a hard layer may keep two full heads.
  CHECK(bs::count_levels({4, 8, 4}, 0.875, o) == std::vector<int>{2, 3, 4});
  CHECK(bs::count_levels({30, 9, 3}, 0.75, o) == std::vector<int>{1, 2, 3});
  CHECK(bs::count_levels({4, 1, 1}, 0.25, o) == std::vector<int>{0, 1});
  // Hkv = 3 (SmolLM2) at rho = 0.5: one or two SWA heads per layer, so Stage 3
  // keeps a choice in every layer (a spread of 2 would allow 0..3).
  CHECK(bs::count_levels({30, 9, 3}, 0.5, o) == std::vector<int>{1, 2});
  o.level_spread = 2;
  CHECK(bs::count_levels({4, 8, 4}, 0.875, o) == std::vector<int>{2, 3, 4});
  CHECK(bs::count_levels({30, 9, 3}, 0.5, o) == std::vector<int>{0, 1, 2, 3});
  o.level_spread = 0;
  o.ratio_levels = {0.25, 0.5, 0.5, 1.0};
  CHECK(bs::count_levels({4, 8, 8}, 0.5, o) == std::vector<int>{2, 4, 8});
}

TEST_CASE("weights: clamped, min-max normalized, NaN = hardest") {
  const std::vector<double> d{0.2, -0.1, 0.4, std::nan("")};
  const auto w = bs::layer_weights(d);
  CHECK(w[0] == doctest::Approx(0.5));
  CHECK(w[1] == 0.0);
  CHECK(w[2] == 1.0);
  CHECK(w[3] == 1.0);
  const auto flat = bs::layer_weights(std::vector<double>{0.3, 0.3});
  CHECK(flat == std::vector<double>{0.0, 0.0});
}

TEST_CASE("assigned counts sum exactly to the target and are monotone in the drop") {
  boost::random::mt19937_64 g(bosch::test::seed(1));
  boost::random::uniform_real_distribution<double> u(-0.05, 0.5);
  for (auto init : {bosch::RatioInit::relative, bosch::RatioInit::linear,
                    bosch::RatioInit::quantile, bosch::RatioInit::uniform})
    for (int hkv : {1, 2, 3, 4, 8})
      for (int layers : {1, 2, 5, 9, 28})
        for (double rho : {0.25, 0.5, 0.75, 0.875}) {
          const bosch::HeadLayout lay{layers, hkv, hkv};
          std::vector<double> drops(static_cast<std::size_t>(layers));
          for (auto& d : drops) d = u(g);
          bosch::Options o;
          o.target_ratio = rho;
          o.ratio_init = init;
          const std::size_t t = bosch::target_count(lay, rho);
          const auto plan = bs::assign_ratios(lay, drops, t, o);
          CAPTURE(hkv);
          CAPTURE(layers);
          CAPTURE(rho);
          CHECK(std::accumulate(plan.counts.begin(), plan.counts.end(), 0) == static_cast<int>(t));
          for (int c : plan.counts) CHECK((c >= 0 && c <= hkv));
          // Monotone: a layer with a smaller drop never gets fewer SWA heads.
          for (int a = 0; a < layers; ++a)
            for (int b = 0; b < layers; ++b)
              if (plan.weights[static_cast<std::size_t>(a)] <
                  plan.weights[static_cast<std::size_t>(b)])
                CHECK(plan.counts[static_cast<std::size_t>(a)] >=
                      plan.counts[static_cast<std::size_t>(b)]);
        }
}

TEST_CASE("relative init: equal drops stay uniform, easy layers gain heads") {
  bosch::Options o;
  o.target_ratio = 0.5;
  const bosch::HeadLayout lay{4, 8, 8};
  auto plan = bs::assign_ratios(lay, std::vector<double>{0.1, 0.1, 0.1, 0.1}, 16, o);
  CHECK(plan.counts == std::vector<int>{4, 4, 4, 4});
  plan = bs::assign_ratios(lay, std::vector<double>{0.0, 0.2, 0.2, 0.4}, 16, o);
  CHECK(plan.counts == std::vector<int>{6, 4, 4, 2});
}

TEST_CASE("unreachable explicit levels raise an error naming ratio_levels") {
  bosch::Options o;
  o.target_ratio = 0.5;
  o.ratio_levels = {0.125, 0.25};
  CHECK_THROWS_WITH_AS(bs::assign_ratios({4, 8, 8}, std::vector<double>(4, 0.1), 16, o),
                       doctest::Contains("ratio_levels"), bosch::invalid_argument);
  // Gapped levels still give the exact total (one layer off-level).
  o.ratio_levels = {0.25, 0.75};
  const auto plan = bs::assign_ratios({3, 8, 8}, std::vector<double>{0.0, 0.1, 0.2}, 12, o);
  CHECK(std::accumulate(plan.counts.begin(), plan.counts.end(), 0) == 12);
}

TEST_CASE("uniform counts and buckets") {
  const bosch::HeadLayout lay{5, 4, 4};
  const auto c = bs::uniform_counts(lay, 12, std::vector<double>{0.5, 0.0, 1.0, 0.2, 0.0});
  CHECK(c == std::vector<int>{2, 3, 2, 2, 3});  // two extra heads to the two easiest layers
  const auto b = bs::ratio_buckets(std::vector<int>{2, 3, 2, 3, 0});
  REQUIRE(b.size() == 3);
  CHECK(b[0] == std::vector<int>{1, 3});
  CHECK(b[1] == std::vector<int>{0, 2});
  CHECK(b[2] == std::vector<int>{4});
  const auto ch = bs::bucket_chunks({0, 1, 2, 3, 4, 5, 6}, 8, 50);
  REQUIRE(ch.size() == 2);
  CHECK(ch[0].size() == 6);
  CHECK(bs::bucket_chunks({0, 1}, 8, 3).size() == 2);  // at least one layer per chunk
}
