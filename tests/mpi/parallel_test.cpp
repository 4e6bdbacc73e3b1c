// ParallelEvaluator and mpi::select on 1, 2 or 3 processes (CTest runs this
// suite under mpirun with each count): every mode and group size gives the
// scores, the search result and the evaluation log of one process, bit for
// bit; only rank 0 runs observers; a stop requested on one process stops all
// after the same evaluation; a resume replays rank 0's checkpoint on every
// process. The transformer case runs the real evaluator on stories260K.
#include <bosch/bosch.hpp>
#include <bosch/cpu/backend.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/io/checkpoint.hpp>
#include <bosch/model/model.hpp>
#include <bosch/mpi/evaluator.hpp>
#include <bosch/mpi/select.hpp>
#include <bosch/tasks/tasks.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "mpi_support.hpp"
#include "test_support.hpp"

using bosch::test::mpi::SampleToy;
using bosch::test::mpi::world;
namespace bm = bosch::mpi;

namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// Every (mode, group size) the current process count allows.
std::vector<bm::ParallelOptions> all_settings() {
  std::vector<bm::ParallelOptions> out{{bm::Mode::samples, 1}};
  for (int g = 1; g <= world().size(); ++g)
    if (world().size() % g == 0) out.push_back({bm::Mode::masks, g});
  return out;
}

std::string name(const bm::ParallelOptions& o) {
  return std::string(bm::to_string(o.mode)) + (o.mode == bm::Mode::masks ? " x" + std::to_string(o.group_size) : "");
}

/// The log compared field by field (the seconds are wall times and differ).
void check_same_log(const std::vector<bosch::EvaluationRecord>& a, const std::vector<bosch::EvaluationRecord>& b) {
  CHECK(a.size() == b.size());
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    CHECK(a[i].index == b[i].index);
    CHECK(a[i].mask == b[i].mask);
    CHECK(a[i].stage == b[i].stage);
    CHECK(same_bits(a[i].score, b[i].score));
  }
}

void check_same_result(const bosch::Result& a, const bosch::Result& b) {
  CHECK(a.mask == b.mask);
  CHECK(same_bits(a.score, b.score));
  CHECK(a.evaluations == b.evaluations);
  CHECK(a.eliminated == b.eliminated);
  CHECK(a.stopped == b.stopped);
  check_same_log(a.log, b.log);
}

/// The race fields of two logs, bit for bit.
void check_same_races(const std::vector<bosch::EvaluationRecord>& a, const std::vector<bosch::EvaluationRecord>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].eliminated == b[i].eliminated);
    CHECK(a[i].samples == b[i].samples);
    CHECK(same_bits(a[i].score_sd, b[i].score_sd));
    REQUIRE(a[i].sample_scores.size() == b[i].sample_scores.size());
    for (std::size_t k = 0; k < a[i].sample_scores.size(); ++k)
      CHECK(same_bits(a[i].sample_scores[k], b[i].sample_scores[k]));
  }
}

bosch::Options small_options(std::uint64_t seed) {
  bosch::Options o;
  o.target_ratio = 0.5;
  o.seed = seed;
  o.probe_budget = 4;
  o.chunk_budget = 12;
  return o;
}

/// Counts the hooks it sees; asks for a stop at evaluation `stop_at` on rank `stop_rank` only.
struct Probe {
  int stop_rank = -1;
  std::size_t stop_at = 0;
  std::size_t evaluations = 0, ends = 0;
  bool on_evaluation(const bosch::SearchView& v, const bosch::EvaluationRecord&) {
    ++evaluations;
    return world().rank() == stop_rank && v.evaluations >= stop_at;
  }
};
struct Observer {
  std::size_t evaluations = 0, ends = 0;
  void on_evaluation(const bosch::SearchView&, const bosch::EvaluationRecord&) { ++evaluations; }
  void end_search(const bosch::SearchView&, const bosch::Result&) { ++ends; }
};

}  // namespace

TEST_CASE("share splits n items into contiguous parts, the first n mod p one larger") {
  CHECK(bm::share(5, 2, 0) == std::pair<std::size_t, std::size_t>{0, 3});
  CHECK(bm::share(5, 2, 1) == std::pair<std::size_t, std::size_t>{3, 5});
  CHECK(bm::share(2, 3, 2) == std::pair<std::size_t, std::size_t>{2, 2});
  for (std::size_t n : {0u, 1u, 7u, 64u})
    for (std::size_t p : {1u, 2u, 3u, 8u}) {
      std::size_t next = 0;
      for (std::size_t i = 0; i < p; ++i) {
        const auto [b, e] = bm::share(n, p, i);
        CHECK(b == next);
        CHECK(e - b <= n / p + 1);
        next = e;
      }
      CHECK(next == n);
    }
  CHECK(bm::automatic_group_size(4, 64) == 4);
  CHECK(bm::automatic_group_size(8, 6) == 4);
  CHECK(bm::automatic_group_size(3, 2) == 1);
  CHECK(bm::parse_mode("masks") == bm::Mode::masks);
  CHECK_THROWS_AS(bm::parse_mode("rows"), bosch::invalid_argument);
}

