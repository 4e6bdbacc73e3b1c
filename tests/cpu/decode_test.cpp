// Incremental decoding (Backend::prefill + decode_step) against fresh forward
// passes over the whole sequence, for full, windowed, windowed + sinks and
// mixed per-head masks, GQA ratios and every architecture variant; greedy
// continuations by both routes; prefill bitwise equal to forward; errors.
//
// Tolerance: max |decode logit - forward logit| <= 1e-5 * max(1, max |forward
// logit|). Why: both run in fp32 (unit roundoff 6e-8); decode_step sums the
// single query row's scores, softmax and P V in a plain loop while the tiled
// kernel uses Eigen GEMMs and an online softmax, and 1-row projections may
// use a different GEMM blocking than n-row ones; with dot products of length
// <= 48 over two or three layers these orders differ by ~1e-6 relative (the
// measured maximum is printed on failure), while any semantic slip (a key
// outside the window, a missing sink, a RoPE position off by one, a stale
// cache row) moves logits by 1e-2 or more.

#include "test_support.hpp"
#include "tiny_model.hpp"

#include <bosch/cpu/backend.hpp>
#include <bosch/cpu/kv_cache.hpp>
#include <bosch/error.hpp>
#include <bosch/model/model.hpp>

#include <boost/random/bernoulli_distribution.hpp>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>

#include <algorithm>
#include <cmath>
#include <doctest/doctest.h>

namespace {

using namespace bosch;

constexpr double tolerance = 1e-5;

HeadMask random_mask(HeadLayout layout, std::uint64_t seed) {
  boost::random::mt19937_64 rng(seed);
  boost::random::bernoulli_distribution<double> coin(0.5);
  HeadMask m(layout);
  for (std::size_t i = 0; i < m.size(); ++i) m.set_flat(i, coin(rng));
  return m;
}

int argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

/// Prefills `prompt`, then decodes `extra` token by token; each step's
/// logits must match a fresh forward over prompt + extra[0..t] at its last
/// position. Returns the largest relative difference seen.
double check_steps(const cpu::Backend& b, const std::vector<int>& prompt, const std::vector<int>& extra,
                   const AttentionWindows& w) {
  std::vector<float> last;
  auto state = b.prefill(prompt, w, &last);
  CHECK(state.positions == static_cast<int>(prompt.size()));
  std::vector<int> seq = prompt;
  int pos = static_cast<int>(seq.size()) - 1;
  // Prefill runs the forward's own layer path: bitwise equal.
  CHECK(last == b.forward(seq, w, std::span<const int>(&pos, 1)));
  double worst = 0;
  for (int t : extra) {
    const auto got = b.decode_step(state, t, w);
    seq.push_back(t);
    pos = static_cast<int>(seq.size()) - 1;
    const auto want = b.forward(seq, w, std::span<const int>(&pos, 1));
    REQUIRE(got.size() == want.size());
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::abs(got[i] - want[i])));
      scale = std::max(scale, static_cast<double>(std::abs(want[i])));
    }
    INFO("position " << pos << ": max abs diff " << diff << ", logit scale " << scale);
    CHECK(diff <= tolerance * std::max(1.0, scale));
    CHECK(scale > 0.5);  // not degenerate
    worst = std::max(worst, diff / std::max(1.0, scale));
  }
  CHECK(state.positions == static_cast<int>(seq.size()));
  CHECK(state.cache.positions() == state.positions);
  CHECK(state.cache.capacity() >= state.positions);
  // What the cache allocated is the formula at its capacity.
  CHECK(state.bytes() == cpu::kv_bytes(b.config(), w, state.cache.capacity()));
  return worst;
}

