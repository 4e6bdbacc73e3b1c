// Mask helpers and the evaluator concepts.
#include <doctest/doctest.h>

#include "test_support.hpp"

#include <bosch/bosch.hpp>

#include <cmath>
#include <span>
#include <vector>

using bosch::HeadLayout;
using bosch::HeadMask;

namespace {
struct NoEvaluate {
  HeadLayout layout() const { return {1, 1, 1}; }
};
struct NoLayout {
  double evaluate(const HeadMask&) { return 0.0; }
};
struct WrongReturn {
  HeadLayout layout() const { return {1, 1, 1}; }
  std::string evaluate(const HeadMask&) { return {}; }
};
struct Minimal {
  HeadLayout layout() const { return {1, 1, 1}; }
  float evaluate(const HeadMask&) const { return 0.0f; }
};
struct Batch : Minimal {
  std::vector<double> evaluate_batch(std::span<const HeadMask> ms) const {
    return std::vector<double>(ms.size(), 0.0);
  }
};
}  // namespace

// Compile-time checks: types lacking evaluate()/layout() are not Evaluators,
// so bosch::select(NoEvaluate&, ...) fails its static_assert with the message
// "bosch::select: the evaluator type must provide layout() ... evaluate(...)".
static_assert(!bosch::Evaluator<NoEvaluate>);
static_assert(!bosch::Evaluator<NoLayout>);
static_assert(!bosch::Evaluator<WrongReturn>);
static_assert(bosch::Evaluator<Minimal>);
static_assert(bosch::Evaluator<const Minimal>);
static_assert(!bosch::BatchEvaluator<Minimal>);
static_assert(bosch::BatchEvaluator<Batch>);
static_assert(!bosch::HintedEvaluator<Batch>);

TEST_CASE("turnover and Jaccard distance") {
  const HeadLayout lay{2, 4, 4};
  HeadMask a(lay), b(lay);
  for (std::size_t i : {0u, 1u, 2u, 3u}) a.set_flat(i, true);          // |S(a)| = 4
  for (std::size_t i : {2u, 3u, 4u, 5u, 6u, 7u}) b.set_flat(i, true);  // |S(b)| = 6
  CHECK(bosch::turnover(a, b) == doctest::Approx(2.0 / std::sqrt(24.0)));
  CHECK(bosch::turnover(b, a) == doctest::Approx(4.0 / std::sqrt(24.0)));
  CHECK(bosch::jaccard_distance(a, b) == doctest::Approx(1.0 - 2.0 / 8.0));
  CHECK(bosch::turnover(a, a) == 0.0);
  CHECK(bosch::jaccard_distance(a, a) == 0.0);
  HeadMask nested = a;
  nested.set_flat(7, true);
  CHECK(bosch::turnover(a, nested) == 0.0);  // nested sets: no turnover
  const HeadMask empty(lay);
  CHECK(bosch::turnover(empty, a) == 0.0);
  CHECK(bosch::jaccard_distance(empty, empty) == 0.0);
  CHECK(bosch::jaccard_distance(empty, a) == 1.0);
  CHECK_THROWS_AS(bosch::turnover(a, HeadMask({3, 4, 4})), bosch::invalid_argument);
}

TEST_CASE("text grid round trip and errors") {
  const HeadLayout lay{3, 8, 4};
  HeadMask m(lay);
  m.set(0, 1, true);
  m.set(2, 0, true);
  m.set(2, 3, true);
  const std::string g = bosch::to_grid(m);
  CHECK(g == ".S..\n....\nS..S\n");
  CHECK(bosch::mask_from_grid(g, 8) == m);
  CHECK(bosch::mask_from_grid("S.\r\n.S\n\n").count() == 2);
  CHECK_THROWS_WITH_AS(bosch::mask_from_grid("S.\n.S.\n", 0, "f.txt"), doctest::Contains("f.txt"),
                       bosch::format_error);
  CHECK_THROWS_WITH_AS(bosch::mask_from_grid("S.\n.x\n"), doctest::Contains("column 2"),
                       bosch::format_error);
  CHECK_THROWS_AS(bosch::mask_from_grid(""), bosch::format_error);
  CHECK_THROWS_AS(bosch::mask_from_grid("S..\n", 4), bosch::format_error);  // 3 KV, 4 query heads
}

TEST_CASE("first changed layer") {
  const HeadLayout lay{4, 2, 2};
  HeadMask a(lay), b(lay);
  CHECK(bosch::first_changed_layer(a, b) == 4);
  b.set(2, 1, true);
  CHECK(bosch::first_changed_layer(a, b) == 2);
  b.set(3, 0, true);
  CHECK(bosch::first_changed_layer(a, b) == 2);
}

TEST_CASE("target_count and invalid layouts") {
  CHECK(bosch::target_count({28, 16, 8}, 0.875) == 196);
  CHECK(bosch::target_count({5, 4, 4}, 0.5) == 10);
  CHECK(bosch::target_count({3, 3, 3}, 0.5) == 5);  // 4.5 rounds up
  CHECK_THROWS_AS(HeadMask(HeadLayout{0, 4, 4}), bosch::invalid_argument);
  CHECK_THROWS_AS(HeadMask(HeadLayout{2, 6, 4}), bosch::invalid_argument);
}

TEST_CASE("checked_target_count refuses ratios that leave nothing to choose, naming the nearest that do") {
  const bosch::HeadLayout l{5, 8, 4};  // 20 KV heads
  CHECK(bosch::checked_target_count(l, 0.05) == 1);
  CHECK(bosch::checked_target_count(l, 0.95) == 19);
  for (double rho : {1e-9, 0.02}) {
    try {
      (void)bosch::checked_target_count(l, rho, "--ratio");
      FAIL("accepted a ratio giving 0 heads");
    } catch (const bosch::invalid_argument& e) {
      CHECK(e.where() == "--ratio");
      CHECK(std::string(e.what()).find("gives 0 of 20 KV heads SWA") != std::string::npos);
      CHECK(std::string(e.what()).find("0.05 (1 head) and 0.95 (19 heads)") != std::string::npos);
    }
  }
  CHECK_THROWS_WITH_AS(bosch::checked_target_count(l, 0.99), doctest::Contains("gives 20 of 20"),
                       bosch::invalid_argument);
  CHECK_THROWS_AS(bosch::checked_target_count({1, 1, 1}, 0.5), bosch::invalid_argument);
}

TEST_CASE("parse_layout says which count is wrong") {
  CHECK_THROWS_WITH_AS(bosch::parse_layout("5x8x3"),
                       doctest::Contains("8 query heads are not a multiple of 3 KV heads"),
                       bosch::invalid_argument);
  CHECK_THROWS_WITH_AS(bosch::parse_layout("0x8x4"), doctest::Contains("at least 1"), bosch::invalid_argument);
  CHECK_THROWS_WITH_AS(bosch::parse_layout("5x8x16"), doctest::Contains("8 query heads are not a multiple of 16"),
                       bosch::invalid_argument);
  CHECK_THROWS_WITH_AS(bosch::parse_layout("a5x8"), doctest::Contains("expected LxHqxHkv"), bosch::invalid_argument);
}