TEST_CASE("every batch scores bit-identically to one process, in every mode and group size") {
  const bosch::HeadLayout layout{5, 6, 3};
  boost::random::mt19937_64 rng(bosch::test::seed(11));
  boost::random::uniform_int_distribution<int> bit(0, 1), width(0, 7);
  for (std::size_t samples : {1u, 2u, 5u, 7u}) {
    SampleToy whole(layout, samples);
    for (const auto& opt : all_settings()) {
      const std::string label = name(opt) + ", samples " + std::to_string(samples);
      CAPTURE(label);
      SampleToy inner(layout, samples);
      bm::ParallelEvaluator par(inner, world(), opt);
      for (int round = 0; round < 6; ++round) {
        std::vector<bosch::HeadMask> batch(static_cast<std::size_t>(width(rng)), bosch::HeadMask(layout));
        for (auto& m : batch)
          for (std::size_t i = 0; i < m.size(); ++i) m.set_flat(i, bit(rng) != 0);
        const auto got = par.evaluate_batch(batch);
        CHECK(got.size() == batch.size());
        for (std::size_t i = 0; i < std::min(got.size(), batch.size()); ++i)
          CHECK(same_bits(got[i], whole.evaluate(batch[i])));
      }
      // A single mask (evaluate) too.
      const bosch::HeadMask one = bosch::HeadMask::filled(layout, true);
      CHECK(same_bits(par.evaluate(one), whole.evaluate(one)));
    }
  }
  SampleToy inner(layout, 4);
  if (world().size() > 1) CHECK_THROWS_AS(bm::ParallelEvaluator(inner, world(), {bm::Mode::masks, world().size() + 1}),
                                          bosch::invalid_argument);
}

TEST_CASE("mpi::select gives one process's mask, score and log in every mode") {
  const bosch::HeadLayout layout{6, 4, 4};
  for (std::uint64_t seed : {1u, 2u}) {
    const auto o = small_options(bosch::test::seed(seed));
    SampleToy whole(layout, 5);
    const bosch::Result ref = bosch::select(whole, o);
    REQUIRE(ref.evaluations > 20);
    for (const auto& opt : all_settings()) {
      const std::string label = name(opt);
    CAPTURE(label);
      SampleToy inner(layout, 5);
      bm::ParallelEvaluator par(inner, world(), opt);
      Observer obs;
      const bosch::Result r = bm::select(par, o, obs);
      check_same_result(r, ref);
      // Observers run on rank 0 only.
      CHECK(obs.evaluations == (world().root() ? r.evaluations : 0));
      CHECK(obs.ends == (world().root() ? 1u : 0u));
    }
  }
}

TEST_CASE("a stop requested by one process stops every process after the same evaluation") {
  const bosch::HeadLayout layout{6, 4, 4};
  const auto o = small_options(bosch::test::seed(3));
  for (const auto& opt : all_settings()) {
    const std::string label = name(opt);
    CAPTURE(label);
    SampleToy inner(layout, 5);
    bm::ParallelEvaluator par(inner, world(), opt);
    Probe probe{world().size() - 1, 17};
    const bosch::Result r = bm::select(par, o, probe);
    CHECK(r.stopped);
    // Stop votes run everywhere; every process saw the same evaluations.
    CHECK(world().max(static_cast<int>(r.evaluations)) == static_cast<int>(r.evaluations));
    CHECK(r.evaluations >= 17);
    CHECK(probe.evaluations == r.evaluations);
  }
}