/// Greedy continuation of `prompt` for `steps` tokens by both routes.
void check_greedy(const cpu::Backend& b, const std::vector<int>& prompt, int steps, const AttentionWindows& w) {
  std::vector<int> slow = prompt;
  for (int s = 0; s < steps; ++s) {
    const int pos = static_cast<int>(slow.size()) - 1;
    slow.push_back(argmax(b.forward(slow, w, std::span<const int>(&pos, 1))));
  }
  std::vector<float> logits;
  auto state = b.prefill(prompt, w, &logits);
  std::vector<int> fast = prompt;
  for (int s = 0; s < steps; ++s) {
    const int next = argmax(logits);
    fast.push_back(next);
    if (s + 1 < steps) logits = b.decode_step(state, next, w);
  }
  CHECK(fast == slow);
}

std::vector<AttentionWindows> window_patterns(const model::Config& c, std::uint64_t seed) {
  return {AttentionWindows::full(),
          AttentionWindows::from_mask(HeadMask::filled(c.layout(), true), 5, 0),
          AttentionWindows::from_mask(HeadMask::filled(c.layout(), true), 4, 3),
          AttentionWindows::from_mask(HeadMask::filled(c.layout(), true), 1, 1),
          AttentionWindows::from_mask(random_mask(c.layout(), seed), 6, 2)};
}

}  // namespace

TEST_CASE("cpu decode: prefill + decode_step equal fresh forwards (full, windowed, sinks, mixed)") {
  for (int kv : {4, 2, 1}) {
    auto cfg = test::tiny_config(model::Arch::llama, kv);
    cfg.num_layers = 3;
    const auto m = test::tiny_model(cfg, test::seed(100 + kv));
    const cpu::Backend b(m, {.threads = 0, .tile = 4});
    const auto prompt = test::random_tokens(11, cfg.vocab_size, test::seed(110 + kv));
    const auto extra = test::random_tokens(14, cfg.vocab_size, test::seed(120 + kv));
    int k = 0;
    double worst = 0;
    for (const auto& w : window_patterns(cfg, test::seed(130 + kv))) {
      INFO("kv heads " << kv << ", pattern " << k++ << ", window " << w.window << ", sinks " << w.sinks);
      worst = std::max(worst, check_steps(b, prompt, extra, w));
      check_greedy(b, prompt, 10, w);
    }
    MESSAGE("kv heads " << kv << ": max relative logit difference " << worst);
  }
}

TEST_CASE("cpu decode: a one-token prompt and a window longer than the sequence") {
  const auto m = test::tiny_model(test::tiny_config(), test::seed(140));
  const cpu::Backend b(m);
  const auto extra = test::random_tokens(9, m.config.vocab_size, test::seed(141));
  check_steps(b, {7}, extra, AttentionWindows::full());
  check_steps(b, {7}, extra, AttentionWindows::from_mask(HeadMask::filled(m.config.layout(), true), 2, 1));
  check_steps(b, {7, 3}, extra, AttentionWindows::from_mask(HeadMask::filled(m.config.layout(), true), 64, 0));
}

TEST_CASE("cpu decode: architecture variants") {
  struct Variant {
    const char* name;
    model::Config config;
  };
  std::vector<Variant> variants;
  variants.push_back({"llama interleaved, tied", test::tiny_config(model::Arch::llama)});
  {
    auto c = test::tiny_config(model::Arch::llama);
    c.rope_style = model::RopeStyle::neox;
    c.tie_embeddings = false;
    variants.push_back({"llama neox, untied", c});
  }
  variants.push_back({"qwen2 biases (neox)", test::tiny_config(model::Arch::qwen2)});
  {
    auto c = test::tiny_config(model::Arch::qwen3);
    c.tie_embeddings = false;
    variants.push_back({"qwen3 q/k norms, untied", c});
  }
  {
    auto c = test::tiny_config(model::Arch::llama);
    c.rope_theta = 500000.0;
    c.rope_scaling.type = "llama3";
    c.rope_scaling.factor = 8.0;
    c.rope_scaling.low_freq_factor = 1.0;
    c.rope_scaling.high_freq_factor = 4.0;
    c.rope_scaling.original_max_position = 64;
    variants.push_back({"llama3 rope scaling", c});
  }
  {
    auto c = test::tiny_config(model::Arch::qwen2);
    c.rope_scaling.type = "linear";
    c.rope_scaling.factor = 4.0;
    variants.push_back({"linear rope scaling", c});
  }
  int k = 0;
  for (const auto& v : variants) {
    INFO(v.name);
    const auto m = test::tiny_model(v.config, test::seed(150 + k));
    const cpu::Backend b(m, {.threads = 0, .tile = 8});
    const auto prompt = test::random_tokens(13, v.config.vocab_size, test::seed(160 + k));
    const auto extra = test::random_tokens(8, v.config.vocab_size, test::seed(170 + k));
    for (const auto& w : window_patterns(v.config, test::seed(180 + k))) {
      check_steps(b, prompt, extra, w);
      check_greedy(b, prompt, 6, w);
    }
    ++k;
  }
}

