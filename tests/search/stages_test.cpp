// The stages added for high ratios and warm starts: head-level probes,
// warm-start candidates, the global refinement.
#include <doctest/doctest.h>

#include "planted.hpp"
#include "test_support.hpp"


#include <vector>

using bosch::HeadLayout;
using bosch::HeadMask;
using bosch::Options;
namespace bs = bosch::search;

namespace {

/// One "key" head per layer costs 1 when SWA, the others 0.01: a whole-layer
/// probe (every head SWA) cannot tell which head it is.
struct KeyHeadEvaluator {
  HeadLayout lay;
  std::vector<int> key;  // per layer
  std::size_t calls = 0;
  KeyHeadEvaluator(HeadLayout l, std::uint64_t seed) : lay(l) {
    bs::engine g(seed);
    for (int i = 0; i < l.num_layers; ++i) key.push_back(bs::uniform_int(g, 0, l.num_kv_heads - 1));
  }
  HeadLayout layout() const { return lay; }
  double evaluate(const HeadMask& m) {
    ++calls;
    double s = 0;
    for (int l = 0; l < lay.num_layers; ++l)
      for (int k = 0; k < lay.num_kv_heads; ++k)
        if (m.swa(l, k)) s -= k == key[static_cast<std::size_t>(l)] ? 1.0 : 0.01;
    return s;
  }
};

}  // namespace

TEST_CASE("head-level probes: at rho = 0.75 on Hkv = 3 Stage 1 finds the key head of every layer") {
  const HeadLayout lay{12, 9, 3};
  for (std::uint64_t s = 0; s < 10; ++s) {
    KeyHeadEvaluator e(lay, bosch::test::seed(s));
    Options o;
    o.target_ratio = 0.75;
    o.seed = s;
    CHECK(bs::probe_count(lay, o) == 2);  // ceil(0.75 * 3) = 3, capped at Hkv - 1
    bosch::Objective<KeyHeadEvaluator> obj(e, bosch::target_count(lay, o.target_ratio));
    obj.set_anchors(e.evaluate(HeadMask(lay)), e.evaluate(HeadMask::filled(lay, true)));
    const auto pr = bs::run_probes(obj, o, 0.0);
    REQUIRE(pr.complete);
    for (int l = 0; l < lay.num_layers; ++l) {
      CAPTURE(l);
      CHECK_FALSE(pr.cascade.swa(l, e.key[static_cast<std::size_t>(l)]));
      CHECK(pr.cascade.count_in_layer(l) == 2);
    }
    // A whole-layer probe (the former default) carries no head information.
    Options whole = o;
    whole.probe_heads = 3;
    bosch::Objective<KeyHeadEvaluator> obj2(e, bosch::target_count(lay, o.target_ratio));
    const auto pw = bs::run_probes(obj2, whole, 0.0);
    for (const auto& row : pw.head_values) {
      const double first = row.front();
      for (double v : row) CHECK(v == first);  // every head equally "valued"
    }
    // And the whole search keeps every key head full: 27 SWA heads of 36 leave
    // 9 full, fewer than the 12 key heads, so the 9 full are all key heads.
    const auto r = bosch::select(e, o);
    int key_full = 0;
    for (int l = 0; l < lay.num_layers; ++l) key_full += !r.mask.swa(l, e.key[static_cast<std::size_t>(l)]);
    CHECK(key_full == 9);
  }
}

