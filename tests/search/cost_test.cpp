// The search's cost in full-model sample forwards (bosch::CostedEvaluator):
// recorded per evaluation and in Result::forwards, NaN without the
// capability, carried through checkpoints so that a resumed search reports
// the cost of all of it, and written into the mask metadata.
#include <doctest/doctest.h>

#include "planted.hpp"
#include "test_support.hpp"

#include <bosch/io/checkpoint.hpp>
#include <bosch/io/search_metadata.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>

using bosch::HeadLayout;
using bosch::Options;
namespace fs = std::filesystem;

namespace {

using Costed = bosch::test::CostedEvaluator<bosch::test::CircuitEvaluator>;

Costed costed(std::uint64_t seed) { return Costed{bosch::test::CircuitEvaluator({10, 9, 3}, 3, 3, seed)}; }

Options options(std::uint64_t seed) {
  Options o;
  o.target_ratio = 0.5;
  o.seed = seed;
  return o;
}

struct StopAfter {
  std::size_t n;
  bool on_evaluation(const bosch::SearchView& v, const bosch::EvaluationRecord&) { return v.evaluations >= n; }
};

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

static_assert(bosch::CostedEvaluator<Costed>);
static_assert(!bosch::CostedEvaluator<bosch::test::CircuitEvaluator>);

TEST_CASE("Result::forwards is the evaluator's cost over the search, split over the log's records") {
  for (std::uint64_t s = 0; s < 3; ++s) {
    Costed e = costed(bosch::test::seed(s));
    const bosch::Result r = bosch::select(e, options(bosch::test::seed(10 + s)));
    CHECK(r.forwards == doctest::Approx(e.cost()).epsilon(1e-12));
    double sum = 0;
    bool hinted = false;
    for (const auto& rec : r.log) {
      REQUIRE(std::isfinite(rec.forwards));
      CHECK(rec.forwards > 0);
      CHECK(rec.forwards <= e.samples + 1e-12);
      hinted = hinted || rec.forwards < e.samples;  // a hint restarted some forwards part-way
      sum += rec.forwards;
    }
    CHECK(hinted);
    CHECK(sum == doctest::Approx(r.forwards).epsilon(1e-12));
    // The metadata carries it; an evaluator without the capability reports NaN (null).
    CHECK(bosch::search_metadata(options(0), r).at("forwards").get<double>() == doctest::Approx(r.forwards));
    bosch::test::CircuitEvaluator plain({10, 9, 3}, 3, 3, bosch::test::seed(s));
    const bosch::Result q = bosch::select(plain, options(bosch::test::seed(10 + s)));
    CHECK(bosch::test::same_log(q.log, r.log));  // counting the cost changes nothing else
    CHECK(std::isnan(q.forwards));
    for (const auto& rec : q.log) CHECK(std::isnan(rec.forwards));
    CHECK(bosch::search_metadata(options(0), q).at("forwards").is_null());
  }
}

TEST_CASE("a batch's cost is split evenly over its masks") {
  bosch::test::BatchingEvaluator<Costed> e{costed(bosch::test::seed(4))};
  struct Batched {
    bosch::test::BatchingEvaluator<Costed>* b;
    HeadLayout layout() const { return b->layout(); }
    double evaluate(const bosch::HeadMask& m) { return b->inner.evaluate(m); }
    std::vector<double> evaluate_batch(std::span<const bosch::HeadMask> ms) { return b->evaluate_batch(ms); }
    double cost() const { return b->inner.cost(); }
  } batched{&e};
  const bosch::Result r = bosch::select(batched, options(bosch::test::seed(5)));
  REQUIRE(e.max_batch > 1);
  CHECK(r.forwards == doctest::Approx(e.inner.cost()).epsilon(1e-12));
  double sum = 0;
  for (const auto& rec : r.log) sum += rec.forwards;
  CHECK(sum == doctest::Approx(r.forwards).epsilon(1e-12));
}

TEST_CASE("a resumed search reports the cost of all of it, the replayed part from the checkpoint") {
  const fs::path dir = fs::temp_directory_path() / ("bosch_test_cost_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path ck = dir / "run.checkpoint";
  const Options o = options(bosch::test::seed(20));
  Costed whole_e = costed(bosch::test::seed(21));
  const bosch::Result whole = bosch::select(whole_e, o);
  for (std::size_t cut : {3u, 40u}) {
    CAPTURE(cut);
    fs::remove(ck);
    Costed e1 = costed(bosch::test::seed(21));
    const bosch::Result part = bosch::select(e1, o, bosch::Checkpoint(ck, 1), StopAfter{cut});
    REQUIRE(part.stopped);
    // The checkpoint holds each record's cost, bit for bit.
    const bosch::CheckpointData d = bosch::read_checkpoint(ck);
    REQUIRE(d.log.size() == part.log.size());
    for (std::size_t i = 0; i < d.log.size(); ++i) CHECK(same_bits(d.log[i].forwards, part.log[i].forwards));
    Costed e2 = costed(bosch::test::seed(21));
    const bosch::Result resumed = bosch::select(e2, o, bosch::Checkpoint(ck, 1, bosch::Checkpoint::resume));
    CHECK(bosch::test::same_log(resumed.log, whole.log));
    CHECK(resumed.replayed == cut);
    // This process paid only for the evaluations after the replay (without
    // the hints a replayed reference cannot give: the evaluator never saw it);
    // the result adds the recorded cost of the replayed part.
    double recorded = 0;
    for (const auto& rec : d.log) recorded += rec.forwards;
    CHECK(resumed.forwards == doctest::Approx(recorded + e2.cost()).epsilon(1e-12));
    for (std::size_t i = 0; i < cut; ++i) CHECK(same_bits(resumed.log[i].forwards, whole.log[i].forwards));
  }
  // A checkpoint without costs (an evaluator without the capability) reads back as NaN.
  fs::remove(ck);
  bosch::test::CircuitEvaluator plain({10, 9, 3}, 3, 3, bosch::test::seed(21));
  (void)bosch::select(plain, o, bosch::Checkpoint(ck, 1), StopAfter{5});
  for (const auto& rec : bosch::read_checkpoint(ck).log) CHECK(std::isnan(rec.forwards));
  fs::remove_all(dir);
}
