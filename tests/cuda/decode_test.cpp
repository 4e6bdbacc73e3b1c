// Incremental decoding on the GPU (cuda::Backend::prefill + decode_step with
// the hybrid KV cache) against the CUDA masked forward and the CPU backend's
// decode, for random mixes of full and SWA heads, with and without sinks,
// contexts several times the ring size; the cache's bytes against the
// formula and its slots against the CPU cache's; bad input refused before
// any work. Without a GPU every case prints "SKIPPED: no CUDA device:
// <reason>" and passes.
//
// Tolerance (logits_check.hpp, derived at the top of forward_test.cpp): the
// CUDA decode's logits must be as close to the CPU's fp32 decode as the
// CUDA forward's are to the CPU forward, |got - ref| <= 4 E_max + 2 u
// rms(ref) + u |ref| with E_max what rounding the weights alone costs on
// the CPU. The decode and the forward on the GPU share the rounded weights
// and differ only in activation rounding (the forward's tensor-core kernel
// rounds P to 16 bits, decode attention keeps it in fp32; one-row GEMMs may
// sum in another order), so they are held to the same bound against each
// other. A key in a wrong slot, a missing sink, an evicted position read or a
// RoPE position off by one moves logits by a sizeable fraction of rms(ref).

#include "../cpu/tiny_model.hpp"
#include "cuda_support.hpp"
#include "logits_check.hpp"

#include <bosch/cpu/backend.hpp>
#include <bosch/cuda/backend.hpp>
#include <bosch/eval/report.hpp>
#include <bosch/model/kv_layout.hpp>
#include <bosch/model/model.hpp>

#include <boost/random/bernoulli_distribution.hpp>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace bosch;
using cuda::DType;

static_assert(IncrementalDecoder<cuda::Backend>, "cuda::Backend decodes incrementally");
static_assert(IncrementalDecoder<cpu::Backend>);