TEST_CASE("resume: rank 0 reads the checkpoint and every process replays it") {
  const bosch::HeadLayout layout{6, 4, 4};
  const auto o = small_options(bosch::test::seed(4));
  SampleToy whole(layout, 5);
  const bosch::Result ref = bosch::select(whole, o);
  // Rank 0 writes a shared checkpoint; the other ranks get a path that does
  // not exist, so any read or write by them would fail.
  std::string shared = bosch::test::scratch_path("mpi", "run.checkpoint").string();
  world().broadcast(shared);
  const std::string path = world().root() ? shared : "/nonexistent-bosch-dir/run.checkpoint";
  std::filesystem::remove(shared);
  world().barrier();
  for (const auto& opt : all_settings()) {
    const std::string label = name(opt);
    CAPTURE(label);
    SampleToy inner(layout, 5);
    bm::ParallelEvaluator par(inner, world(), opt);
    {
      bosch::Checkpoint ck(path, 1, bosch::Checkpoint::start);
      Probe stop{0, 15};
      const bosch::Result cut = bm::select(par, o, ck, stop);
      CHECK(cut.stopped);
    }
    bosch::Checkpoint ck(path, 1, bosch::Checkpoint::resume);
    const bosch::Result r = bm::select(par, o, ck);
    check_same_result(r, ref);
    CHECK(r.replayed >= 15);
    world().barrier();
    CHECK(std::filesystem::exists(path) == world().root());
  }
  // A corrupt checkpoint is an error on every process (the same type).
  if (world().root()) bosch::test::write_text(shared, "{ not json");
  world().barrier();
  SampleToy inner(layout, 5);
  bm::ParallelEvaluator par(inner, world(), {});
  bosch::Checkpoint bad(path, 1, bosch::Checkpoint::resume);
  CHECK_THROWS_AS(bm::select(par, o, bad), bosch::format_error);
  world().barrier();
  if (world().root()) std::filesystem::remove(shared);
}

TEST_CASE("the transformer evaluator spread over processes gives one process's search (stories260K)") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  const auto text = bosch::test::fixture("text/emma.txt");
  if (path.empty() || text.empty()) return;
  const auto model = bosch::model::load(path);
  const bosch::cpu::Backend backend(model, {.threads = 1});
  bosch::tasks::TaskSpec spec;
  spec.kind = bosch::tasks::TaskKind::copy;
  spec.context_length = 300;
  spec.num_samples = 5;
  spec.seed = bosch::test::seed(5);
  spec.text_files = {text};
  const auto tasks = bosch::tasks::generate(spec, model.tokenizer);
  bosch::TransformerEvaluatorOptions eo;
  eo.window = 16;
  bosch::Options o = small_options(bosch::test::seed(6));
  o.chunk_budget = 8;
  bosch::TransformerEvaluator<bosch::cpu::Backend> whole(backend, tasks, eo);
  const bosch::Result ref = bosch::select(whole, o);
  for (const auto& opt : all_settings()) {
    const std::string label = name(opt);
    CAPTURE(label);
    bosch::TransformerEvaluator<bosch::cpu::Backend> inner(backend, tasks, eo);
    bm::ParallelEvaluator par(inner, world(), opt);
    const bosch::Result r = bm::select(par, o);
    check_same_result(r, ref);
    // Each process ran only its share of the samples.
    const auto [b, e] = inner.sample_range();
    CHECK(e - b <= 5 / static_cast<std::size_t>(par.group_size()) + 1);
  }
}

TEST_CASE("per-sample scores of any samples are one process's, in every mode") {
  const bosch::HeadLayout layout{5, 6, 3};
  boost::random::mt19937_64 rng(bosch::test::seed(12));
  boost::random::uniform_int_distribution<int> bit(0, 1);
  for (std::size_t samples : {1u, 4u, 7u}) {
    SampleToy whole(layout, samples);
    boost::random::uniform_int_distribution<std::size_t> pick(0, samples - 1), width(0, 2 * samples);
    for (const auto& opt : all_settings()) {
      const std::string label = name(opt) + ", samples " + std::to_string(samples);
      CAPTURE(label);
      SampleToy inner(layout, samples);
      bm::ParallelEvaluator par(inner, world(), opt);
      CHECK(par.race_order() == whole.race_order());
      for (int round = 0; round < 5; ++round) {
        bosch::HeadMask m(layout);
        for (std::size_t i = 0; i < m.size(); ++i) m.set_flat(i, bit(rng) != 0);
        std::vector<std::size_t> idx(width(rng));
        for (auto& s : idx) s = pick(rng);  // any samples, repeats included
        const auto got = par.score_samples(m, {}, idx);
        REQUIRE(got.size() == idx.size());
        for (std::size_t k = 0; k < idx.size(); ++k) CHECK(same_bits(got[k], SampleToy::value(m, idx[k])));
      }
      // The cost is every process's samples, the same on every process.
      CHECK(world().max(static_cast<int>(par.cost())) == static_cast<int>(par.cost()));
    }
  }
}

