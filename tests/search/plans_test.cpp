// Jackknife plans (Options::plan_candidates, docs/algorithm.md §Jackknife
// plans): Stage 2's plan recomputed with each of Stage 1's screening samples
// left out, the plans' Stage 3 starts raced on every sample. On a planted
// problem where one screening sample makes the wrong layers look cheapest to
// complete (MisleadingSample), the main job's search completes them and the
// refinement undoes little of it; the jackknife plan that leaves that sample
// out starts Stage 3 in the optimum's plan.
#include <doctest/doctest.h>

#include "planted.hpp"

#include <bosch/bosch.hpp>
#include <bosch/search/plans.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

struct Outcome {
  double worst_gap = 0;  // largest (optimum - score) / |optimum| over the seeds
  double mean_gap = 0;
  int worst_decoys = 0;  // most decoy layers entirely SWA in a result
  double forwards = 0;   // sample scores over all seeds
};

bosch::Options main_job(std::uint64_t seed, std::size_t plans) {
  bosch::Options o = bosch::test::main_job_options(seed);
  o.plan_candidates = plans;
  return o;
}

/// The main job's search (refinement budget `refine`) over 8 seeds of
/// MisleadingSample with `layers` layers, exact or with NoisySamples' noise
/// of spread `sigma` on every sample.
Outcome run(std::size_t plans, int layers, std::size_t refine = 16, double sigma = 0) {
  Outcome out;
  constexpr int seeds = 8;
  for (std::uint64_t seed = 0; seed < seeds; ++seed) {
    bosch::test::NoisySamples<bosch::test::MisleadingSample> e(
        bosch::test::MisleadingSample(bosch::HeadLayout{layers, 9, 3}, 300 + seed, 16));
    e.per_task = 4;  // 16 samples; the race order interleaves the tasks, sample 0 first
    e.sigma = sigma;
    e.seed = seed;
    bosch::Options o = main_job(seed, plans);
    o.refine_budget = refine;
    const auto r = bosch::select(e, o);
    const double opt = e.inner.optimum(r.mask.count());
    const double gap = (opt - e.inner.evaluate(r.mask)) / std::abs(opt);
    out.worst_gap = std::max(out.worst_gap, gap);
    out.mean_gap += gap / seeds;
    out.worst_decoys = std::max(out.worst_decoys, e.inner.decoys_complete(r.mask));
    out.forwards += static_cast<double>(e.scored);
  }
  return out;
}

void report(const char* what, const Outcome& without, const Outcome& with) {
  MESSAGE(std::string(what) << ": gap to the optimum without jackknife plans worst " << without.worst_gap << " mean "
               << without.mean_gap << " (decoys completed " << without.worst_decoys << "), with them worst "
               << with.worst_gap << " mean " << with.mean_gap << " (decoys " << with.worst_decoys
               << "); sample scores " << with.forwards / without.forwards << "x");
}

}  // namespace

TEST_CASE("jackknife_plans: the distinct plans with one sample left out, in order, at most max") {
  // Two layers, three samples; the plan completes the layer with the larger mean drop.
  const bosch::search::SampleDrops drops{{1.0, 0.0, 0.0}, {0.0, 0.2, 0.2}};
  auto plan = [](const std::vector<double>& d) { return std::vector<int>{d[0] < d[1] ? 3 : 2, d[0] < d[1] ? 2 : 3}; };
  const std::vector<int> base = plan({1.0 / 3, 0.4 / 3});  // sample 0 makes layer 0 look worse
  CHECK(base == std::vector<int>{2, 3});
  const auto alts = bosch::search::jackknife_plans(drops, plan, base, 4);
  REQUIRE(alts.size() == 1);  // only leaving sample 0 out changes it; samples 1 and 2 agree
  CHECK(alts[0] == std::vector<int>{3, 2});
  CHECK(bosch::search::jackknife_plans(drops, plan, base, 0).empty());
  // Rows of different lengths: the common prefix; fewer than 2 samples: no plan.
  CHECK(bosch::search::jackknife_plans({{1.0}, {0.0, 0.2}}, plan, base, 4).empty());
  CHECK(bosch::search::jackknife_plans({}, plan, base, 4).empty());
}

