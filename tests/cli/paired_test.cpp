// bosch paired: the difference of two evaluate reports over the same samples,
// its paired bootstrap interval, and the refusal of reports that do not pair up.
#include "cli_support.hpp"

#include <bosch/eval/report.hpp>

#include <cmath>

using namespace bosch::test::cli;

namespace {

/// Per-sample scores of two tasks, 6 samples each (task-set order).
std::vector<bosch::SampleScore> scores(double logprob_shift, bool accurate) {
  std::vector<bosch::SampleScore> s;
  for (int t = 0; t < 2; ++t)
    for (int i = 0; i < 6; ++i) {
      const double lp = -0.1 * (i + 1) - 0.3 * t + logprob_shift;
      const double acc = accurate ? 1.0 : (i % 2 == 0 ? 1.0 : 0.0);
      s.push_back({t == 0 ? "niah_single_1" : "passkey", lp, acc, acc});
    }
  return s;
}

nlohmann::json suite(int context) {
  return {{"chat", false}, {"context", context}, {"held_out_samples", 6}, {"samples", 2}, {"task_seed", 0},
          {"tasks", "niah_single_1,passkey"}};
}

/// A file as `bosch evaluate --json` writes it.
std::string write_report(const TempDir& dir, const std::string& name, const std::vector<bosch::SampleScore>& s,
                         int context = 1024, bool references = false) {
  nlohmann::json j{{"mask", name + "-mask.json"},
                   {"model", "test"},
                   {"model_fingerprint", "0123456789abcdef"},
                   {"layout", "2x4x2"},
                   {"swa_heads", 2},
                   {"ratio", 0.5},
                   {"window", 64},
                   {"sinks", 0},
                   {"suite", suite(context)},
                   {"held_out", bosch::to_json(bosch::summarize_held_out(s))}};
  if (references) j["references"] = {{"all-full", bosch::to_json(bosch::summarize_held_out(scores(0.5, true)))}};
  const std::string path = dir / (name + ".json");
  std::ofstream(path) << j.dump(2);
  return path;
}

double num(const nlohmann::json& j) { return j.is_null() ? std::nan("") : j.get<double>(); }

}  // namespace

TEST_CASE("paired: a constant shift gives that shift with a zero-width interval; the rest is the library's paired bootstrap") {
  TempDir dir;
  const auto sa = scores(0.25, true), sb = scores(0.0, false);
  const std::string a = write_report(dir, "a", sa), b = write_report(dir, "b", sb);

  Run r = run({"paired", a, b, "--json"}, dir);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["all"]["samples"] == 12);
  CHECK(num(j["all"]["logprob"]["mean"]) == doctest::Approx(0.25).epsilon(1e-12));
  CHECK(num(j["all"]["logprob"]["ci"][0]) == doctest::Approx(0.25).epsilon(1e-12));
  CHECK(num(j["all"]["logprob"]["ci"][1]) == doctest::Approx(0.25).epsilon(1e-12));
  // Accuracy: A answers all, B every other sample: +0.5, with a real interval.
  CHECK(num(j["all"]["accuracy"]["mean"]) == doctest::Approx(0.5));
  const double lo = num(j["all"]["accuracy"]["ci"][0]), hi = num(j["all"]["accuracy"]["ci"][1]);
  CHECK(lo < 0.5);
  CHECK(hi > 0.5);
  CHECK(lo >= 0.0);
  CHECK(hi <= 1.0);
  REQUIRE(j["per_task"].size() == 2);
  CHECK(j["per_task"][0]["task"] == "niah_single_1");
  CHECK(j["per_task"][1]["samples"] == 6);

  // The figures are bosch::paired_difference's (eval/report.hpp), bit for bit.
  const auto ra = bosch::summarize_held_out(sa), rb = bosch::summarize_held_out(sb);
  const auto acc = bosch::paired_difference(ra, rb, bosch::HeldOutMetric::accuracy);
  CHECK(lo == acc.ci.low);
  CHECK(hi == acc.ci.high);
  const auto task = bosch::paired_difference(ra, rb, bosch::HeldOutMetric::accuracy, "passkey");
  CHECK(num(j["per_task"][1]["accuracy"]["ci"][0]) == task.ci.low);
  CHECK(num(j["per_task"][1]["accuracy"]["ci"][1]) == task.ci.high);

  // B - A mirrors A - B: same resampling indices, negated differences.
  r = run({"paired", b, a, "--json"}, dir);
  REQUIRE(r.status == 0);
  const auto k = nlohmann::json::parse(r.out);
  CHECK(num(k["all"]["accuracy"]["mean"]) == doctest::Approx(-0.5));
  CHECK(num(k["all"]["accuracy"]["ci"][0]) == doctest::Approx(-hi));
  CHECK(num(k["all"]["accuracy"]["ci"][1]) == doctest::Approx(-lo));

  // Another seed or level moves the interval; the text table shows the figures.
  r = run({"paired", a, b, "--json", "--level", "0.5"}, dir);
  REQUIRE(r.status == 0);
  const auto narrow = nlohmann::json::parse(r.out);
  CHECK(num(narrow["all"]["accuracy"]["ci"][1]) - num(narrow["all"]["accuracy"]["ci"][0]) < hi - lo);
  r = run({"paired", a, b}, dir);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("+0.2500 [+0.2500, +0.2500]") != std::string::npos);
  CHECK(r.out.find("passkey") != std::string::npos);
  CHECK(r.out.find("95% paired percentile bootstrap") != std::string::npos);
}

