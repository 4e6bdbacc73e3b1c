// The surrogate model of the objective and the surrogate-assisted inner solver.
#include <doctest/doctest.h>

#include "planted.hpp"
#include "test_support.hpp"

#include <bosch/search/surrogate.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <cmath>
#include <vector>

using bosch::HeadLayout;
using bosch::HeadMask;
namespace bs = bosch::search;

namespace {

/// A random mask with `count` SWA heads.
HeadMask random_mask(const HeadLayout& lay, std::size_t count, bs::engine& g) {
  std::vector<int> idx(lay.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
  bs::shuffle(idx, g);
  HeadMask m(lay);
  for (std::size_t i = 0; i < count; ++i) m.set_flat(static_cast<std::size_t>(idx[i]), true);
  return m;
}

}  // namespace

TEST_CASE("overlap statistics: shared bits and pairs inside and between neighbouring layers") {
  const HeadLayout lay{3, 4, 4};
  HeadMask a(lay), b(lay);
  // Shared bits: (0,0), (0,1), (1,2), (2,3) -> per-layer counts 2, 1, 1.
  for (auto [l, k] : {std::pair{0, 0}, {0, 1}, {1, 2}, {2, 3}, {2, 0}}) a.set(l, k, true);
  for (auto [l, k] : {std::pair{0, 0}, {0, 1}, {1, 2}, {2, 3}, {1, 0}}) b.set(l, k, true);
  const auto o = bs::overlap(bs::PackedMask(a), bs::PackedMask(b));
  CHECK(o.linear == 4);
  // Within layers: C(2,2) + C(1,2) + C(1,2) = 1; neighbours: 2*1 + 1*1 = 3.
  CHECK(o.pairwise == 4);
  // Wide layers use several words per layer.
  const HeadLayout wide{2, 130, 130};
  HeadMask c(wide);
  c.set(0, 3, true);
  c.set(0, 129, true);
  c.set(1, 64, true);
  const auto w = bs::overlap(bs::PackedMask(c), bs::PackedMask(c));
  CHECK(w.linear == 3);
  CHECK(w.pairwise == 1 + 2);
}

TEST_CASE("the surrogate learns a planted pairwise objective from random masks") {
  // Objective: linear costs plus neighbouring-layer and within-layer pairs,
  // exactly the model's feature space. Trained on 200 random masks, it must
  // rank 200 unseen masks almost as the truth does.
  const HeadLayout lay{10, 3, 3};
  for (std::uint64_t s = 0; s < 3; ++s) {
    bosch::test::CircuitEvaluator e(lay, 4, 5, bosch::test::seed(s));
    bs::engine g(bosch::test::seed(50 + s));
    std::vector<HeadMask> train, test;
    std::vector<double> y, yt;
    for (int i = 0; i < 200; ++i) {
      train.push_back(random_mask(lay, 20, g));
      y.push_back(e.evaluate(train.back()));
      test.push_back(random_mask(lay, 20, g));
      yt.push_back(e.evaluate(test.back()));
    }
    bs::Surrogate model(300);
    model.fit(train, y, train.front(), true);
    REQUIRE(model.ready());
    std::vector<double> pred;
    for (const auto& m : test) pred.push_back(model.predict(m).mean);
    // Pearson correlation of predictions with the truth.
    auto mean = [](const std::vector<double>& v) {
      double sum = 0;
      for (double x : v) sum += x;
      return sum / static_cast<double>(v.size());
    };
    const double mp = mean(pred), mt = mean(yt);
    double sxy = 0, sxx = 0, syy = 0;
    for (std::size_t i = 0; i < pred.size(); ++i) {
      sxy += (pred[i] - mp) * (yt[i] - mt);
      sxx += (pred[i] - mp) * (pred[i] - mp);
      syy += (yt[i] - mt) * (yt[i] - mt);
    }
    const double r = sxy / std::sqrt(sxx * syy);
    CAPTURE(s);
    CHECK(r > 0.95);
    // The spread is positive away from the data and small on it.
    CHECK(model.predict(test.front()).sd > model.predict(train.back()).sd);
  }
}

TEST_CASE("the surrogate is deterministic and degrades gracefully") {
  const HeadLayout lay{4, 2, 2};
  bs::Surrogate m(10);
  std::vector<HeadMask> masks{HeadMask(lay)};
  std::vector<double> y{1.0};
  m.fit(masks, y, masks[0], true);
  CHECK_FALSE(m.ready());  // one point: the mean
  CHECK(m.predict(HeadMask::filled(lay, true)).mean == 1.0);
  masks.push_back(HeadMask::filled(lay, true));
  y.push_back(1.0);
  m.fit(masks, y, masks[0], true);
  CHECK_FALSE(m.ready());  // constant data
  // Same data, same predictions, bit for bit.
  bosch::test::CircuitEvaluator e({8, 3, 3}, 3, 3, 7);
  bs::engine g(3);
  std::vector<HeadMask> tr;
  std::vector<double> ty;
  for (int i = 0; i < 60; ++i) {
    tr.push_back(random_mask({8, 3, 3}, 12, g));
    ty.push_back(e.evaluate(tr.back()));
  }
  bs::Surrogate a(40), b(40);
  a.fit(tr, ty, tr[5], true);
  b.fit(tr, ty, tr[5], true);
  CHECK(a.points() == 40);
  for (int i = 0; i < 10; ++i) {
    const auto pa = a.predict(tr[static_cast<std::size_t>(i)]), pb = b.predict(tr[static_cast<std::size_t>(i)]);
    CHECK(pa.mean == pb.mean);
    CHECK(pa.sd == pb.sd);
  }
}

TEST_CASE("surrogate inner solver: exact counts, within budget, improves on the start") {
  const HeadLayout lay{6, 4, 4};
  for (std::uint64_t s = 0; s < 4; ++s) {
    bosch::test::CircuitEvaluator e(lay, 3, 4, bosch::test::seed(s));
    bosch::Objective<bosch::test::CircuitEvaluator> obj(e, 12);
    bs::SubProblem p;
    p.start = HeadMask(lay);
    bs::Group grp;
    grp.count = 12;
    for (std::size_t i = 0; i < lay.size(); ++i) {
      grp.units.push_back(static_cast<int>(i));
      p.units.push_back({i});
    }
    p.groups.push_back(grp);
    bs::engine g(bosch::test::seed(s));
    p.start = bs::apply_state(p, bs::random_state(p, g));
    p.budget = 80;
    p.stream = bosch::test::seed(10 + s);
    bosch::Options o;
    o.inner_solver = bosch::InnerSolver::surrogate;
    const auto r = bs::solve(obj, p, o);
    CHECK(r.best.count() == 12);
    CHECK(r.evaluations <= 80);
    CHECK(r.score >= e.evaluate(p.start));
    CHECK(r.score == e.evaluate(r.best));
    // Within 3% (normalized by the all-SWA score) of the optimum.
    const double swa = e.evaluate(HeadMask::filled(lay, true));
    CHECK((e.optimum(12) - r.score) / -swa <= 0.03);
  }
}
