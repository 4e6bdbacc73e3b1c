// io::SearchFiles, the checkpoint and log of the `bosch` program and of
// bosch.select: written as the search goes, saved with every finished
// evaluation when the search throws, and never shortened by a search that
// fails while it replays a checkpoint.
#include <doctest/doctest.h>

#include "planted.hpp"
#include "test_support.hpp"
#include <bosch/io/search_files.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("bosch_test_files_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

/// Throws at the n-th evaluation the search reaches (replayed ones included).
struct FailAt {
  std::size_t n;
  void on_evaluation(const bosch::SearchView& v, const bosch::EvaluationRecord&) const {
    if (v.evaluations == n) throw std::runtime_error("planted failure");
  }
};

std::size_t lines(const fs::path& p) {
  std::ifstream in(p);
  return static_cast<std::size_t>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
}

bosch::io::SearchFilePaths paths(const fs::path& checkpoint, std::size_t every, bool resume, const fs::path& log) {
  bosch::io::SearchFilePaths p;
  p.checkpoint = checkpoint.string();
  p.checkpoint_every = p.log_every = every;
  p.resume = resume;
  p.log = log.string();
  return p;
}

/// select() with `files`, saving after an error as the program and Python do.
template <class... C>
bool run(bosch::io::SearchFiles& files, const bosch::HeadLayout& lay, const bosch::Options& o, C&&... more) {
  bosch::test::RedundantEvaluator e(lay, 2, 17);
  try {
    bosch::select(e, o, files, more...);
  } catch (const std::runtime_error&) {
    files.save_after_error(lay, o);
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("a search that throws leaves a checkpoint with every finished evaluation, and resumes from it") {
  const fs::path dir = temp_dir("throw");
  const bosch::HeadLayout lay{6, 8, 4};
  bosch::Options o;
  o.target_ratio = 0.5;
  o.seed = 3;
  bosch::test::RedundantEvaluator whole_eval(lay, 2, 17);
  const bosch::Result whole = bosch::select(whole_eval, o);
  REQUIRE(whole.evaluations > 12);

  const fs::path ck = dir / "run.ckpt", log = dir / "run.jsonl";
  {
    // every = 0: the checkpoint is written only at the end, so what the file
    // holds after the failure is save_after_error's doing.
    bosch::io::SearchFiles files(paths(ck, 0, false, log));
    CHECK_FALSE(run(files, lay, o, FailAt{12}));
  }
  REQUIRE(fs::exists(ck));
  // The failing evaluation (12) finished before its callbacks ran: 12 are saved.
  CHECK(bosch::read_checkpoint(ck).log.size() == 12);
  CHECK_FALSE(bosch::read_checkpoint(ck).complete);

  SUBCASE("a failure during the replay keeps the file as it was") {
    bosch::io::SearchFiles files(paths(ck, 1, true, {}));
    CHECK_FALSE(run(files, lay, o, FailAt{5}));
    CHECK(bosch::read_checkpoint(ck).log.size() == 12);
  }
  SUBCASE("the resumed search ends as the uninterrupted one, its log complete") {
    bosch::io::SearchFiles files(paths(ck, 1, true, log));
    bosch::test::RedundantEvaluator e(lay, 2, 17);
    const bosch::Result r = bosch::select(e, o, files);
    CHECK(r.mask == whole.mask);
    CHECK(bosch::test::same_log(r.log, whole.log));
    CHECK(bosch::read_checkpoint(ck).complete);
    CHECK(lines(log) == whole.evaluations);
  }
  fs::remove_all(dir);
}

TEST_CASE("no checkpoint kept: nothing is saved after an error") {
  const fs::path dir = temp_dir("none");
  const bosch::HeadLayout lay{4, 8, 4};
  bosch::Options o;
  o.target_ratio = 0.5;
  bosch::io::SearchFiles files(paths({}, 1, false, dir / "log.jsonl"));
  CHECK_FALSE(run(files, lay, o, FailAt{3}));
  CHECK_FALSE(files.save_after_error(lay, o));
  CHECK(lines(dir / "log.jsonl") == 3);  // written after each evaluation, before the 3rd one's failure
  fs::remove_all(dir);
}
