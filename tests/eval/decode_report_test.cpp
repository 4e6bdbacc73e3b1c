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

namespace {

/// The CPU backend counting its passes over a whole sequence (forward and
/// both prefills), to see which route the held-out report takes.
struct CountingBackend {
  using Residual = bosch::cpu::Residual;
  const bosch::cpu::Backend* inner;
  mutable int passes = 0;
  const bosch::model::Config& config() const noexcept { return inner->config(); }
  Residual embed(std::span<const int> t) const { return inner->embed(t); }
  void run_layers(Residual& x, int first, int last, const bosch::AttentionWindows& w) const {
    inner->run_layers(x, first, last, w);
  }
  std::vector<float> logits(const Residual& x, std::span<const int> p) const { return inner->logits(x, p); }
  std::vector<float> forward(std::span<const int> t, const bosch::AttentionWindows& w,
                             std::span<const int> p) const {
    ++passes;
    return inner->forward(t, w, p);
  }
  bosch::cpu::DecodeState prefill(std::span<const int> t, const bosch::AttentionWindows& w,
                                  std::vector<float>* last = nullptr, int capacity = 0) const {
    ++passes;
    return inner->prefill(t, w, last, capacity);
  }
  bosch::cpu::DecodeState prefill(std::span<const int> t, const bosch::AttentionWindows& w, std::span<const int> p,
                                  std::vector<float>& logits, int capacity = 0) const {
    ++passes;
    return inner->prefill(t, w, p, logits, capacity);
  }
  std::vector<float> decode_step(bosch::cpu::DecodeState& s, int token, const bosch::AttentionWindows& w) const {
    return inner->decode_step(s, token, w);
  }
};

static_assert(bosch::TeacherForcedPrefill<bosch::cpu::Backend> && bosch::TeacherForcedPrefill<CountingBackend>);
static_assert(!bosch::TeacherForcedPrefill<PlainBackend>);

}  // namespace

TEST_CASE("prefill with positions: the forward's logits bitwise, and the same state") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  REQUIRE(!path.empty());
  const auto model = bosch::model::load(path);
  const bosch::cpu::Backend backend(model);
  const auto tasks = copy_tasks(model, 260, 1);
  REQUIRE(tasks.samples.size() == 1);
  const auto& prompt = tasks.samples[0].prompt;
  const int n = static_cast<int>(prompt.size());
  const std::vector<int> positions{0, n / 3, n - 2, n - 1};
  for (const auto& w : {bosch::AttentionWindows::full(),
                        bosch::AttentionWindows::from_mask(random_mask(backend.layout(), bosch::test::seed(3)), 8, 2)}) {
    const auto want = backend.forward(prompt, w, positions);
    std::vector<float> got;
    auto a = backend.prefill(prompt, w, positions, got, n + 8);
    CHECK(got == want);  // bitwise
    std::vector<float> last;
    auto b = backend.prefill(prompt, w, &last, n + 8);
    const int last_position = n - 1;
    CHECK(last == backend.forward(prompt, w, std::span<const int>(&last_position, 1)));
    CHECK(a.positions == b.positions);
    CHECK(a.bytes() == b.bytes());
    // The two states decode alike, bitwise.
    for (int token : {5, 17, 42}) CHECK(backend.decode_step(a, token, w) == backend.decode_step(b, token, w));
    // No positions: the state, no logits.
    std::vector<float> none{1.0f};
    backend.prefill(prompt, w, std::span<const int>(), none);
    CHECK(none.empty());
  }
  // Positions outside the sequence are refused, naming them.
  std::vector<float> out;
  const std::vector<int> bad{n};
  CHECK_THROWS_AS(backend.prefill(prompt, bosch::AttentionWindows::full(), bad, out), bosch::invalid_argument);
}

TEST_CASE("held-out report: one pass per sample when the greedy answer agrees with the gold one") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  REQUIRE(!path.empty());
  REQUIRE(!bosch::test::fixture("text/emma.txt").empty());
  const auto model = bosch::model::load(path);
  const bosch::cpu::Backend backend(model);
  const auto base = copy_tasks(model, 300, 2);
  REQUIRE(base.samples.size() == 2);
  const int eos = model.tokenizer.eos();
  const auto w = bosch::AttentionWindows::from_mask(random_mask(backend.layout(), bosch::test::seed(9)), 16, 2);

  // Samples whose gold answer is the model's own greedy answer (exact), the
  // same with its last token changed (first wrong at the last token), and
  // with its first token changed (wrong at once: a second pass).
  bosch::tasks::TaskSet tasks;
  tasks.specs = base.specs;
  std::vector<int> passes_expected;
  for (const auto& s : base.samples) {
    std::vector<int> greedy;
    bosch::greedy_continue(backend, s.prompt, greedy, 4, eos, w, bosch::GreedyPath::recompute);
    REQUIRE(greedy.size() == 4);
    for (int variant = 0; variant < 3; ++variant) {
      auto t = s;
      t.answer = greedy;
      if (variant == 1) t.answer.back() = (t.answer.back() + 1) % model.config.vocab_size;
      if (variant == 2) t.answer.front() = (t.answer.front() + 1) % model.config.vocab_size;
      t.answer_text = model.tokenizer.decode(t.answer);
      t.references = {t.answer_text};
      t.max_new_tokens = 8;
      tasks.samples.push_back(std::move(t));
      passes_expected.push_back(variant == 2 ? 2 : 1);
    }
  }
  bosch::ReportOptions o;
  o.extra_new_tokens = 3;
  o.greedy = bosch::GreedyPath::recompute;
  const auto slow = bosch::evaluate_held_out(backend, model.tokenizer, tasks, w, o);
  o.greedy = bosch::GreedyPath::automatic;
  for (std::size_t i = 0; i < tasks.samples.size(); ++i) {
    INFO("sample " << i);
    bosch::tasks::TaskSet one;
    one.specs = tasks.specs;
    one.samples = {tasks.samples[i]};
    for (bool one_pass : {true, false}) {
      INFO("one_pass " << one_pass);
      o.one_pass = one_pass;
      CountingBackend counting{&backend};
      const auto fast = bosch::evaluate_held_out(counting, model.tokenizer, one, w, o);
      CHECK(counting.passes == (one_pass ? passes_expected[i] : 2));
      REQUIRE(fast.samples.size() == 1);
      CHECK(fast.samples[0].logprob == slow.samples[i].logprob);  // bitwise
      CHECK(fast.samples[0].accuracy == slow.samples[i].accuracy);
      CHECK(fast.samples[0].exact == slow.samples[i].exact);
    }
  }
  CHECK(slow.samples[0].exact == 1.0);
  CHECK(slow.samples[1].exact == 0.0);
}