namespace {

/// A mask with about `fraction` of its heads SWA, drawn from `seed`.
HeadMask mask_with(const HeadLayout& layout, double fraction, std::uint64_t seed) {
  boost::random::mt19937_64 rng(seed);
  boost::random::bernoulli_distribution<double> coin(fraction);
  HeadMask m(layout);
  for (std::size_t i = 0; i < m.size(); ++i) m.set_flat(i, coin(rng));
  return m;
}

/// A model whose attention runs on the tensor-core kernel in the forward pass
/// (head_dim 64), 3 layers.
model::Config tc_config(model::Arch arch) {
  model::Config c = test::tiny_config(arch, 2);
  c.hidden_size = 256;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.intermediate_size = 512;
  c.num_layers = 3;
  c.vocab_size = 300;
  c.max_position = 4096;
  return c;
}

/// Logits of a CPU prefill of `prompt` and a decode step per token of
/// `extra` (all but the last fed), concatenated: [extra.size(), vocab].
std::vector<float> cpu_decode(const cpu::Backend& b, const std::vector<int>& prompt, const std::vector<int>& extra,
                              const AttentionWindows& w) {
  std::vector<float> all, logits;
  auto state = b.prefill(prompt, w, &logits);
  for (std::size_t t = 0; t < extra.size(); ++t) {
    all.insert(all.end(), logits.begin(), logits.end());
    if (t + 1 < extra.size()) logits = b.decode_step(state, extra[t], w);
  }
  return all;
}

/// The same on the GPU, together with the CUDA forward's logits at the same
/// positions (`forward`), the state's bytes checked against the formula at
/// every step, and prefill's logits checked bitwise against forward's.
std::vector<float> gpu_decode(const cuda::Backend& b, const std::vector<int>& prompt, const std::vector<int>& extra,
                              const AttentionWindows& w, int capacity, std::vector<float>& forward) {
  std::vector<float> all, logits;
  auto state = b.prefill(prompt, w, &logits, capacity);
  std::vector<int> seq = prompt;
  int last = static_cast<int>(seq.size()) - 1;
  CHECK(logits == b.forward(seq, w, std::span<const int>(&last, 1)));  // the forward's own pass
  forward.clear();
  for (std::size_t t = 0; t < extra.size(); ++t) {
    all.insert(all.end(), logits.begin(), logits.end());
    last = static_cast<int>(seq.size()) - 1;
    const auto f = b.forward(seq, w, std::span<const int>(&last, 1));
    forward.insert(forward.end(), f.begin(), f.end());
    if (t + 1 == extra.size()) break;
    logits = b.decode_step(state, extra[t], w);
    seq.push_back(extra[t]);
    CHECK(state.positions() == static_cast<int>(seq.size()));
    CHECK(state.bytes() == b.kv_bytes(w, state.capacity()));
  }
  CHECK(state.bytes() == kv::bytes(b.config(), w, state.capacity(), 2));
  return all;
}

/// Decodes prompt + extra on the GPU and checks it against the CPU decode
/// (fp32 weights: the reference; 16-bit weights: the calibration) and the
/// CUDA forward.
void compare_decode(const std::string& name, const model::Model& m, const std::vector<int>& prompt,
                    const std::vector<int>& extra, const AttentionWindows& w, const cuda::Options& options,
                    int capacity = 0) {
  const auto ref = cpu_decode(cpu::Backend(m), prompt, extra, w);
  const auto ref_rounded = cpu_decode(cpu::Backend(test::rounded_weights(m, options.dtype)), prompt, extra, w);
  const cuda::Backend gpu(m, options);
  std::vector<float> forward;
  const auto got = gpu_decode(gpu, prompt, extra, w, capacity, forward);
  const std::string label = name + " " + cuda::to_string(options.dtype);
  test::check_logits(label + ": CUDA decode vs CPU decode", got, ref, ref_rounded, m.config.vocab_size,
                     options.dtype);
  const double u = cuda::unit_roundoff(options.dtype);
  const test::ErrorStats e = test::error_stats(ref_rounded, ref);
  test::check_close(label + ": CUDA decode vs CUDA forward", got, forward,
                    test::Tolerance{4 * e.max + 2 * u * test::rms(ref), u});
}

/// `n` distinct token ids below `vocab` (a seeded shuffle).
std::vector<int> distinct_tokens(int n, int vocab, std::uint64_t seed) {
  std::vector<int> all(static_cast<std::size_t>(vocab));
  for (int i = 0; i < vocab; ++i) all[static_cast<std::size_t>(i)] = i;
  boost::random::mt19937_64 rng(seed);
  for (int i = vocab - 1; i > 0; --i) {
    boost::random::uniform_int_distribution<int> pick(0, i);
    std::swap(all[static_cast<std::size_t>(i)], all[static_cast<std::size_t>(pick(rng))]);
  }
  all.resize(static_cast<std::size_t>(n));
  return all;
}

}  // namespace

TEST_CASE("CUDA decode equals the CUDA forward and the CPU decode: random full/SWA mixes, sinks, past the ring") {
  if (!test::cuda_device()) return;
  // Contexts of 30 tokens against rings of 1 .. 8 slots on the tiny models
  // (CUDA-core attention in the forward), 150 tokens against rings of 5 .. 40
  // on head_dim 64 (tensor cores): every SWA head wraps its ring several
  // times; prompts shorter and longer than the window; sinks off and on.
  boost::random::mt19937_64 rng(test::seed(600));
  int cases = 0, with_sinks = 0, wrapped = 0;
  for (auto arch : {model::Arch::llama, model::Arch::qwen2, model::Arch::qwen3}) {
    for (bool wide : {false, true}) {
      auto cfg = wide ? tc_config(arch) : test::tiny_config(arch, arch == model::Arch::qwen2 ? 1 : 2);
      cfg.num_layers = 3;
      const auto m = test::tiny_model(cfg, test::seed(610 + 2 * static_cast<int>(arch) + wide));
      const int context = wide ? 150 : 30;
      boost::random::uniform_int_distribution<int> pick_window(wide ? 5 : 1, wide ? 40 : 8);
      boost::random::uniform_int_distribution<int> pick_prompt(1, wide ? 60 : 14), pick_sinks(1, 4);
      for (int trial = 0; trial < 3; ++trial) {
        const int window = pick_window(rng);
        const int sinks = trial == 0 ? 0 : pick_sinks(rng);
        const int n = pick_prompt(rng);
        const auto mask = mask_with(cfg.layout(), 0.3 + 0.2 * trial, test::seed(620 + 10 * cases));
        const auto w = AttentionWindows::from_mask(mask, window, sinks);
        const auto prompt = test::random_tokens(n, cfg.vocab_size, test::seed(640 + cases));
        const auto extra = test::random_tokens(context - n, cfg.vocab_size, test::seed(660 + cases));
        cuda::Options o;
        o.dtype = trial == 2 ? DType::fp16 : DType::bf16;
        const std::string name = std::string(model::to_string(arch)) + " d" + std::to_string(cfg.head_dim) + " " +
                                 std::to_string(mask.count()) + "/" + std::to_string(mask.size()) + " SWA w" +
                                 std::to_string(window) + " s" + std::to_string(sinks) + " prompt " +
                                 std::to_string(n);
        // Capacity exact (decode_step grows the cache) or the whole context.
        compare_decode(name, m, prompt, extra, w, o, trial == 1 ? context : 0);
        ++cases;
        with_sinks += sinks > 0;
        wrapped += context > sinks + window && mask.count() > 0;
      }
    }
  }
  CHECK(with_sinks > 0);
  CHECK(wrapped > 0);
  MESSAGE(cases << " random masks decoded");
}

