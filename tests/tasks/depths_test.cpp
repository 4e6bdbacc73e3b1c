// Stratified calibration depths (TaskSuiteOptions::stratified_depths): the
// strata, the suite they go into, and the samples generated at them.
#include "tasks_support.hpp"

#include <bosch/eval/suite.hpp>

#include <algorithm>
#include <cmath>
#include <set>

using namespace bosch;
using namespace bosch::tasks;

TEST_CASE("stratified_depths: sample i of every kind in stratum i, the kinds on distinct sub-strata") {
  for (const auto& [kinds, n] : {std::pair{4, 2}, std::pair{4, 4}, std::pair{1, 8}, std::pair{3, 5}}) {
    for (std::uint64_t seed : {0ULL, 3ULL, 11ULL}) {
      CAPTURE(kinds);
      CAPTURE(n);
      CAPTURE(seed);
      const auto d = stratified_depths(kinds, n, seed);
      REQUIRE(d.size() == static_cast<std::size_t>(kinds));
      std::set<int> fine;  // the sub-stratum of width 1/(n K) each depth falls in
      for (int k = 0; k < kinds; ++k) {
        REQUIRE(d[k].size() == static_cast<std::size_t>(n));
        for (int i = 0; i < n; ++i) {
          CHECK(d[k][i] >= static_cast<double>(i) / n);
          CHECK(d[k][i] < static_cast<double>(i + 1) / n);
          fine.insert(static_cast<int>(std::floor(d[k][i] * n * kinds)));
        }
      }
      CHECK(fine.size() == static_cast<std::size_t>(n * kinds));  // every sub-stratum once
      CHECK(stratified_depths(kinds, n, seed) == d);              // a seed's draw is fixed
      CHECK(stratified_depths(kinds, n, seed + 1) != d);
    }
  }
}

TEST_CASE("suite_specs: stratified depths go to the calibration split of the built-in tasks only") {
  TaskSuiteOptions o;
  o.calibration_samples = 3;
  o.more_contexts = {1024};
  const auto random = suite_specs(o, Split::calibration);
  for (const auto& s : random) CHECK(s.depths.empty());  // RULER's random depths, as before
  o.stratified_depths = true;
  const auto cal = suite_specs(o, Split::calibration);
  REQUIRE(cal.size() == 8);  // 4 kinds x 2 lengths
  for (std::size_t i = 0; i < cal.size(); ++i) {
    REQUIRE(cal[i].depths.size() == 3);
    for (int j = 0; j < 3; ++j) {
      CHECK(cal[i].depths[j] >= j / 3.0);
      CHECK(cal[i].depths[j] < (j + 1) / 3.0);
    }
    CHECK(cal[i].seed == random[i].seed);  // only the depths change
  }
  CHECK(cal[0].depths != cal[4].depths);  // each length draws its own strata
  for (const auto& s : suite_specs(o, Split::held_out)) CHECK(s.depths.empty());

  // Recorded only when on, so that a suite without it reads as before; read back.
  CHECK(to_json(o).at("stratified_depths") == true);
  o.stratified_depths = false;
  CHECK(!to_json(o).contains("stratified_depths"));
  TaskSuiteOptions back;
  update_from_json(back, nlohmann::json{{"stratified_depths", true}}, "test");
  CHECK(back.stratified_depths);
}

TEST_CASE("stratified samples: the needles sit at their strata") {
  const auto tok = test::bpe_tokenizer();
  const auto texts = test::fixture_texts();
  if (!tok || texts.empty()) return;
  TaskSuiteOptions o;
  o.calibration_samples = 4;
  o.stratified_depths = true;
  o.text_files = texts;
  const auto suite = make_task_suite(o, *tok, false);
  REQUIRE(suite.calibration.samples.size() == 16);
  int n = 0;
  for (const auto& s : suite.calibration.samples) {
    const int i = n++ % 4;
    CAPTURE(s.task);
    CAPTURE(i);
    CHECK(s.depth >= i / 4.0);
    CHECK(s.depth < (i + 1) / 4.0);
    // A lone needle lands at the unit boundary nearest the requested depth
    // (with distractor needles the measured depth leaves them out).
    if (s.needles.size() == 1) CHECK(std::abs(s.needles[0].depth - s.depth) < 0.1);
  }
}