TEST_CASE("jackknife plans escape a misleading screening sample on every seed") {
  SUBCASE("the plan alone decides (no refinement)") {
    const Outcome without = run(0, 16, 0), with = run(4, 16, 0);
    report("16 layers, no refinement", without, with);
    CHECK(without.worst_decoys == 4);  // Stage 2 completes the decoys, Stage 3 keeps the counts
    CHECK(without.mean_gap > 0.5);
    CHECK(with.worst_decoys == 0);     // the plan that leaves sample 0 out wins on every seed
    CHECK(with.worst_gap < 1e-9);
  }
  SUBCASE("the main job's search (refinement budget 16), 30 layers") {
    const Outcome without = run(0, 30), with = run(4, 30);
    report("30 layers", without, with);
    CHECK(without.worst_decoys >= 1);  // the refinement does not undo every decoy
    CHECK(without.worst_gap > 0.05);
    CHECK(with.worst_decoys == 0);
    CHECK(with.worst_gap < 1e-9);      // the optimum on every seed
    CHECK(with.forwards <= 1.1 * without.forwards);
  }
  SUBCASE("noisy samples") {
    const Outcome without = run(0, 30, 16, 0.05), with = run(4, 30, 16, 0.05);
    report("30 layers, noisy samples", without, with);
    CHECK(with.worst_decoys == 0);
    CHECK(with.mean_gap < without.mean_gap);
  }
}

TEST_CASE("jackknife plans: off by default, logged in Stage 3, deterministic") {
  CHECK(bosch::Options{}.plan_candidates == 0);
  auto job = [](std::size_t plans) {  // no refinement: Stage 3's result is the answer
    bosch::Options o = main_job(2, plans);
    o.refine_budget = 0;
    return o;
  };
  bosch::test::MisleadingSample e(bosch::HeadLayout{16, 9, 3}, 9, 16);
  const auto off = bosch::select(e, job(0));
  bosch::test::MisleadingSample e2(bosch::HeadLayout{16, 9, 3}, 9, 16);
  const auto on = bosch::select(e2, job(4));
  // Stage 1 and 2 are the same; Stage 3 begins with the plan's start and
  // the jackknife starts (exact-count masks).
  std::size_t g_off = 0, g_on = 0;
  for (const auto& rec : off.log) g_off += rec.stage == bosch::Stage::groups;
  for (const auto& rec : on.log) g_on += rec.stage == bosch::Stage::groups;
  CHECK(g_on > g_off);
  CHECK(on.score > off.score);
  for (std::size_t i = 0; i < on.log.size(); ++i)
    if (on.log[i].stage == bosch::Stage::groups) CHECK(on.log[i].mask.count() == on.mask.count());
  bosch::test::MisleadingSample e3(bosch::HeadLayout{16, 9, 3}, 9, 16);
  const auto again = bosch::select(e3, job(4));
  REQUIRE(again.log.size() == on.log.size());
  for (std::size_t i = 0; i < on.log.size(); ++i) CHECK(again.log[i].score == on.log[i].score);
  CHECK(again.mask == on.mask);
  // Without per-sample scores (no racing) there is nothing to leave out: the search is unchanged.
  bosch::test::MisleadingSample e4(bosch::HeadLayout{16, 9, 3}, 9, 16), e5(bosch::HeadLayout{16, 9, 3}, 9, 16);
  bosch::Options a = main_job(2, 0), b = main_job(2, 4);
  a.race = b.race = false;
  CHECK(bosch::select(e4, a).mask == bosch::select(e5, b).mask);
}

TEST_CASE("jackknife plans at rho 0.5 (drops, not completion probes): valid and deterministic") {
  for (std::uint64_t seed = 0; seed < 3; ++seed) {
    bosch::Options o = main_job(seed, 4);
    o.target_ratio = 0.5;
    bosch::test::MisleadingSample e(bosch::HeadLayout{16, 9, 3}, 400 + seed, 16), e2(bosch::HeadLayout{16, 9, 3}, 400 + seed, 16);
    const auto r = bosch::select(e, o), r2 = bosch::select(e2, o);
    CHECK(r.mask.count() == r.target_count);
    CHECK(r.mask == r2.mask);
    CHECK(r.score == r2.score);
  }
}