TEST_CASE("CUDA decode of Qwen3-MoE equals the CUDA forward and the CPU decode (experts in the decode path)") {
  if (!test::cuda_device()) return;
  // Every expert active (no discrete routing), and top-2 of 4 on decisive inputs.
  for (const auto& cfg : {test::tiny_moe_config(2, 4, 4, false), test::tiny_moe_config(2, 4, 2, true)}) {
    const auto m = test::tiny_model(cfg, test::seed(720));
    for (const auto& w : {AttentionWindows::full(),
                          AttentionWindows::from_mask(mask_with(cfg.layout(), 0.5, test::seed(721)), 4, 2)}) {
      const int n = 20;
      const auto tokens = cfg.moe.num_experts_used == cfg.moe.num_experts
                              ? test::random_tokens(n, cfg.vocab_size, test::seed(722))
                              : test::decisive_tokens(m, n, w, 0.25, test::seed(723));
      const std::vector<int> prompt(tokens.begin(), tokens.begin() + 8), extra(tokens.begin() + 8, tokens.end());
      for (DType t : {DType::bf16, DType::fp16}) {
        cuda::Options o;
        o.dtype = t;
        compare_decode(std::string("Qwen3-MoE top-") + std::to_string(cfg.moe.num_experts_used), m, prompt, extra,
                       w, o);
      }
    }
  }
}

TEST_CASE("CUDA decode on stories260K equals the CPU decode past the ring") {
  if (!test::cuda_device()) return;
  const auto path = test::fixture("models/stories260K.gguf");
  if (path.empty()) return;
  const auto m = model::load(path);
  const auto prompt = test::random_tokens(12, m.config.vocab_size, test::seed(700));
  const auto extra = test::random_tokens(40, m.config.vocab_size, test::seed(701));
  for (int sinks : {0, 4}) {
    const auto w = AttentionWindows::from_mask(mask_with(m.config.layout(), 0.5, test::seed(702)), 8, sinks);
    REQUIRE(w.mask.count() > 0);
    REQUIRE(w.mask.count() < w.mask.size());
    compare_decode("stories260K sinks " + std::to_string(sinks), m, prompt, extra, w, cuda::Options{});
  }
}