TEST_CASE("cpu decode: bad input is rejected and leaves the state usable") {
  const auto m = test::tiny_model(test::tiny_config(), test::seed(190));
  const cpu::Backend b(m);
  const auto w = AttentionWindows::from_mask(HeadMask::filled(m.config.layout(), true), 3, 1);
  CHECK_THROWS_AS(b.prefill(std::vector<int>{}, w), invalid_argument);
  CHECK_THROWS_AS(b.prefill(std::vector<int>{1, m.config.vocab_size}, w), invalid_argument);
  auto state = b.prefill(std::vector<int>{1, 2, 3}, w);
  CHECK_THROWS_AS(b.decode_step(state, -1, w), invalid_argument);
  CHECK_THROWS_AS(b.decode_step(state, m.config.vocab_size, w), invalid_argument);
  CHECK_THROWS_AS(b.decode_step(state, 4, AttentionWindows::full()), invalid_argument);
  CHECK(state.positions == 3);
  cpu::DecodeState empty;
  CHECK_THROWS_AS(b.decode_step(empty, 4, w), invalid_argument);
  auto broken = state;
  broken.positions = 2;  // disagrees with the cache's 3
  CHECK_THROWS_AS(b.decode_step(broken, 4, w), invalid_argument);
  {
    // A state made for another model (other KV-head count) is refused.
    auto other_cfg = test::tiny_config(model::Arch::llama, 1);
    const auto other = test::tiny_model(other_cfg, test::seed(191));
    const cpu::Backend ob(other);
    auto foreign = ob.prefill(std::vector<int>{1, 2, 3}, AttentionWindows::full());
    CHECK_THROWS_AS(b.decode_step(foreign, 4, AttentionWindows::full()), invalid_argument);
  }
  // The state still decodes correctly after the rejected calls.
  const auto got = b.decode_step(state, 4, w);
  const std::vector<int> seq{1, 2, 3, 4};
  const int pos = 3;
  const auto want = b.forward(seq, w, std::span<const int>(&pos, 1));
  double diff = 0;
  for (std::size_t i = 0; i < got.size(); ++i) diff = std::max(diff, static_cast<double>(std::abs(got[i] - want[i])));
  CHECK(diff <= 1e-4);
}

namespace {

/// A mask with about `fraction` of its heads SWA, drawn from `seed`.
HeadMask mask_with(HeadLayout layout, double fraction, std::uint64_t seed) {
  boost::random::mt19937_64 rng(seed);
  boost::random::bernoulli_distribution<double> coin(fraction);
  HeadMask m(layout);
  for (std::size_t i = 0; i < m.size(); ++i) m.set_flat(i, coin(rng));
  return m;
}

}  // namespace

