// Objective layer: memo, budget, anchors, normalization, loss, hints, batches.
#include <doctest/doctest.h>

#include "planted.hpp"
#include "test_support.hpp"

#include <cmath>
#include <limits>
#include <unordered_set>

using bosch::HeadLayout;
using bosch::HeadMask;

namespace {

/// Checks every hint it receives: the reference must be a mask it scored
/// before, and first_changed_layer must be the exact lowest differing layer.
struct HintChecker {
  bosch::test::SeparableEvaluator inner{{6, 8, 4}, 5};
  std::unordered_set<HeadMask> scored;
  std::size_t hinted = 0, plain = 0, bad = 0, batch_hinted = 0;
  HeadLayout layout() const { return inner.layout(); }
  double evaluate(const HeadMask& m) {
    ++plain;
    scored.insert(m);
    return inner.evaluate(m);
  }
  double evaluate(const HeadMask& m, const bosch::EvaluationHint& h) {
    ++hinted;
    check(m, h);
    scored.insert(m);
    return inner.evaluate(m);
  }
  void check(const HeadMask& m, const bosch::EvaluationHint& h) {
    if (!h.reference || !scored.count(*h.reference)) {
      ++bad;
      return;
    }
    if (h.first_changed_layer > bosch::first_changed_layer(m, *h.reference)) ++bad;
  }
};

struct BatchHintChecker : HintChecker {
  std::size_t strict_mismatch = 0;
  std::vector<double> evaluate_batch(std::span<const HeadMask> ms) {
    std::vector<double> out;
    for (const auto& m : ms) out.push_back(HintChecker::evaluate(m));
    return out;
  }
  std::vector<double> evaluate_batch(std::span<const HeadMask> ms, const bosch::EvaluationHint& h) {
    ++batch_hinted;
    int lowest = inner.layout().num_layers;
    for (const auto& m : ms) {
      check(m, h);
      if (h.reference) lowest = std::min(lowest, bosch::first_changed_layer(m, *h.reference));
    }
    if (h.reference && lowest != h.first_changed_layer) ++strict_mismatch;
    std::vector<double> out;
    for (const auto& m : ms) {
      scored.insert(m);
      out.push_back(inner.evaluate(m));
    }
    return out;
  }
};

}  // namespace

static_assert(bosch::HintedEvaluator<HintChecker>);
static_assert(!bosch::BatchEvaluator<HintChecker>);
static_assert(bosch::HintedBatchEvaluator<BatchHintChecker>);

TEST_CASE("memo: a mask is evaluated once; hits are counted") {
  bosch::test::SeparableEvaluator e({3, 4, 4}, 1);
  bosch::Objective obj(e, 6);
  HeadMask a(e.layout()), b(e.layout());
  b.set(1, 2, true);
  CHECK(obj.evaluate(a) == 0.0);
  CHECK(obj.evaluate(b) == doctest::Approx(-e.cost[6]));
  CHECK(obj.evaluate(a) == 0.0);
  CHECK(obj.evaluate(b).has_value());
  CHECK(e.calls == 2);
  CHECK(obj.evaluations() == 2);
  CHECK(obj.cache_hits() == 2);
  CHECK(obj.log().size() == 2);
  CHECK(obj.log()[1].index == 1);
  CHECK(obj.log()[1].mask == b);
  CHECK(obj.log()[1].seconds >= 0.0);
  CHECK(obj.known(b));
  CHECK(*obj.cached(b) == obj.log()[1].score);
}

TEST_CASE("budget: at most max_evaluations, the last one reserved") {
  bosch::test::SeparableEvaluator e({2, 2, 2}, 1);
  bosch::Objective obj(e, 2, 3);
  HeadMask m(e.layout());
  CHECK(obj.remaining() == 2);
  CHECK(obj.evaluate(m).has_value());
  m.set_flat(0, true);
  CHECK(obj.evaluate(m).has_value());
  m.set_flat(1, true);
  CHECK_FALSE(obj.evaluate(m).has_value());  // only the reserve is left
  CHECK(obj.budget_exhausted());
  CHECK(obj.evaluate(m, nullptr, true).has_value());
  m.set_flat(2, true);
  CHECK_FALSE(obj.evaluate(m, nullptr, true).has_value());
  CHECK(e.calls == 3);
  // Memo hits are still answered after the budget is spent.
  CHECK(obj.evaluate(HeadMask(e.layout())).has_value());
}

