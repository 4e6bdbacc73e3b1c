// TransformerEvaluator on real models: hinted (cached) evaluation equals a full
// evaluation bit for bit, long context matters on the default tasks, and an
// end-to-end select() reaches the exact ratio.
#include <bosch/bosch.hpp>
#include <bosch/cpu/backend.hpp>
#include <bosch/eval/report.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/model/model.hpp>
#include <bosch/tasks/tasks.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <doctest/doctest.h>

#include "test_support.hpp"

namespace {

using Evaluator = bosch::TransformerEvaluator<bosch::cpu::Backend>;

bosch::tasks::TaskSet copy_tasks(const bosch::model::Model& model, int context, int samples) {
  bosch::tasks::TaskSpec spec;
  spec.kind = bosch::tasks::TaskKind::copy;
  spec.context_length = context;
  spec.num_samples = samples;
  spec.seed = bosch::test::seed();
  spec.text_files = {bosch::test::fixture("text/emma.txt")};
  return bosch::tasks::generate(spec, model.tokenizer);
}

bosch::HeadMask random_mask(const bosch::HeadLayout& layout, boost::random::mt19937_64& rng) {
  bosch::HeadMask m(layout);
  boost::random::uniform_int_distribution<int> bit(0, 1);
  for (std::size_t i = 0; i < m.size(); ++i) m.set_flat(i, bit(rng) != 0);
  return m;
}

}  // namespace

TEST_CASE("hinted evaluation gives exactly the score of a full evaluation (stories260K)") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  if (path.empty() || bosch::test::fixture("text/emma.txt").empty()) return;
  const auto model = bosch::model::load(path);
  const bosch::cpu::Backend backend(model);
  const auto tasks = copy_tasks(model, 300, 3);
  bosch::TransformerEvaluatorOptions options;
  options.window = 16;
  options.sinks = 2;
  Evaluator cached(backend, tasks, options);
  options.cache_bytes = 0;
  Evaluator plain(backend, tasks, options);

  boost::random::mt19937_64 rng(bosch::test::seed(1));
  const auto layout = cached.layout();
  bosch::HeadMask reference = random_mask(layout, rng);
  cached.evaluate(reference);
  for (int round = 0; round < 12; ++round) {
    // Change one layer (the top-down probe pattern) or several (a Stage-3 chunk).
    bosch::HeadMask m = reference;
    boost::random::uniform_int_distribution<int> layer(0, layout.num_layers - 1), kv(0, layout.num_kv_heads - 1);
    const int changes = 1 + round % 3;
    for (int c = 0; c < changes; ++c) {
      const int l = layer(rng), g = kv(rng);
      m.set(l, g, !m.swa(l, g));
    }
    const bosch::EvaluationHint hint{&reference, bosch::first_changed_layer(m, reference)};
    const double fast = cached.evaluate(m, hint);
    const double slow = plain.evaluate(m);
    CHECK(fast == slow);  // bitwise: layer-wise runs equal the full forward
    if (round % 4 == 3) reference = m;
  }
  CHECK(cached.stats().layers_saved > 0);
  CHECK(plain.stats().layers_saved == 0);

  // Batch evaluation equals one-by-one evaluation.
  std::vector<bosch::HeadMask> batch{random_mask(layout, rng), random_mask(layout, rng)};
  const auto scores = cached.evaluate_batch(batch, bosch::EvaluationHint{&reference, 0});
  REQUIRE(scores.size() == 2);
  CHECK(scores[0] == plain.evaluate(batch[0]));
  CHECK(scores[1] == plain.evaluate(batch[1]));
}