TEST_CASE("cpu decode: hybrid cache equals the masked forward for random masks, sinks on/off, past the ring") {
  // Contexts run to 30 tokens against rings of 1 .. 8 slots, so every SWA
  // head wraps its ring several times; prompts shorter and longer than the
  // window; prefill capacity exact (decode_step grows the full heads) or
  // ample.
  boost::random::mt19937_64 rng(test::seed(300));
  boost::random::uniform_int_distribution<int> pick_window(1, 8), pick_prompt(1, 14), pick_sinks(0, 3);
  int cases = 0, with_sinks = 0, wrapped = 0;
  double worst = 0;
  for (int kv : {4, 2, 1}) {
    auto cfg = test::tiny_config(model::Arch::llama, kv);
    cfg.num_layers = 3;
    const auto m = test::tiny_model(cfg, test::seed(310 + kv));
    const cpu::Backend b(m, {.threads = 0, .tile = 4});
    for (int trial = 0; trial < 6; ++trial) {
      const int w = pick_window(rng);
      const int sinks = trial % 2 == 0 ? 0 : pick_sinks(rng) + 1;  // sinks off / on
      const int n = pick_prompt(rng);
      const auto mask = mask_with(cfg.layout(), 0.3 + 0.1 * trial, test::seed(320 + 10 * kv + trial));
      const auto windows = AttentionWindows::from_mask(mask, w, sinks);
      const auto prompt = test::random_tokens(n, cfg.vocab_size, test::seed(340 + 10 * kv + trial));
      const auto extra = test::random_tokens(30 - n, cfg.vocab_size, test::seed(360 + 10 * kv + trial));
      INFO("kv heads " << kv << ", trial " << trial << ": " << mask.count() << " of " << mask.size()
                       << " heads SWA, window " << w << ", sinks " << sinks << ", prompt " << n);
      worst = std::max(worst, check_steps(b, prompt, extra, windows));
      ++cases;
      with_sinks += sinks > 0;
      wrapped += 30 > sinks + w && mask.count() > 0;
      // SWA heads never hold more than sinks + window rows, full heads all.
      auto state = b.prefill(prompt, windows);
      for (int t : extra) b.decode_step(state, t, windows);
      for (int l = 0; l < cfg.num_layers; ++l)
        for (int g = 0; g < kv; ++g) {
          const bool swa = mask.swa(l, g);
          CHECK(state.cache.head_rows(l, g) ==
                (swa ? std::min<std::int64_t>(state.cache.capacity(), sinks + w) : state.cache.capacity()));
          int held = 0;
          for (int j = 0; j < 30; ++j) held += state.cache.key(l, g, j) != nullptr;
          CHECK(held == (swa ? std::min(30, sinks + w - 1) : 30));  // what the next query (position 30) sees
        }
    }
  }
  CHECK(with_sinks > 0);
  CHECK(wrapped > 0);
  MESSAGE(cases << " random masks: max relative logit difference " << worst);
}

