// Checkpoints: written atomically, resumed runs equal uninterrupted ones,
// mismatches and corruption detected.
#include <doctest/doctest.h>

#include "planted.hpp"
#include <bosch/io/checkpoint.hpp>
#include "test_support.hpp"

#include <filesystem>
#include <fstream>
#include <unordered_set>

using bosch::HeadLayout;
using bosch::Options;
namespace fs = std::filesystem;

namespace {

/// A Checkpoint callback resuming from `path` (it writes only at the end).
bosch::Checkpoint resume(const fs::path& path) {
  return bosch::Checkpoint(path, 0, bosch::Checkpoint::resume);
}

fs::path temp_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("bosch_test_ckpt_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

using bosch::test::same_log;

struct StopAfter {
  std::size_t n;
  bool on_evaluation(const bosch::SearchView& v, const bosch::EvaluationRecord&) {
    return v.evaluations >= n;
  }
};

/// Copies the checkpoint file after evaluation `at` (a "crash" snapshot).
struct SnapshotAt {
  fs::path from, to;
  std::size_t at;
  void on_evaluation(const bosch::SearchView& v, const bosch::EvaluationRecord&) {
    if (v.evaluations == at) fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  }
};

Options base_options(bosch::Variant v, bosch::InnerSolver s) {
  Options o;
  o.target_ratio = 0.625;
  o.seed = 99;
  o.variant = v;
  o.inner_solver = s;
  return o;
}

}  // namespace

TEST_CASE("resume after a stop equals the uninterrupted run (mask and log)") {
  const fs::path dir = temp_dir("stop");
  const HeadLayout lay{7, 16, 8};
  int resumed_runs = 0;
  for (auto v :
       {bosch::Variant::full, bosch::Variant::single, bosch::Variant::multi, bosch::Variant::layer})
    for (auto solver : {bosch::InnerSolver::swap, bosch::InnerSolver::penalized})
      for (std::size_t cut : {1u, 5u, 37u, 90u}) {
        const Options o = base_options(v, solver);
        bosch::test::RedundantEvaluator full_eval(lay, 2, 17);
        const auto full = bosch::select(full_eval, o);
        if (cut >= full.evaluations) continue;
        const fs::path ck = dir / "run.json";
        bosch::test::RedundantEvaluator e1(lay, 2, 17);
        const auto first = bosch::select(e1, o, bosch::Checkpoint(ck, 0), StopAfter{cut});
        REQUIRE(first.stopped);
        REQUIRE(first.evaluations == cut);
        const Options ro = o;
  fs::path rp;
        rp = ck.string();
        bosch::test::RedundantEvaluator e2(lay, 2, 17);
        const auto resumed = bosch::select(e2, ro, resume(rp));
        CAPTURE(bosch::to_string(v));
        CAPTURE(bosch::to_string(solver));
        CAPTURE(cut);
        CHECK(resumed.mask == full.mask);
        CHECK(resumed.score == full.score);
        CHECK(same_log(resumed.log, full.log));
        CHECK(resumed.replayed == cut);
        CHECK(e2.calls == full.evaluations - cut);  // nothing evaluated twice
        CHECK(resumed.evaluator_calls == full.evaluations - cut);
        ++resumed_runs;
      }
  CHECK(resumed_runs >= 28);  // every variant and solver, at least 3 cut points each
  fs::remove_all(dir);
}

TEST_CASE(
    "resume from a checkpoint written mid-run (periodic writes) equals the uninterrupted run") {
  const fs::path dir = temp_dir("periodic");
  const HeadLayout lay{6, 8, 8};
  const Options o = base_options(bosch::Variant::full, bosch::InnerSolver::swap);
  bosch::test::RedundantEvaluator e0(lay, 2, 3);
  bosch::Checkpoint ck(dir / "ck.json", 10);
  const auto full = bosch::select(e0, o, ck, SnapshotAt{dir / "ck.json", dir / "snap.json", 60});
  REQUIRE(full.evaluations > 60);
  CHECK(ck.writes() == full.evaluations / 10 + 1);
  const auto snap = bosch::read_checkpoint(dir / "snap.json");
  CHECK(snap.log.size() == 60);
  CHECK_FALSE(snap.complete);
  CHECK(bosch::read_checkpoint(dir / "ck.json").complete);
  const Options ro = o;
  fs::path rp;
  rp = (dir / "snap.json").string();
  bosch::test::RedundantEvaluator e1(lay, 2, 3);
  const auto resumed = bosch::select(e1, ro, resume(rp));
  CHECK(resumed.mask == full.mask);
  CHECK(same_log(resumed.log, full.log));
  CHECK(e1.calls == full.evaluations - 60);
  // Resuming from the complete checkpoint needs no evaluator call at all.
  rp = (dir / "ck.json").string();
  bosch::test::RedundantEvaluator e2(lay, 2, 3);
  const auto again = bosch::select(e2, ro, resume(rp));
  CHECK(again.mask == full.mask);
  CHECK(e2.calls == 0);
  CHECK(again.evaluator_calls == 0);
  fs::remove_all(dir);
}

TEST_CASE("a resumed search stopped during its replay leaves the checkpoint whole") {
  const fs::path dir = temp_dir("replay_stop");
  const HeadLayout lay{6, 8, 8};
  const Options o = base_options(bosch::Variant::full, bosch::InnerSolver::swap);
  const fs::path ck = dir / "run.json";
  bosch::test::RedundantEvaluator e0(lay, 2, 3);
  const auto first = bosch::select(e0, o, bosch::Checkpoint(ck, 1), StopAfter{40});
  REQUIRE(first.evaluations == 40);
  REQUIRE(bosch::read_checkpoint(ck).log.size() == 40);
  // Resumed and stopped again after 5 evaluations, all of them replayed: the
  // file must still hold the 40 (it used to be rewritten with 5).
  bosch::test::RedundantEvaluator e1(lay, 2, 3);
  bosch::Checkpoint again(ck, 1, bosch::Checkpoint::resume);
  const auto stopped = bosch::select(e1, o, again, StopAfter{5});
  CHECK(stopped.stopped);
  CHECK(stopped.evaluations == 5);
  CHECK(e1.calls == 0);
  CHECK(again.writes() == 0);
  CHECK(bosch::read_checkpoint(ck).log.size() == 40);
  // Past the replay, writing resumes as usual.
  bosch::test::RedundantEvaluator e2(lay, 2, 3);
  bosch::Checkpoint third(ck, 1, bosch::Checkpoint::resume);
  const auto more = bosch::select(e2, o, third, StopAfter{45});
  CHECK(more.evaluations == 45);
  CHECK(bosch::read_checkpoint(ck).log.size() == 45);
  fs::remove_all(dir);
}

TEST_CASE("checkpoint content: magic, format, version, layout, seed, options") {
  const fs::path dir = temp_dir("content");
  bosch::test::SeparableEvaluator e({3, 4, 4}, 1);
  Options o;
  o.seed = 5;
  (void)bosch::select(e, o, bosch::Checkpoint(dir / "c.json", 0));
  std::ifstream in(dir / "c.json");
  const auto j = nlohmann::json::parse(in);
  CHECK(j["magic"] == "bosch.checkpoint");
  CHECK(j["format"] == 1);
  CHECK(j["bosch_version"] == bosch::version_string);
  CHECK(j["seed"] == 5);
  CHECK(j["layout"]["num_kv_heads"] == 4);
  CHECK(j["options"]["target_ratio"] == 0.5);
  CHECK(j["complete"] == true);
  // Options round-trip through JSON.
  const Options back = bosch::options_from_json(j["options"]);
  CHECK(bosch::options_to_json(back) == j["options"]);
  // No temporary files left behind.
  int files = 0;
  for (const auto& f : fs::directory_iterator(dir)) {
    (void)f;
    ++files;
  }
  CHECK(files == 1);
  fs::remove_all(dir);
}

TEST_CASE("resume refuses a checkpoint from another layout, seed or options") {
  const fs::path dir = temp_dir("mismatch");
  bosch::test::SeparableEvaluator e({4, 8, 4}, 1);
  Options o;
  o.seed = 1;
  (void)bosch::select(e, o, bosch::Checkpoint(dir / "c.json", 0), StopAfter{10});
  const Options ro = o;
  fs::path rp;
  rp = (dir / "c.json").string();
  {
    bosch::test::SeparableEvaluator other({5, 8, 4}, 1);
    CHECK_THROWS_WITH_AS(bosch::select(other, ro, resume(rp)), doctest::Contains("layout"),
                         bosch::invalid_argument);
  }
  Options bad = ro;
  bad.seed = 2;
  CHECK_THROWS_WITH_AS(bosch::select(e, bad, resume(rp)), doctest::Contains("seed"),
                       bosch::invalid_argument);
  bad = ro;
  bad.lambda = 7;
  CHECK_THROWS_WITH_AS(bosch::select(e, bad, resume(rp)), doctest::Contains("lambda"),
                       bosch::invalid_argument);
  bad = ro;
  bad.max_evaluations = 500;  // allowed to differ
  bad.batch_size = 3;
  CHECK_NOTHROW((void)bosch::select(e, bad, resume(rp)));
  fs::remove_all(dir);
}

TEST_CASE("torn, corrupt or foreign checkpoints are detected") {
  const fs::path dir = temp_dir("corrupt");
  bosch::test::SeparableEvaluator e({4, 8, 4}, 1);
  Options o;
  (void)bosch::select(e, o, bosch::Checkpoint(dir / "c.json", 0));
  std::string text;
  {
    std::ifstream in(dir / "c.json");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [&](const std::string& s) {
    std::ofstream out(dir / "x.json", std::ios::trunc);
    out << s;
  };
  const Options ro = o;
  fs::path rp;
  rp = (dir / "x.json").string();
  write(text.substr(0, text.size() / 2));  // torn
  CHECK_THROWS_WITH_AS(bosch::select(e, ro, resume(rp)), doctest::Contains("truncated or corrupt"),
                       bosch::format_error);
  std::string flipped = text;  // a score changed: still valid JSON
  const auto pos = flipped.find("\"score\": -");
  REQUIRE(pos != std::string::npos);
  flipped[pos + 11] = flipped[pos + 11] == '1' ? '2' : '1';
  write(flipped);
  CHECK_THROWS_WITH_AS(bosch::select(e, ro, resume(rp)), doctest::Contains("checksum"), bosch::format_error);
  std::string foreign = text;
  foreign.replace(foreign.find("bosch.checkpoint"), 16, "other.checkpoint");
  write(foreign);
  CHECK_THROWS_WITH_AS(bosch::select(e, ro, resume(rp)), doctest::Contains("magic"), bosch::format_error);
  write("[]");
  CHECK_THROWS_AS(bosch::select(e, ro, resume(rp)), bosch::format_error);
  rp = (dir / "missing.json").string();
  CHECK_THROWS_AS(bosch::select(e, ro, resume(rp)), bosch::file_error);
  fs::remove_all(dir);
}

TEST_CASE("after a resume, hints only name masks this evaluator instance has scored") {
  struct Hinted {
    bosch::test::SeparableEvaluator inner{{6, 8, 8}, 4};
    std::unordered_set<bosch::HeadMask> scored;
    std::size_t bad = 0, hinted = 0;
    HeadLayout layout() const { return inner.layout(); }
    double evaluate(const bosch::HeadMask& m) {
      scored.insert(m);
      return inner.evaluate(m);
    }
    double evaluate(const bosch::HeadMask& m, const bosch::EvaluationHint& h) {
      ++hinted;
      if (!h.reference || !scored.count(*h.reference) ||
          h.first_changed_layer != bosch::first_changed_layer(m, *h.reference))
        ++bad;
      return evaluate(m);
    }
  };
  const fs::path dir = temp_dir("hints");
  Options o;
  o.target_ratio = 0.5;
  Hinted a;
  (void)bosch::select(a, o, bosch::Checkpoint(dir / "c.json", 0), StopAfter{40});
  const Options ro = o;
  fs::path rp;
  rp = (dir / "c.json").string();
  Hinted b;
  const auto r = bosch::select(b, ro, resume(rp));
  CHECK(r.replayed == 40);
  CHECK(b.hinted > 0);
  CHECK(b.bad == 0);
  fs::remove_all(dir);
}