TEST_CASE("a raced search gives one process's mask, log and eliminations in every mode") {
  const bosch::HeadLayout layout{6, 4, 4};
  for (std::uint64_t seed : {1u, 2u}) {
    auto o = small_options(bosch::test::seed(seed));
    o.race = true;
    o.race_min_samples = 3;
    SampleToy whole(layout, 8);
    const bosch::Result ref = bosch::select(whole, o);
    REQUIRE(ref.eliminated > 0);
    for (const auto& opt : all_settings()) {
      const std::string label = name(opt);
      CAPTURE(label);
      SampleToy inner(layout, 8);
      bm::ParallelEvaluator par(inner, world(), opt);
      const bosch::Result r = bm::select(par, o);
      check_same_result(r, ref);
      check_same_races(r.log, ref.log);
    }
  }
}

TEST_CASE("a raced search resumed on another process count replays rank 0's checkpoint") {
  const bosch::HeadLayout layout{6, 4, 4};
  auto o = small_options(bosch::test::seed(9));
  o.race = true;
  o.race_min_samples = 3;
  SampleToy whole(layout, 8);
  const bosch::Result ref = bosch::select(whole, o);
  REQUIRE(ref.eliminated > 0);
  std::size_t first = 0;
  while (!ref.log[first].eliminated) ++first;
  // A single process writes the checkpoint up to just after the first elimination.
  std::string shared = bosch::test::scratch_path("mpi", "raced.checkpoint").string();
  world().broadcast(shared);
  if (world().root()) {
    std::filesystem::remove(shared);
    SampleToy one(layout, 8);
    bosch::Checkpoint ck(shared, 1);
    struct Cut {
      std::size_t at;
      bool on_evaluation(const bosch::SearchView& v, const bosch::EvaluationRecord&) { return v.evaluations >= at; }
    } cut{first + 2};
    (void)bosch::select(one, o, ck, cut);
  }
  world().barrier();
  const std::string path = world().root() ? shared : "/nonexistent-bosch-dir/raced.checkpoint";
  SampleToy inner(layout, 8);
  bm::ParallelEvaluator par(inner, world(), {});
  bosch::Checkpoint ck(path, 0, bosch::Checkpoint::resume);
  const bosch::Result r = bm::select(par, o, ck);
  check_same_result(r, ref);
  check_same_races(r.log, ref.log);
  CHECK(r.replayed == first + 2);
  world().barrier();
  if (world().root()) std::filesystem::remove(shared);
}

TEST_CASE("racing and the cost on the transformer evaluator spread over processes (stories260K)") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  const auto text = bosch::test::fixture("text/emma.txt");
  if (path.empty() || text.empty()) return;
  const auto model = bosch::model::load(path);
  const bosch::cpu::Backend backend(model, {.threads = 1});
  bosch::tasks::TaskSpec spec;
  spec.kind = bosch::tasks::TaskKind::copy;
  spec.context_length = 300;
  spec.num_samples = 6;
  spec.seed = bosch::test::seed(7);
  spec.text_files = {text};
  const auto tasks = bosch::tasks::generate(spec, model.tokenizer);
  bosch::TransformerEvaluatorOptions eo;
  eo.window = 16;
  bosch::Options o = small_options(bosch::test::seed(8));
  o.chunk_budget = 8;
  for (bool race : {false, true}) {
    CAPTURE(race);
    o.race = race;
    o.race_min_samples = 3;
    bosch::TransformerEvaluator<bosch::cpu::Backend> whole(backend, tasks, eo);
    const bosch::Result ref = bosch::select(whole, o);
    CHECK(ref.forwards == doctest::Approx(whole.cost()));
    if (race) MESSAGE("stories260K raced: " << ref.eliminated << " of " << ref.log.size() << " records eliminated");
    for (const auto& opt : all_settings()) {
      const std::string label = name(opt);
      CAPTURE(label);
      bosch::TransformerEvaluator<bosch::cpu::Backend> inner(backend, tasks, eo);
      bm::ParallelEvaluator par(inner, world(), opt);
      const bosch::Result r = bm::select(par, o);
      check_same_result(r, ref);
      check_same_races(r.log, ref.log);
      // Without racing, in samples mode, each sample's forwards run on one
      // process whose cache sees one process's requests: the same cost, to the bit.
      if (!race && opt.mode == bm::Mode::samples) CHECK(same_bits(r.forwards, ref.forwards));
      CHECK(world().max(static_cast<int>(r.forwards)) == static_cast<int>(r.forwards));
    }
  }
}