TEST_CASE("anchors, normalized score (guarded) and the paper's loss") {
  bosch::test::SeparableEvaluator e({2, 2, 2}, 1);
  bosch::Objective obj(e, 2);
  CHECK(obj.normalized(3.0) == 3.0);  // no anchors yet: identity
  obj.set_anchors(10.0, 2.0);
  CHECK(obj.normalized(10.0) == 1.0);
  CHECK(obj.normalized(2.0) == 0.0);
  CHECK(obj.normalized(6.0) == 0.5);
  obj.set_anchors(5.0, 5.0);  // zero denominator: S - S_swa
  CHECK(obj.normalized(7.0) == 2.0);
  CHECK(std::isfinite(obj.normalized(4.0)));
  obj.set_anchors(1.0, 3.0);  // all-SWA scores higher: still increasing in S
  CHECK(obj.normalized(3.0) > obj.normalized(1.0));
  CHECK(bosch::paper_loss(0.8, 10.0, 0.5, 0.5) == doctest::Approx(-0.8));
  CHECK(bosch::paper_loss(0.8, 10.0, 0.6, 0.5) == doctest::Approx(-0.8 + 10.0 * 0.01));
  const std::vector<int> c{2, 3}, t{2, 2}, n{4, 4};
  CHECK(bosch::per_layer_penalty(16.0, c, t, n) == doctest::Approx(1.0));
}

TEST_CASE("observer sees every record; improvement only for exact-count masks; stop") {
  bosch::test::SeparableEvaluator e({2, 2, 2}, 1);
  bosch::Objective obj(e, 2);
  std::vector<std::size_t> seen, improved;
  obj.set_observer([&](const bosch::EvaluationRecord& r, bool imp) {
    seen.push_back(r.index);
    if (imp) improved.push_back(r.index);
    return r.index == 2;  // stop after the third evaluation
  });
  HeadMask m(e.layout());
  obj.evaluate(m);  // 0 heads: not an improvement
  m.set_flat(0, true);
  m.set_flat(1, true);
  obj.evaluate(m);  // 2 heads: first feasible
  m.set_flat(0, false);
  m.set_flat(2, true);
  obj.evaluate(m);  // 2 heads: improvement only if better
  CHECK(obj.stopped());
  m.set_flat(3, true);
  CHECK_FALSE(obj.evaluate(m).has_value());
  CHECK(seen == std::vector<std::size_t>{0, 1, 2});
  REQUIRE(!improved.empty());
  CHECK(improved.front() == 1);
  CHECK(obj.best_mask() != nullptr);
  CHECK(obj.best_mask()->count() == 2);
}

TEST_CASE("hints: exact first changed layer, reference always previously scored") {
  for (auto variant : {bosch::Variant::full, bosch::Variant::single, bosch::Variant::multi,
                       bosch::Variant::layer}) {
    HintChecker h;
    bosch::Options o;
    o.target_ratio = 0.5;
    o.variant = variant;
    const auto r = bosch::select(h, o);
    CHECK(r.mask.count() == 12);
    CHECK(h.bad == 0);
    CHECK(h.hinted > 0);
    CHECK(h.hinted + h.plain == r.evaluator_calls);
  }
  // Stage 1 probes differ from their base only in the probed layer.
  HintChecker h;
  bosch::Options o;
  o.target_ratio = 0.5;
  o.variant = bosch::Variant::single;
  (void)bosch::select(h, o);
  CHECK(h.bad == 0);
}

TEST_CASE("batch hints: shared reference and the minimum first changed layer") {
  BatchHintChecker h;
  bosch::Options o;
  o.target_ratio = 0.5;
  o.exhaustive_when_fits = true;
  const auto r = bosch::select(h, o);
  CHECK(r.mask.count() == 12);
  CHECK(h.bad == 0);
  CHECK(h.strict_mismatch == 0);
  CHECK(h.batch_hinted > 0);
}

TEST_CASE("evaluate_many equals sequential evaluation, duplicates are hits") {
  using BE = bosch::test::BatchingEvaluator<bosch::test::SeparableEvaluator>;
  BE b{bosch::test::SeparableEvaluator({3, 4, 4}, 2)};
  bosch::test::SeparableEvaluator s({3, 4, 4}, 2);
  bosch::Objective ob(b, 6);
  bosch::Objective os(s, 6);
  ob.set_batch_size(2);
  std::vector<HeadMask> ms;
  for (int i = 0; i < 5; ++i) {
    HeadMask m(s.layout());
    m.set_flat(static_cast<std::size_t>(i), true);
    ms.push_back(m);
  }
  ms.push_back(ms[1]);  // duplicate
  const auto rb = ob.evaluate_many(ms);
  const auto rs = os.evaluate_many(ms);
  REQUIRE(rb.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) CHECK(*rb[i] == *rs[i]);
  CHECK(ob.evaluations() == 5);
  CHECK(ob.cache_hits() == 1);
  CHECK(os.cache_hits() == 1);
  CHECK(b.max_batch == 2);
  CHECK(b.batch_calls == 3);
}

TEST_CASE("a batch evaluator returning the wrong number of scores is an error") {
  struct Short {
    HeadLayout layout() const { return {2, 2, 2}; }
    double evaluate(const HeadMask&) { return 0.0; }
    std::vector<double> evaluate_batch(std::span<const HeadMask>) { return {1.0}; }
  } e;
  bosch::Objective obj(e, 2);
  std::vector<HeadMask> ms(3, HeadMask(e.layout()));
  ms[1].set_flat(0, true);
  ms[2].set_flat(1, true);
  CHECK_THROWS_AS(obj.evaluate_many(ms), bosch::error);
}