TEST_CASE("shared prefix: the scores of full-row forwards up to rounding, whatever the order, and costed (stories260K)") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  if (path.empty() || bosch::test::fixture("text/emma.txt").empty()) return;
  const auto model = bosch::model::load(path);
  const bosch::cpu::Backend backend(model);
  const auto tasks = copy_tasks(model, 300, 3);
  bosch::TransformerEvaluatorOptions options;
  options.window = 16;
  options.sinks = 2;
  Evaluator shared(backend, tasks, options), reversed(backend, tasks, options);
  options.shared_prefix = false;
  Evaluator rows(backend, tasks, options);

  boost::random::mt19937_64 rng(bosch::test::seed(3));
  std::vector<bosch::HeadMask> masks{bosch::HeadMask(shared.layout())};
  for (int i = 0; i < 6; ++i) masks.push_back(random_mask(shared.layout(), rng));
  std::vector<double> a, b(masks.size());
  for (const auto& m : masks) a.push_back(shared.evaluate(m));
  for (std::size_t i = masks.size(); i-- > 0;) b[i] = reversed.evaluate(masks[i]);
  double worst = 0, spread = 0;
  for (std::size_t i = 0; i < masks.size(); ++i) {
    CHECK(a[i] == b[i]);  // bitwise: the prefix does not depend on which mask came first
    worst = std::max(worst, std::abs(a[i] - rows.evaluate(masks[i])));
    spread = std::max(spread, std::abs(a[i] - a[0]));
  }
  INFO("largest difference from full-row forwards " << worst << ", score spread over the masks " << spread);
  CHECK(worst <= 1e-4);      // fp32 rounding of a mean log-probability
  CHECK(spread > 100 * worst);  // the masks differ by much more than that

  // The cost: every sample's prefix pass once, P of n rows through L layers
  // counted as ceil(P L / n) layer applications.
  const auto L = static_cast<std::size_t>(shared.layout().num_layers);
  std::size_t want = 0;
  for (const auto& sample : tasks.samples) {
    const auto tf = bosch::tasks::teacher_forcing(sample);
    const auto P = std::min<std::size_t>(16, static_cast<std::size_t>(tf.positions.front()));
    want += (P * L + tf.tokens.size() - 1) / tf.tokens.size();
  }
  CHECK(want > 0);
  CHECK(shared.stats().prefix_layers == want);
  CHECK(rows.stats().prefix_layers == 0);
  CHECK(shared.cost() == static_cast<double>(shared.stats().layers_run + want) / static_cast<double>(L));
}

TEST_CASE("the evaluator rejects a mask of another model and an empty task set") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  if (path.empty() || bosch::test::fixture("text/emma.txt").empty()) return;
  const auto model = bosch::model::load(path);
  const bosch::cpu::Backend backend(model);
  Evaluator e(backend, copy_tasks(model, 300, 1));
  CHECK_THROWS_AS(e.evaluate(bosch::HeadMask({3, 8, 4})), bosch::invalid_argument);
  CHECK_THROWS_AS(Evaluator(backend, bosch::tasks::TaskSet{}), bosch::invalid_argument);
  bosch::TransformerEvaluatorOptions bad;
  bad.window = 0;
  CHECK_THROWS_AS(Evaluator(backend, copy_tasks(model, 300, 1), bad), bosch::invalid_argument);
}

TEST_CASE("select() on a real model finishes with the exact ratio within its budget (stories260K)") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  if (path.empty() || bosch::test::fixture("text/emma.txt").empty()) return;
  const auto model = bosch::model::load(path);
  const bosch::cpu::Backend backend(model);
  bosch::TransformerEvaluatorOptions eo;
  eo.window = 16;
  Evaluator e(backend, copy_tasks(model, 300, 2), eo);
  for (double rho : {0.25, 0.5, 0.875}) {
    bosch::Options o;
    o.target_ratio = rho;
    o.seed = bosch::test::seed(2);
    o.probe_budget = 4;
    o.chunk_budget = 6;
    o.max_evaluations = 60;
    const auto r = bosch::select(e, o);
    CHECK(r.mask.count() == bosch::target_count(e.layout(), rho));
    CHECK(r.evaluations <= 60);
    CHECK(std::isfinite(r.score));
    CHECK(r.score == e.evaluate(r.mask));  // the reported score is the mask's, deterministically
  }
}

