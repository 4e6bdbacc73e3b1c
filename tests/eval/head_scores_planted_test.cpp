// Every static ranking on the planted model (planted_model.hpp), whose heads'
// long-context roles are known: P (layer 0, KV head 0) attends to the previous
// token only; I (layer 1, KV head 1) is an induction/copy head; the other two
// KV heads have random attention and a zero output projection.
#include <bosch/cpu/backend.hpp>
#include <bosch/eval/head_scores.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/tasks/scoring.hpp>

#include <doctest/doctest.h>

#include "eval/planted_model.hpp"
#include "test_support.hpp"

#include <algorithm>
#include <vector>

using namespace bosch;
using namespace bosch::eval;

namespace {

constexpr std::size_t P = 0;  // flat index of (layer 0, KV head 0)
constexpr std::size_t Z0 = 1;  // (0, 1): random attention, zero output
constexpr std::size_t Z1 = 2;  // (1, 0): random attention, zero output
constexpr std::size_t I = 3;   // (1, 1)

struct Fixture {
  model::Model model = test::planted_model(test::seed(40));
  cpu::Backend backend{model};
  tasks::TaskSet tasks = test::planted_copy_tasks(3, 120, test::seed(41));
  HeadScoreOptions options = [] {
    HeadScoreOptions o;
    o.window = 8;
    o.sinks = 0;
    o.razor_block = 30;
    o.razor_repeats = 4;
    o.seed = test::seed(42);
    return o;
  }();
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

std::size_t argmax(const std::vector<double>& v) {
  return static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}
std::size_t argmin(const std::vector<double>& v) {
  return static_cast<std::size_t>(std::min_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

TEST_CASE("the planted model copies: greedy answers are right and SWA on the induction head breaks them") {
  auto& f = fixture();
  const int V = f.model.config.vocab_size;
  for (const auto& s : f.tasks.samples) {
    const auto tf = tasks::teacher_forcing(s);
    const auto full = tasks::answer_logprob(f.backend.forward(tf.tokens, AttentionWindows::full(), tf.positions), V,
                                            s.answer);
    CHECK(full.probability > 0.9);
    HeadMask m(f.model.config.layout());
    m.set(1, 1, true);
    const auto swa =
        tasks::answer_logprob(f.backend.forward(tf.tokens, AttentionWindows::from_mask(m, 8), tf.positions), V, s.answer);
    CHECK(swa.probability < 0.5);
  }
}

TEST_CASE("DCAM: the previous-token head has the lowest beyond-window mass") {
  auto& f = fixture();
  const auto s = dcam_scores(f.backend, f.tasks, f.options);
  CHECK(argmin(s.scores) == P);
  CHECK(s.scores[P] < 1e-3);
  CHECK(s.scores[I] > 0.5);  // the copy head looks far back most of the time
  CHECK(s.query_scores.size() == 8);
  CHECK(s.forwards == 3);
  CHECK(ranking_mask(s, 0.25).swa(0, 0));
}

TEST_CASE("APL: the copy head attends farthest at the answer positions; the previous-token head nearest") {
  auto& f = fixture();
  const auto s = apl_scores(f.backend, f.tasks, f.options);
  CHECK(argmax(s.scores) == I);
  CHECK(argmin(s.scores) == P);
  CHECK(s.scores[P] == doctest::Approx(1.0).epsilon(0.01));  // lag 1 at every answer row
  CHECK(s.scores[I] > 100);                                   // the needle is ~110 tokens back
}

TEST_CASE("RAZOR: the planted induction head tops the induction score") {
  auto& f = fixture();
  const auto s = razor_scores(f.backend, f.options);
  CHECK(argmax(s.scores) == I);
  // Random ids repeat inside a block (30 draws from 30 ids), so the induction
  // head's mass splits over several matches: well above every other head still.
  CHECK(s.scores[I] > 0.5);
  CHECK(s.scores[P] < 0.01);
  // At rho = 0.75 one head stays full: the induction head.
  const auto m = ranking_mask(s, 0.75);
  CHECK(m.count() == 3);
  CHECK_FALSE(m.swa(1, 1));
}

TEST_CASE("RETRIEVAL: the copy head's argmax lands on the needle token it generates") {
  auto& f = fixture();
  const auto s = retrieval_scores(f.backend, f.tasks, f.options);
  CHECK(argmax(s.scores) == I);
  CHECK(s.scores[I] >= 0.99);  // one copy event per answer token
  CHECK(s.scores[P] == 0.0);
  CHECK(s.note.find("3 of 3 samples passed") != std::string::npos);
  const auto m = ranking_mask(s, 0.75);
  CHECK_FALSE(m.swa(1, 1));
}

TEST_CASE("PROXY and FISHER: the copy head ranks top; zero-output heads score exactly 0, the lowest") {
  auto& f = fixture();
  TransformerEvaluatorOptions eo;
  eo.window = f.options.window;
  eo.sinks = f.options.sinks;
  TransformerEvaluator<cpu::Backend> evaluator(f.backend, f.tasks, eo);
  const auto proxy = proxy_scores(evaluator, 3);
  CHECK(proxy.evaluations == 5);
  CHECK(evaluator.stats().evaluations == 5);
  CHECK(argmax(proxy.scores) == I);
  CHECK(proxy.scores[Z0] == 0.0);
  CHECK(proxy.scores[Z1] == 0.0);
  const double lowest = *std::min_element(proxy.scores.begin(), proxy.scores.end());
  CHECK(lowest > -1e-6);  // the previous-token head loses only far keys of ~e^-20 weight
  // Restarts at the changed layer: 3 base + 2 x 3 (layer 0) + 2 x 3 / 2 (layer 1).
  CHECK(proxy.forwards == doctest::Approx(3 + 6 + 3));

  const auto fisher = fisher_scores(f.backend, f.tasks, f.options);
  CHECK(argmax(fisher.scores) == I);
  CHECK(fisher.scores[Z0] == 0.0);
  CHECK(fisher.scores[Z1] == 0.0);
  // The copy is saturated (p > 0.99), so dL/dm at m = 1 is small but it dominates.
  CHECK(fisher.scores[I] > 0.0);
  CHECK(fisher.scores[P] < 1e-3 * fisher.scores[I]);
  // With a gate step of 1 (the ablation) the copy head's loss change is large.
  auto ablation = f.options;
  ablation.fisher_epsilon = 1.0;
  const auto fisher1 = fisher_scores(f.backend, f.tasks, ablation);
  CHECK(argmax(fisher1.scores) == I);
  CHECK(fisher1.scores[I] > 1.0);
  CHECK(fisher1.scores[Z0] == 0.0);
  for (auto rho : {0.25, 0.5, 0.75}) {
    CHECK_FALSE(ranking_mask(fisher, rho).swa(1, 1));
    CHECK_FALSE(ranking_mask(proxy, rho).swa(1, 1));
  }
}

TEST_CASE("QADA: the copy head needs the bulk; scores are shares in [0, 1]") {
  auto& f = fixture();
  const auto s = qada_scores(f.backend, f.tasks, f.options);
  for (double v : s.scores) {
    CHECK(v >= 0.0);
    CHECK(v <= 1.0);
  }
  // The induction head puts its mass on one far key at the copy rows; the Gaussian
  // bulk estimate sees the large logit variance there.
  CHECK(s.scores[I] > 0.5);
  CHECK(s.forwards == 3);
}

TEST_CASE("compute_head_scores dispatches and rejects PROXY and empty task sets") {
  auto& f = fixture();
  const auto a = compute_head_scores(Method::dcam, f.backend, f.tasks, f.options);
  CHECK(a.scores == dcam_scores(f.backend, f.tasks, f.options).scores);
  CHECK_THROWS_AS(compute_head_scores(Method::proxy, f.backend, f.tasks, f.options), bosch::invalid_argument);
  CHECK_THROWS_AS(compute_head_scores(Method::apl, f.backend, tasks::TaskSet{}, f.options), bosch::invalid_argument);
  auto bad = f.options;
  bad.fisher_epsilon = 0;
  CHECK_THROWS_AS(compute_head_scores(Method::fisher, f.backend, f.tasks, bad), bosch::invalid_argument);
}