TEST_CASE("warm start: the result is never worse than the best candidate, on every seed") {
  const HeadLayout lay{16, 9, 3};
  for (double rho : {0.25, 0.5, 0.75, 0.875}) {
    for (std::uint64_t s = 0; s < 10; ++s) {
      bosch::test::CircuitEvaluator e(lay, 6, 6, bosch::test::seed(s));
      // Candidates: PROXY's ranking, the optimum's complement-free random mask,
      // and a mask with the wrong count (resized with the Stage-1 values).
      // PROXY: the drop when one head alone is SWA.
      bosch::test::CircuitEvaluator scorer = e;
      std::vector<double> drops;
      for (std::size_t i = 0; i < lay.size(); ++i) {
        HeadMask one(lay);
        one.set_flat(i, true);
        drops.push_back(-scorer.evaluate(one));
      }
      const auto proxy = bosch::baselines::mask_from_scores(lay, drops, rho);
      Options o;
      o.target_ratio = rho;
      o.seed = s;
      o.max_evaluations = 60;  // a small budget: the candidates matter
      bs::engine g(s);
      HeadMask odd(lay);
      for (int i = 0; i < 5; ++i) odd.set_flat(static_cast<std::size_t>(bs::uniform_int(g, 0, 47)), true);
      o.initial_masks = {proxy, odd};
      const auto r = bosch::select(e, o);
      CAPTURE(rho);
      CAPTURE(s);
      REQUIRE(r.mask.count() == bosch::target_count(lay, rho));
      CHECK(r.score >= scorer.evaluate(proxy));
      CHECK(r.stage_evaluations[static_cast<std::size_t>(bosch::Stage::seeds)] >= 1);
    }
  }
}

TEST_CASE("initial masks with another layout are refused, naming the candidate") {
  bosch::test::SeparableEvaluator e({4, 4, 4}, 1);
  Options o;
  o.initial_masks = {HeadMask({4, 4, 4}), HeadMask({5, 4, 4})};
  CHECK_THROWS_WITH_AS(bosch::select(e, o), doctest::Contains("initial_masks[1]"),
                       bosch::invalid_argument);
}

TEST_CASE("resize_global keeps the most valuable SWA heads and adds the most valuable full ones") {
  const HeadLayout lay{2, 3, 3};
  std::vector<std::vector<double>> v{{0.5, 0.1, std::nan("")}, {0.9, 0.2, 0.3}};
  HeadMask m(lay);
  for (std::size_t i : {0u, 1u, 3u, 4u}) m.set_flat(i, true);
  HeadMask down = m;
  bs::resize_global(down, 2, v);  // drop the two lowest-valued SWA heads: (0,1) 0.1, (1,1) 0.2
  CHECK(down.swa(0, 0));
  CHECK(down.swa(1, 0));
  CHECK(down.count() == 2);
  HeadMask up = m;
  bs::resize_global(up, 6, v);  // add (1,2) 0.3 and (0,2) (NaN = mean 0.4)
  CHECK(up.count() == 6);
}

TEST_CASE("refinement moves heads between layers that Stage 3's fixed counts keep apart") {
  // Costs differ strongly between layers but not within them, so the best
  // allocation of SWA heads over layers is all that matters; Stage 2 maps
  // drops to counts within one head of rho*Hkv, the refinement may go beyond.
  const HeadLayout lay{8, 4, 4};
  for (std::uint64_t s = 0; s < 5; ++s) {
    bosch::test::SeparableEvaluator e(lay, bosch::test::seed(s));
    for (int l = 0; l < 8; ++l)
      for (int k = 0; k < 4; ++k)
        e.cost[static_cast<std::size_t>(l * 4 + k)] = l < 4 ? 0.01 * (k + 1) : 1.0 + 0.01 * k;
    Options o;
    o.target_ratio = 0.5;  // 16 SWA heads: the optimum puts all of them in layers 0-3
    o.seed = s;
    o.inner_solver = bosch::InnerSolver::surrogate;
    const auto plain = bosch::select(e, o);
    o.refine_budget = 120;
    const auto refined = bosch::select(e, o);
    CAPTURE(s);
    CHECK(refined.score >= plain.score);
    CHECK(refined.score == doctest::Approx(e.global_best(16)).epsilon(1e-12));
    CHECK(refined.stage_evaluations[static_cast<std::size_t>(bosch::Stage::refine)] > 0);
    CHECK(refined.stage_evaluations[static_cast<std::size_t>(bosch::Stage::refine)] <= 120);
  }
}