TEST_CASE("CUDA decode: KV bytes are the formula, slots are the CPU cache's, growth keeps them") {
  if (!test::cuda_device()) return;
  auto cfg = tc_config(model::Arch::llama);
  const auto m = test::tiny_model(cfg, test::seed(710));
  const cuda::Backend gpu(m);
  const cpu::Backend cpu_backend(m);
  for (int sinks : {0, 3}) {
    const auto w = AttentionWindows::from_mask(mask_with(cfg.layout(), 0.5, test::seed(711 + sinks)), 7, sinks);
    REQUIRE(w.mask.count() > 0);
    // 39 distinct tokens: no two positions share a token, so no two layer-0
    // values (V has no RoPE) coincide.
    const auto tokens = distinct_tokens(39, cfg.vocab_size, test::seed(712 + sinks));
    const std::vector<int> prompt(tokens.begin(), tokens.begin() + 9), extra(tokens.begin() + 9, tokens.end());
    for (int capacity : {0, 9, 60}) {
      INFO("sinks " << sinks << ", capacity " << capacity);
      auto state = gpu.prefill(prompt, w, nullptr, capacity);
      auto reference = cpu_backend.prefill(prompt, w, nullptr, capacity);
      CHECK(state.capacity() == std::max(9, capacity));
      CHECK(state.bytes() == gpu.kv_bytes(w, state.capacity()));
      // 16-bit values: half the CPU cache's fp32 bytes, the same rows.
      CHECK(2 * state.bytes() == reference.bytes());
      for (int t : extra) {
        gpu.decode_step(state, t, w);
        cpu_backend.decode_step(reference, t, w);
        CHECK(state.bytes() == gpu.kv_bytes(w, state.capacity()));
        CHECK(state.capacity() == reference.capacity());  // the same growth
      }
      CHECK(state.positions() == 39);
      if (capacity == 60) CHECK(state.capacity() == 60);  // never grew
      for (int l = 0; l < cfg.num_layers; ++l)
        for (int g = 0; g < cfg.num_kv_heads; ++g) {
          CHECK(state.head_rows(l, g) == reference.cache.head_rows(l, g));
          // The same positions held; each held key is nearest to the CPU's
          // key of its own position (a slot mix-up would pick another).
          std::vector<int> held;
          for (int j = 0; j < 39; ++j) {
            const bool on_gpu = !state.key(l, g, j).empty();
            CHECK(on_gpu == (reference.cache.key(l, g, j) != nullptr));
            if (on_gpu) held.push_back(j);
          }
          for (int j : held) {
            const auto k = state.key(l, g, j);
            const auto v = state.value(l, g, j);
            REQUIRE(k.size() == static_cast<std::size_t>(cfg.head_dim));
            REQUIRE(v.size() == k.size());
            auto distance = [&](const float* ref, const std::vector<float>& x) {
              double s = 0;
              for (std::size_t c = 0; c < x.size(); ++c) s += (x[c] - ref[c]) * (x[c] - ref[c]);
              return s;
            };
            int nearest_k = -1, nearest_v = -1;
            double best_k = std::numeric_limits<double>::infinity(), best_v = best_k;
            for (int i : held) {
              const double dk = distance(reference.cache.key(l, g, i), k);
              const double dv = distance(reference.cache.value(l, g, i), v);
              if (dk < best_k) {
                best_k = dk;
                nearest_k = i;
              }
              if (dv < best_v) {
                best_v = dv;
                nearest_v = i;
              }
            }
            INFO("layer " << l << ", KV head " << g << ", position " << j);
            CHECK(nearest_k == j);
            CHECK(nearest_v == j);
          }
        }
    }
  }
}

TEST_CASE("CUDA decode: greedy decoding through the shared interface, deterministic") {
  if (!test::cuda_device()) return;
  const auto cfg = tc_config(model::Arch::qwen3);
  const auto m = test::tiny_model(cfg, test::seed(720));
  const cuda::Backend gpu(m);
  const auto w = AttentionWindows::from_mask(mask_with(cfg.layout(), 0.6, test::seed(721)), 6, 2);
  const auto prompt = test::random_tokens(20, cfg.vocab_size, test::seed(722));
  // By hand: prefill, then argmax and decode_step, twice (bitwise the same).
  auto by_hand = [&] {
    std::vector<float> logits;
    std::vector<std::vector<float>> rows;
    std::vector<int> tokens;
    auto state = gpu.prefill(prompt, w, &logits, 20 + 24);
    for (int s = 0; s < 25; ++s) {
      rows.push_back(logits);
      const int next = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      tokens.push_back(next);
      if (s < 24) logits = gpu.decode_step(state, next, w);
    }
    return std::pair{tokens, rows};
  };
  const auto a = by_hand();
  const auto b = by_hand();
  CHECK(a.first == b.first);
  CHECK(a.second == b.second);
  // greedy_continue (eval/report.hpp) takes the incremental route on the GPU
  // too, through the same prefill / decode_step calls (no end-of-sequence id).
  std::vector<int> generated;
  greedy_continue(gpu, prompt, generated, 25, -1, w, GreedyPath::incremental);
  CHECK(generated == a.first);
}

