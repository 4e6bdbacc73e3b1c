// Held-out greedy decoding by incremental decoding (prefill + decode_step)
// against recomputation (a full forward per token) on the stories260K
// fixture: the same generated tokens and the same report, for full attention
// and a windowed mask with sinks; a backend without the decode API compiles
// and falls back to recomputation.
#include <bosch/cpu/backend.hpp>
#include <bosch/error.hpp>
#include <bosch/eval/report.hpp>
#include <bosch/model/model.hpp>
#include <bosch/tasks/tasks.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <doctest/doctest.h>

#include <cmath>

#include "test_support.hpp"

namespace {

/// The CPU backend with only the Backend concept's methods (no decode API),
/// standing in for the CUDA backend.
struct PlainBackend {
  using Residual = bosch::cpu::Residual;
  const bosch::cpu::Backend* inner;
  const bosch::model::Config& config() const noexcept { return inner->config(); }
  Residual embed(std::span<const int> t) const { return inner->embed(t); }
  void run_layers(Residual& x, int first, int last, const bosch::AttentionWindows& w) const {
    inner->run_layers(x, first, last, w);
  }
  std::vector<float> logits(const Residual& x, std::span<const int> p) const { return inner->logits(x, p); }
  std::vector<float> forward(std::span<const int> t, const bosch::AttentionWindows& w,
                             std::span<const int> p) const {
    return inner->forward(t, w, p);
  }
};

static_assert(bosch::IncrementalDecoder<bosch::cpu::Backend>);
static_assert(bosch::Backend<PlainBackend> && !bosch::IncrementalDecoder<PlainBackend>);

bosch::tasks::TaskSet copy_tasks(const bosch::model::Model& model, int context, int samples) {
  bosch::tasks::TaskSpec spec;
  spec.kind = bosch::tasks::TaskKind::copy;
  spec.context_length = context;
  spec.num_samples = samples;
  spec.seed = bosch::test::seed(7);
  spec.text_files = {bosch::test::fixture("text/emma.txt")};
  return bosch::tasks::generate(spec, model.tokenizer);
}

using bosch::test::random_mask;

void check_same(const bosch::TaskScore& a, const bosch::TaskScore& b) {
  CHECK(a.task == b.task);
  CHECK(a.samples == b.samples);
  CHECK(a.mean_logprob == b.mean_logprob);  // teacher forcing is shared: bitwise
  CHECK(a.exact == b.exact);
  CHECK(a.accuracy == b.accuracy);
}

}  // namespace

TEST_CASE("held-out greedy decoding: incremental equals recomputation (stories260K, copy)") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  if (path.empty() || bosch::test::fixture("text/emma.txt").empty()) return;
  const auto model = bosch::model::load(path);
  const bosch::cpu::Backend backend(model);
  const auto tasks = copy_tasks(model, 300, 2);
  REQUIRE(tasks.samples.size() == 2);
  const int eos = model.tokenizer.eos();
  const std::vector<bosch::AttentionWindows> patterns{
      bosch::AttentionWindows::full(),
      bosch::AttentionWindows::from_mask(random_mask(backend.layout(), bosch::test::seed(8)), 16, 2)};

  std::size_t decoded = 0;
  for (std::size_t p = 0; p < patterns.size(); ++p) {
    INFO("window pattern " << p);
    const auto& w = patterns[p];
    // The generation helper from scratch (no free tokens), both routes.
    for (const auto& s : tasks.samples) {
      const int budget = 12;
      std::vector<int> fast, slow;
      bosch::greedy_continue(backend, s.prompt, fast, budget, eos, w, bosch::GreedyPath::incremental);
      bosch::greedy_continue(backend, s.prompt, slow, budget, eos, w, bosch::GreedyPath::recompute);
      CHECK(fast == slow);
      CHECK(!fast.empty());
      decoded += fast.size();
      // Starting from known tokens continues the same sequence.
      if (fast.size() > 3) {
        std::vector<int> resumed(fast.begin(), fast.begin() + 3);
        bosch::greedy_continue(backend, s.prompt, resumed, budget, eos, w, bosch::GreedyPath::incremental);
        CHECK(resumed == fast);
      }
    }
    // The whole report, both routes, with a budget past the answer.
    bosch::ReportOptions o;
    o.extra_new_tokens = 4;
    o.greedy = bosch::GreedyPath::incremental;
    const auto fast = bosch::evaluate_held_out(backend, model.tokenizer, tasks, w, o);
    o.greedy = bosch::GreedyPath::recompute;
    const auto slow = bosch::evaluate_held_out(backend, model.tokenizer, tasks, w, o);
    o.greedy = bosch::GreedyPath::automatic;
    const auto plain = bosch::evaluate_held_out(PlainBackend{&backend}, model.tokenizer, tasks, w, o);
    CHECK(std::isfinite(fast.all.accuracy));
    check_same(fast.all, slow.all);
    check_same(fast.all, plain.all);
    REQUIRE(fast.per_task.size() == slow.per_task.size());
    for (std::size_t t = 0; t < fast.per_task.size(); ++t) check_same(fast.per_task[t], slow.per_task[t]);
  }
  MESSAGE("greedy tokens compared: " << decoded);
  CHECK(decoded > 20);
}

TEST_CASE("held-out greedy decoding: incremental on a backend without the decode API is refused") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  if (path.empty()) return;
  const auto model = bosch::model::load(path);
  const bosch::cpu::Backend backend(model);
  const PlainBackend plain{&backend};
  std::vector<int> prompt{1, 2, 3}, generated;
  CHECK_THROWS_AS(bosch::greedy_continue(plain, prompt, generated, 4, model.tokenizer.eos(),
                                         bosch::AttentionWindows::full(), bosch::GreedyPath::incremental),
                  bosch::invalid_argument);
  // Automatic falls back to recomputation and matches the CPU backend's incremental route.
  std::vector<int> a, b;
  bosch::greedy_continue(plain, prompt, a, 6, model.tokenizer.eos(), bosch::AttentionWindows::full());
  bosch::greedy_continue(backend, prompt, b, 6, model.tokenizer.eos(), bosch::AttentionWindows::full());
  CHECK(a == b);
}