TEST_CASE("paired: FILE#NAME takes a reference of the report") {
  TempDir dir;
  const std::string a = write_report(dir, "a", scores(0.0, true), 1024, true);
  Run r = run({"paired", a + "#all-full", a, "--json"}, dir);
  REQUIRE(r.status == 0);
  CHECK(num(nlohmann::json::parse(r.out)["all"]["logprob"]["mean"]) == doctest::Approx(0.5));
  r = run({"paired", a + "#all-SWA", a}, dir);
  CHECK(r.status == 1);
  CHECK(r.err.find("no reference 'all-SWA'") != std::string::npos);
  CHECK(r.err.find("it has all-full") != std::string::npos);
}

TEST_CASE("paired: reports that do not pair up, and bad options, are refused with the reason") {
  TempDir dir;
  const std::string a = write_report(dir, "a", scores(0.0, true));
  const std::string other = write_report(dir, "other", scores(0.0, true), 2048);
  Run r = run({"paired", a, other}, dir);
  CHECK(r.status == 1);
  CHECK(r.err.find("different held-out sets") != std::string::npos);
  CHECK(r.err.find("context 1024 in A, 2048 in B") != std::string::npos);
  CHECK(r.out.empty());

  // Same suite, tasks in another order: not the same samples.
  auto swapped = scores(0.0, true);
  std::rotate(swapped.begin(), swapped.begin() + 6, swapped.end());
  const std::string rotated = write_report(dir, "rotated", swapped);
  r = run({"paired", a, rotated}, dir);
  CHECK(r.status == 1);
  CHECK(r.err.find("belongs to task") != std::string::npos);

  // No per-sample scores (an old report): nothing to pair.
  {
    auto j = nlohmann::json::parse(slurp(a));
    j["held_out"].erase("samples");
    std::ofstream(dir / "old.json") << j.dump();
  }
  r = run({"paired", a, dir / "old.json"}, dir);
  CHECK(r.status == 1);
  CHECK(r.err.find("no per-sample scores") != std::string::npos);

  std::ofstream(dir / "bad.json") << "{\"held_out\": ";
  r = run({"paired", a, dir / "bad.json"}, dir);
  CHECK(r.status == 1);
  CHECK(r.err.find("bad.json") != std::string::npos);
  r = run({"paired", a, dir / "missing.json"}, dir);
  CHECK(r.status == 1);
  CHECK(r.err.find("missing.json") != std::string::npos);

  r = run({"paired", a}, dir);
  CHECK(r.status == 2);
  r = run({"paired", a, a, "--level", "1.5"}, dir);
  CHECK(r.status == 2);
  CHECK(r.err.find("--level") != std::string::npos);
  r = run({"paired", a, a, "--resamples", "-1"}, dir);
  CHECK(r.status == 2);
  CHECK(r.err.find("--resamples") != std::string::npos);
}

TEST_CASE("paired: a failed write to standard output is an error naming the reason, not exit 0") {
  TempDir dir;
  const std::string a = write_report(dir, "a", scores(0.25, true)), b = write_report(dir, "b", scores(0.0, false));
  for (const bool json : {false, true}) {
    std::vector<std::string> args{"paired", a, b};
    if (json) args.push_back("--json");
    const Run r = run_stdout_to("/dev/full", args, dir);
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(r.err.find("bosch paired: <stdout>") == 0);
    CHECK(r.err.find("No space left on device") != std::string::npos);
  }
}

TEST_CASE("paired: a report without the held-out set's identity is refused, naming the file") {
  TempDir dir;
  const std::string a = write_report(dir, "a", scores(0.25, true)), b = write_report(dir, "b", scores(0.0, false));
  nlohmann::json j = read_json(b);
  j.erase("suite");
  const std::string bare = dir / "bare.json";
  std::ofstream(bare) << j.dump(2);
  // Before: the same-set check was skipped and the difference printed.
  for (const auto& [x, y] : {std::pair{a, bare}, std::pair{bare, a}}) {
    const Run r = run({"paired", x, y}, dir);
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(one_line(r.err));
    CHECK(r.err.find("bare.json") != std::string::npos);
    CHECK(r.err.find("no \"suite\"") != std::string::npos);
    CHECK(r.out.empty());
  }
}