TEST_CASE("CUDA decode: bad input is refused before any work and leaves the state usable") {
  if (!test::cuda_device()) return;
  const auto cfg = test::tiny_config(model::Arch::llama, 2);
  const auto m = test::tiny_model(cfg, test::seed(730));
  const cuda::Backend gpu(m);
  // A mask of another layout is refused naming both layouts, before the
  // (also bad) token ids are looked at and before any device memory.
  const HeadLayout other{cfg.num_layers + 1, cfg.num_heads, cfg.num_kv_heads};
  const auto foreign = AttentionWindows::from_mask(HeadMask::filled(other, true), 4, 1);
  try {
    gpu.prefill(std::vector<int>{1, cfg.vocab_size + 5}, foreign);
    FAIL("prefill accepted a mask of another layout");
  } catch (const invalid_argument& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find(to_string(other)) != std::string::npos);
    CHECK(what.find(to_string(cfg.layout())) != std::string::npos);
  }
  const auto w = AttentionWindows::from_mask(HeadMask::filled(cfg.layout(), true), 3, 1);
  CHECK_THROWS_AS(gpu.prefill(std::vector<int>{}, w), invalid_argument);
  CHECK_THROWS_AS(gpu.prefill(std::vector<int>{1, 2}, w, nullptr, -1), invalid_argument);
  try {
    gpu.prefill(std::vector<int>{1, cfg.vocab_size}, w);
    FAIL("prefill accepted a token outside the vocabulary");
  } catch (const invalid_argument& e) {
    CHECK(std::string(e.what()).find("token id " + std::to_string(cfg.vocab_size) + " at position 1") !=
          std::string::npos);
  }
  auto state = gpu.prefill(std::vector<int>{1, 2, 3}, w);
  CHECK_THROWS_AS(gpu.decode_step(state, -1, w), invalid_argument);
  CHECK_THROWS_AS(gpu.decode_step(state, cfg.vocab_size, w), invalid_argument);
  CHECK_THROWS_AS(gpu.decode_step(state, 4, AttentionWindows::full()), invalid_argument);
  CHECK(state.positions() == 3);
  cuda::DecodeState empty;
  CHECK_THROWS_AS(gpu.decode_step(empty, 4, w), invalid_argument);
  {
    // A state of another model (other KV-head count) or dtype is refused.
    const auto other_model = test::tiny_model(test::tiny_config(model::Arch::llama, 1), test::seed(731));
    const cuda::Backend other_gpu(other_model);
    auto wrong = other_gpu.prefill(std::vector<int>{1, 2, 3}, AttentionWindows::full());
    CHECK_THROWS_AS(gpu.decode_step(wrong, 4, AttentionWindows::full()), invalid_argument);
    cuda::Options half;
    half.dtype = DType::fp16;
    const cuda::Backend fp16_gpu(m, half);
    CHECK_THROWS_AS(fp16_gpu.decode_step(state, 4, w), invalid_argument);
  }
  // A moved-from state is empty; the moved-to one decodes correctly.
  cuda::DecodeState moved = std::move(state);
  CHECK(state.empty());
  const auto got = gpu.decode_step(moved, 4, w);
  const std::vector<int> seq{1, 2, 3, 4};
  const int last = 3;
  const auto ref = cpu::Backend(m).forward(seq, w, std::span<const int>(&last, 1));
  const auto ref_rounded =
      cpu::Backend(test::rounded_weights(m, gpu.options().dtype)).forward(seq, w, std::span<const int>(&last, 1));
  test::check_logits("decode after rejected calls vs CPU forward", got, ref, ref_rounded, cfg.vocab_size,
                     gpu.options().dtype);
}
