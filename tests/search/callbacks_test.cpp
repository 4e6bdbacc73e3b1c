// Callbacks: hooks fire, returning true stops cleanly, built-ins.
#include <doctest/doctest.h>

#include "planted.hpp"
#include "test_support.hpp"

#include <cmath>
#include <sstream>
#include <string>

using bosch::HeadLayout;
using bosch::Options;
using bosch::Stage;

namespace {

/// Implements every hook and records what it saw.
struct Recorder {
  int n_begin_search = 0, n_end_search = 0;
  std::vector<Stage> begun, ended;
  std::size_t evaluations = 0, improvements = 0;
  double last_improvement = -1e300;
  bool improvements_increase = true, improvement_counts_exact = true;
  std::size_t final_evaluations = 0;
  void begin_search(const bosch::SearchView& v) {
    ++n_begin_search;
    CHECK(v.evaluations == 0);
    CHECK(v.planned_evaluations > 0);
  }
  void end_search(const bosch::SearchView& v, const bosch::Result& r) {
    ++n_end_search;
    final_evaluations = r.evaluations;
    CHECK(v.evaluations == r.evaluations);
  }
  void begin_stage(const bosch::SearchView& v, Stage s) {
    CHECK(v.stage == s);
    begun.push_back(s);
  }
  void end_stage(const bosch::SearchView&, Stage s) { ended.push_back(s); }
  void on_evaluation(const bosch::SearchView& v, const bosch::EvaluationRecord& r) {
    CHECK(r.index == evaluations);
    CHECK(v.evaluations == r.index + 1);
    CHECK(v.log->size() == r.index + 1);
    ++evaluations;
  }
  void on_improvement(const bosch::SearchView& v, const bosch::EvaluationRecord& r) {
    ++improvements;
    improvements_increase &= r.score > last_improvement;
    improvement_counts_exact &= r.mask.count() == v.target_count;
    last_improvement = r.score;
    CHECK(v.best_score == r.score);
  }
};

/// Only one hook, returning bool: stops after `n` evaluations.
struct StopAfter {
  std::size_t n;
  bool on_evaluation(const bosch::SearchView& v, const bosch::EvaluationRecord&) {
    return v.evaluations >= n;
  }
};

/// A stop request from a stage hook.
struct StopAtStage {
  Stage at;
  bool begin_stage(const bosch::SearchView&, Stage s) { return s == at; }
};

}  // namespace

TEST_CASE("every hook fires, in order, with consistent views") {
  bosch::test::SeparableEvaluator e({6, 8, 4}, 1);
  Options o;
  o.target_ratio = 0.5;
  Recorder rec;
  const auto r = bosch::select(e, o, rec);
  CHECK(rec.n_begin_search == 1);
  CHECK(rec.n_end_search == 1);
  CHECK(rec.begun ==
        std::vector<Stage>{Stage::anchors, Stage::probes, Stage::ratios, Stage::groups, Stage::refine});
  CHECK(rec.ended == rec.begun);
  CHECK(rec.evaluations == r.evaluations);
  CHECK(rec.final_evaluations == r.evaluations);
  CHECK(rec.improvements >= 1);
  CHECK(rec.improvements_increase);
  CHECK(rec.improvement_counts_exact);
  CHECK(rec.last_improvement == r.score);
}

TEST_CASE("several callbacks, temporaries and lvalues mixed") {
  bosch::test::SeparableEvaluator e({4, 4, 4}, 2);
  Recorder a;
  std::ostringstream out;
  const auto r =
      bosch::select(e, Options{}, a, bosch::ProgressReporter(out, 5), bosch::EarlyStop{});
  CHECK(a.evaluations == r.evaluations);
  CHECK(out.str().find("bosch [") != std::string::npos);
  CHECK(out.str().find("evaluations") != std::string::npos);
  CHECK(out.str().find("bosch: done") != std::string::npos);
  CHECK_FALSE(r.stopped);
}

TEST_CASE("returning true stops the search; the result still has the exact count") {
  for (std::size_t n : {1u, 2u, 3u, 10u, 40u, 70u}) {
    bosch::test::SeparableEvaluator e({6, 8, 4}, 3);
    Options o;
    o.target_ratio = 0.5;
    const auto r = bosch::select(e, o, StopAfter{n});
    CAPTURE(n);
    CHECK(r.stopped);
    CHECK(r.evaluations == n);
    CHECK(e.calls == n);
    CHECK(r.mask.count() == 12);
    if (std::isfinite(r.score)) CHECK(r.score == e.evaluate(r.mask));
  }
  // Stopping at each stage boundary.
  for (Stage s : {Stage::anchors, Stage::probes, Stage::ratios, Stage::groups}) {
    bosch::test::SeparableEvaluator e({5, 8, 4}, 4);
    const auto r = bosch::select(e, Options{}, StopAtStage{s});
    CHECK(r.stopped);
    CHECK(r.mask.count() == bosch::target_count(e.layout(), 0.5));
  }
}

TEST_CASE("EarlyStop criteria") {
  bosch::test::SeparableEvaluator e({6, 8, 4}, 5);
  Options o;
  o.target_ratio = 0.5;
  const auto full = bosch::select(e, o);
  {
    bosch::test::SeparableEvaluator e2({6, 8, 4}, 5);
    const auto r = bosch::select(e2, o, bosch::EarlyStop{.max_evaluations = 20});
    CHECK(r.stopped);
    CHECK(r.evaluations == 20);
  }
  {
    // Target score: stop at the first exact-count mask scoring at least the
    // final result minus a margin.
    bosch::test::SeparableEvaluator e2({6, 8, 4}, 5);
    bosch::EarlyStop stop;
    stop.target_score = full.score - 10.0;  // any exact-count mask qualifies
    const auto r = bosch::select(e2, o, stop);
    CHECK(r.stopped);
    CHECK(r.evaluations < full.evaluations);
    CHECK(r.score >= stop.target_score);
  }
  {
    bosch::test::SeparableEvaluator e2({6, 8, 4}, 5);
    bosch::EarlyStop stop;
    stop.patience = 3;
    const auto r = bosch::select(e2, o, stop);
    CHECK(r.stopped);
    CHECK(r.evaluations < full.evaluations);
    CHECK(r.mask.count() == 12);
  }
}

TEST_CASE("ProgressReporter prints stage, counts of the plan, best score and ETA") {
  bosch::test::SeparableEvaluator e({4, 8, 8}, 6);
  std::ostringstream out;
  Options o;
  o.max_evaluations = 30;
  (void)bosch::select(e, o, bosch::ProgressReporter(out));
  const std::string s = out.str();
  CHECK(s.find("bosch: stage probes") != std::string::npos);
  CHECK(s.find("/30 evaluations") != std::string::npos);
  CHECK(s.find("ETA") != std::string::npos);
  CHECK(s.find("best -") != std::string::npos);  // before any exact-count mask
}
