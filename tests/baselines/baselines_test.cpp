// Model-free baselines: RAND, BME, INTR, mask_from_scores.
#include <doctest/doctest.h>

#include "test_support.hpp"

#include <bosch/bosch.hpp>

#include <vector>

namespace bl = bosch::baselines;
using bosch::HeadLayout;
using bosch::HeadMask;

namespace {
std::vector<int> swa_layers(const HeadMask& m) {
  std::vector<int> out;
  for (int l = 0; l < m.layout().num_layers; ++l)
    if (m.count_in_layer(l) == m.layout().num_kv_heads) out.push_back(l);
  return out;
}
}  // namespace

TEST_CASE("layer baselines hit the exact head count, or whole layers on request") {
  for (int hkv : {1, 2, 4, 8})
    for (int layers : {1, 5, 12, 28})
      for (double rho : {0.25, 0.5, 0.75, 0.875}) {
        const HeadLayout lay{layers, hkv, hkv};
        const std::size_t t = bosch::target_count(lay, rho);
        for (const HeadMask& m :
             {bl::layer_rand(lay, rho, 3), bl::layer_bme(lay, rho), bl::layer_intr(lay, rho)}) {
          CHECK(m.count() == t);
          int partial = 0;
          for (int l = 0; l < layers; ++l) partial += m.count_in_layer(l) % hkv != 0;
          CHECK(partial <= 1);
        }
        const int whole = static_cast<int>(std::floor(rho * layers + 0.5));
        for (const HeadMask& m : {bl::layer_rand(lay, rho, 3, bl::LayerCount::whole_layers),
                                  bl::layer_bme(lay, rho, bl::LayerCount::whole_layers),
                                  bl::layer_intr(lay, rho, bl::LayerCount::whole_layers)})
          CHECK(swa_layers(m).size() == static_cast<std::size_t>(whole));
      }
}

TEST_CASE("RAND is seeded") {
  const HeadLayout lay{28, 16, 8};
  CHECK(bl::layer_rand(lay, 0.5, 1) == bl::layer_rand(lay, 0.5, 1));
  CHECK_FALSE(bl::layer_rand(lay, 0.5, 1) == bl::layer_rand(lay, 0.5, 2));
}

TEST_CASE("BME keeps begin, middle and end layers full") {
  const HeadLayout lay{12, 4, 4};
  CHECK(bl::bme_full_order(12) == std::vector<int>{0, 5, 11, 1, 4, 10, 2, 6, 9, 3, 7, 8});
  const HeadMask m = bl::layer_bme(lay, 0.75, bl::LayerCount::whole_layers);  // 9 SWA, 3 full
  for (int l : {0, 5, 11}) CHECK(m.count_in_layer(l) == 0);
  CHECK(m.count() == 36);
}

TEST_CASE("INTR spreads the full layers evenly: full at (i+1) mod p == 0") {
  const HeadLayout lay{12, 4, 4};
  HeadMask m = bl::layer_intr(lay, 0.75, bl::LayerCount::whole_layers);  // 3 full: p = 4
  for (int l = 0; l < 12; ++l) CHECK((m.count_in_layer(l) == 0) == ((l + 1) % 4 == 0));
  m = bl::layer_intr(lay, 0.5, bl::LayerCount::whole_layers);  // p = 2
  for (int l = 0; l < 12; ++l) CHECK((m.count_in_layer(l) == 0) == ((l + 1) % 2 == 0));
}

TEST_CASE("mask_from_scores: lowest scores become SWA, deterministic ties") {
  const HeadLayout lay{2, 4, 4};
  const std::vector<double> s{0.9, 0.1, 0.5, 0.1, 0.2, 0.8, 0.3, 0.7};
  HeadMask g = bl::mask_from_scores(lay, s, 0.5);  // 4 lowest: 0.1 (1), 0.1 (3), 0.2 (4), 0.3 (6)
  CHECK(g.bits() == std::vector<std::uint8_t>{0, 1, 0, 1, 1, 0, 1, 0});
  const std::vector<double> ties(8, 1.0);
  g = bl::mask_from_scores(lay, ties, 0.375);  // 3 heads, lowest flat index first
  CHECK(g.bits() == std::vector<std::uint8_t>{1, 1, 1, 0, 0, 0, 0, 0});
  HeadMask p = bl::mask_from_scores(lay, ties, 0.375, bl::Quota::per_layer);
  CHECK(p.count_in_layer(0) == 2);  // equal layer means: lower layer gets the extra head
  CHECK(p.count_in_layer(1) == 1);
  const std::vector<double> skew{0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0};
  p = bl::mask_from_scores(lay, skew, 0.5, bl::Quota::per_layer);
  CHECK(p.count_in_layer(0) == 2);
  CHECK(p.count_in_layer(1) == 2);
  CHECK_THROWS_AS(bl::mask_from_scores(lay, std::vector<double>(7, 0.0), 0.5),
                  bosch::invalid_argument);
  std::vector<double> bad = s;
  bad[2] = std::nan("");
  CHECK_THROWS_AS(bl::mask_from_scores(lay, bad, 0.5), bosch::invalid_argument);
  CHECK_THROWS_AS(bl::mask_from_scores(lay, s, 1.0), bosch::invalid_argument);
}