TEST_CASE("sample ranges: shares of the samples reduce to exactly the full score (stories260K)") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  if (path.empty() || bosch::test::fixture("text/emma.txt").empty()) return;
  const auto model = bosch::model::load(path);
  const bosch::cpu::Backend backend(model);
  bosch::TransformerEvaluatorOptions eo;
  eo.window = 16;
  const auto tasks = copy_tasks(model, 300, 5);
  Evaluator whole(backend, tasks, eo), part(backend, tasks, eo);
  REQUIRE(whole.sample_count() == 5);
  CHECK(whole.sample_range() == std::pair<std::size_t, std::size_t>{0, 5});
  CHECK_THROWS_AS(part.set_sample_range(3, 2), bosch::invalid_argument);
  CHECK_THROWS_AS(part.set_sample_range(0, 6), bosch::invalid_argument);

  boost::random::mt19937_64 rng(bosch::test::seed(3));
  const auto layout = whole.layout();
  bosch::HeadMask reference = random_mask(layout, rng);
  for (int round = 0; round < 4; ++round) {
    const bosch::HeadMask m = random_mask(layout, rng);
    const auto all = whole.sample_scores(m);
    std::vector<double> values;
    for (const auto& s : all) values.push_back(s.mean_logprob);
    const double score = whole.evaluate(m);
    CHECK(score == Evaluator::reduce(values));  // bitwise: evaluate() is reduce() over the samples
    // Scored in shares [0, 2), [2, 2), [2, 5) (with hints and the cache), concatenated in order.
    std::vector<double> joined;
    for (auto [b, e] : {std::pair<std::size_t, std::size_t>{0, 2}, {2, 2}, {2, 5}}) {
      part.set_sample_range(b, e);
      part.evaluate(reference);
      const bosch::EvaluationHint hint{&reference, bosch::first_changed_layer(m, reference)};
      const auto share = part.sample_scores(m, hint);
      REQUIRE(share.size() == e - b);
      for (const auto& s : share) joined.push_back(s.mean_logprob);
      if (e > b) CHECK(part.evaluate(m) == Evaluator::reduce(std::span<const double>(values).subspan(b, e - b)));
    }
    CHECK(joined == values);
    CHECK(Evaluator::reduce(joined) == score);
    reference = m;
  }
  part.set_sample_range(0, 0);
  CHECK(part.sample_scores(reference).empty());
  CHECK(part.evaluate(reference) == 0.0);
}

TEST_CASE("per-sample scores and the race order: exact per sample, tasks interleaved (stories260K)") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  if (path.empty() || bosch::test::fixture("text/emma.txt").empty()) return;
  const auto model = bosch::model::load(path);
  const bosch::cpu::Backend backend(model);
  bosch::TransformerEvaluatorOptions eo;
  eo.window = 16;
  // Two tasks, listed task-major as a suite lists them: copy x3, then niah x2.
  auto tasks = copy_tasks(model, 300, 3);
  bosch::tasks::TaskSpec spec;
  spec.kind = bosch::tasks::TaskKind::niah_single_1;
  spec.context_length = 300;
  spec.num_samples = 2;
  spec.seed = bosch::test::seed(4);
  spec.text_files = {bosch::test::fixture("text/emma.txt")};
  for (auto& s : bosch::tasks::generate(spec, model.tokenizer).samples) tasks.samples.push_back(std::move(s));
  Evaluator e(backend, tasks, eo), plain(backend, tasks, eo);
  static_assert(bosch::PerSampleEvaluator<Evaluator>);
  static_assert(bosch::CostedEvaluator<Evaluator>);
  CHECK(e.race_order() == std::vector<std::size_t>{0, 3, 1, 4, 2});

  boost::random::mt19937_64 rng(bosch::test::seed(5));
  const auto layout = e.layout();
  const bosch::HeadMask reference = random_mask(layout, rng);
  const std::vector<std::size_t> all{0, 1, 2, 3, 4};
  const auto ref_scores = e.score_samples(reference, {}, all);
  CHECK(Evaluator::reduce(ref_scores) == plain.evaluate(reference));  // bitwise
  for (int round = 0; round < 3; ++round) {
    bosch::HeadMask m = reference;
    const int l = 1 + round % (layout.num_layers - 1);
    m.set(l, 0, !m.swa(l, 0));
    const bosch::EvaluationHint hint{&reference, bosch::first_changed_layer(m, reference)};
    // Any samples, in any order, alone or together: the same value per sample.
    const std::vector<std::size_t> some{4, 1};
    const auto a = e.score_samples(m, hint, some);
    const auto b = e.score_samples(m, hint, all);
    const auto c = plain.sample_scores(m);
    REQUIRE(a.size() == 2);
    CHECK(a[0] == b[4]);
    CHECK(a[1] == b[1]);
    for (std::size_t s = 0; s < 5; ++s) CHECK(b[s] == c[s].mean_logprob);
    CHECK(Evaluator::reduce(b) == plain.evaluate(m));
  }
  // The cost counts layer applications per sample; the per-sample cache
  // restarts the samples `some` stored on the way part-way.
  CHECK(e.cost() == static_cast<double>(e.stats().layers_run + e.stats().prefix_layers) / layout.num_layers);
  CHECK(e.stats().layers_saved > 0);
  const std::vector<std::size_t> bad{5};
  CHECK_THROWS_AS(e.score_samples(reference, {}, bad), bosch::invalid_argument);
}