TEST_CASE("cpu decode: kv_bytes is the exact formula and the cache allocates exactly that") {
  const auto layout = HeadLayout{3, 4, 2};
  HeadMask mask(layout);
  mask.set(0, 1, true);
  mask.set(2, 0, true);
  mask.set(2, 1, true);
  // 3 full heads x 100 rows + 3 SWA heads x min(100, 2 + 16) rows, x 2 x 8 floats x 4 bytes.
  CHECK(cpu::kv_bytes(layout, 8, mask, 16, 2, 100) == (3 * 100 + 3 * 18) * 2 * 8 * 4);
  // Short contexts: an SWA head holds min(tokens, sinks + window).
  CHECK(cpu::kv_bytes(layout, 8, mask, 16, 2, 10) == 6 * 10 * 2 * 8 * 4);
  CHECK(cpu::kv_bytes(layout, 8, HeadMask{}, 16, 2, 100) == 6 * 100 * 2 * 8 * 4);
  CHECK(cpu::kv_bytes(layout, 8, HeadMask::filled(layout, true), 16, 0, 100) == 6 * 16 * 2 * 8 * 4);
  CHECK(cpu::kv_bytes(layout, 8, mask, 16, 2, 0) == 0);
  // The shape the issue expects for SmolLM2 (30 layers x 3 KV heads x
  // head_dim 64) at rho 0.75, w 64, 8k tokens: about 0.26 of all-full.
  {
    const HeadLayout smol{30, 9, 3};
    HeadMask m(smol);
    for (std::size_t i = 0; i < m.size(); ++i) m.set_flat(i, i % 4 != 0);  // 67 or 68 of 90
    const double ratio = static_cast<double>(cpu::kv_bytes(smol, 64, m, 64, 4, 8192)) /
                         static_cast<double>(cpu::kv_bytes(smol, 64, HeadMask{}, 64, 4, 8192));
    CHECK(ratio > 0.25);
    CHECK(ratio < 0.27);
  }
  CHECK_THROWS_AS(cpu::kv_bytes(HeadLayout{3, 4, 4}, 8, mask, 16, 2, 100), invalid_argument);

  auto cfg = test::tiny_config(model::Arch::llama, 2);
  cfg.num_layers = 3;
  const auto m = test::tiny_model(cfg, test::seed(400));
  const cpu::Backend b(m);
  for (int sinks : {0, 2}) {
    const auto windows = AttentionWindows::from_mask(mask_with(cfg.layout(), 0.5, test::seed(401 + sinks)), 5, sinks);
    const auto prompt = test::random_tokens(9, cfg.vocab_size, test::seed(402));
    // Exact capacity, ample capacity, and growth by decode_step.
    for (int capacity : {0, 9, 40}) {
      auto state = b.prefill(prompt, windows, nullptr, capacity);
      CHECK(state.cache.capacity() == std::max(9, capacity));
      CHECK(state.bytes() == cpu::kv_bytes(cfg, windows, std::max(9, capacity)));
      for (int t = 0; t < 20; ++t) {
        b.decode_step(state, (t * 7) % cfg.vocab_size, windows);
        CHECK(state.bytes() == cpu::kv_bytes(cfg, windows, state.cache.capacity()));
      }
      CHECK(state.cache.capacity() >= 29);
      if (capacity == 40) CHECK(state.cache.capacity() == 40);  // never grew
    }
  }
}

TEST_CASE("cpu decode: a mask of another layout is refused before any work, naming both layouts") {
  const auto m = test::tiny_model(test::tiny_config(model::Arch::llama, 2), test::seed(410));
  const cpu::Backend b(m);
  const HeadLayout other{m.config.num_layers + 1, m.config.num_heads, m.config.num_kv_heads};
  const auto windows = AttentionWindows::from_mask(HeadMask::filled(other, true), 4, 1);
  // An out-of-vocabulary token too: the layout is what is reported, so the
  // check runs before the tokens are even embedded.
  try {
    b.prefill(std::vector<int>{1, m.config.vocab_size + 5}, windows);
    FAIL("prefill accepted a mask of another layout");
  } catch (const invalid_argument& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find(to_string(other)) != std::string::npos);
    CHECK(what.find(to_string(m.config.layout())) != std::string::npos);
  }
  CHECK_THROWS_AS(cpu::KvCache(m.config, windows, 8), invalid_argument);
  CHECK_THROWS_AS(cpu::kv_bytes(m.config, windows, 8), invalid_argument);
}

TEST_CASE("stories260K: decode with a hybrid cache equals the masked forward past the ring") {
  const auto path = test::fixture("models/stories260K.gguf");
  if (path.empty()) return;
  const auto m = model::load(path);
  const cpu::Backend b(m);
  const auto prompt = test::random_tokens(12, m.config.vocab_size, test::seed(420));
  const auto extra = test::random_tokens(28, m.config.vocab_size, test::seed(421));
  for (int sinks : {0, 4}) {
    const auto windows = AttentionWindows::from_mask(mask_with(m.config.layout(), 0.5, test::seed(422)), 8, sinks);
    INFO("sinks " << sinks << ", " << windows.mask.count() << " of " << windows.mask.size() << " heads SWA");
    REQUIRE(windows.mask.count() > 0);
    REQUIRE(windows.mask.count() < windows.mask.size());
    const double worst = check_steps(b, prompt, extra, windows);
    MESSAGE("stories260K, sinks " << sinks << ": max relative logit difference " << worst);
    check_greedy(b, prompt, 12, windows);
  }
}