TEST_CASE("the race order of a mixed-length suite: the first looks see every task and every length") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  REQUIRE(!path.empty());
  REQUIRE(!bosch::test::fixture("text/emma.txt").empty());
  const auto model = bosch::model::load(path);
  const bosch::cpu::Backend backend(model);
  // As a suite lists them (length-major, then task): copy and niah at 260
  // tokens, then both at 300, two samples each.
  bosch::tasks::TaskSet tasks;
  for (int length : {260, 300})
    for (auto kind : {bosch::tasks::TaskKind::copy, bosch::tasks::TaskKind::niah_single_1}) {
      bosch::tasks::TaskSpec spec;
      spec.kind = kind;
      spec.context_length = length;
      spec.num_samples = 2;
      spec.seed = bosch::test::seed(static_cast<std::uint64_t>(length) + static_cast<std::uint64_t>(kind));
      spec.text_files = {bosch::test::fixture("text/emma.txt")};
      for (auto& x : bosch::tasks::generate(spec, model.tokenizer).samples) tasks.samples.push_back(std::move(x));
    }
  REQUIRE(tasks.samples.size() == 8);
  // Samples: 0,1 copy@260; 2,3 niah@260; 4,5 copy@300; 6,7 niah@300.
  const Evaluator e(backend, tasks, {});
  const auto order = e.race_order();
  CHECK(order == std::vector<std::size_t>{0, 6, 4, 2, 1, 7, 5, 3});
  // Every prefix of 2 holds both tasks, and the first 2 both lengths.
  for (std::size_t r = 0; r < 4; ++r)
    CHECK(tasks.samples[order[2 * r]].task != tasks.samples[order[2 * r + 1]].task);
  CHECK(tasks.samples[order[0]].context_length != tasks.samples[order[1]].context_length);
}

TEST_CASE("a raced search on a real model: the cost is the evaluator's, eliminations save samples (stories260K)") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  if (path.empty() || bosch::test::fixture("text/emma.txt").empty()) return;
  const auto model = bosch::model::load(path);
  const bosch::cpu::Backend backend(model);
  bosch::TransformerEvaluatorOptions eo;
  eo.window = 16;
  const auto tasks = copy_tasks(model, 300, 6);
  bosch::Options o;
  o.target_ratio = 0.5;
  o.seed = bosch::test::seed(6);
  o.probe_budget = 4;
  o.chunk_budget = 8;
  o.race_min_samples = 3;
  Evaluator plain(backend, tasks, eo);
  const auto full = bosch::select(plain, o);
  o.race = true;
  Evaluator raced(backend, tasks, eo);
  const auto r = bosch::select(raced, o);
  CHECK(full.forwards == doctest::Approx(plain.cost()));
  CHECK(r.forwards == doctest::Approx(raced.cost()));
  CHECK(r.eliminated > 0);
  CHECK(r.evaluations + r.eliminated == r.log.size());
  CHECK(r.score == raced.evaluate(r.mask));  // a full score, never an estimate
  MESSAGE("stories260K: " << r.eliminated << " of " << r.log.size() << " candidates eliminated; " << r.forwards
                          << " sample forwards raced against " << full.forwards << " in full");
}
