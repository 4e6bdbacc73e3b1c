// The Qwen3-MoE feed-forward on the CPU backend: route_top_k on planted
// logits; the forward pass against the naive float64 reference (tests/cpu/
// reference.hpp, ref_moe written from transformers' Qwen3MoeSparseMoeBlock)
// for full, windowed and mixed per-head masks with sinks, top-k variants,
// renormalized or not, GQA and mixed dense/sparse layers; the same model
// written as GGUF and as a Hugging Face directory giving the same logits;
// prefill + decode_step against the hybrid KV cache equal to forward;
// layer-wise = whole (bitwise); the FLOP model counting only active experts.
//
// Tolerances are those of forward_test.cpp (2e-5 relative to the logit
// scale against the reference) and decode_test.cpp (1e-5): the expert
// matrices add dot products of length <= 32 and a weighted sum of at most 4
// terms, the same order of rounding as the dense FFN. A wrong expert, weight
// or normalization moves logits by 1e-2 or more. The tests also require the
// reference's routing to be decisive (the k-th and (k+1)-th router logits
// at least 1e-4 apart for every token), so fp32 rounding cannot flip a
// choice and a failure means a real difference.

#include "../model/writers.hpp"
#include "reference.hpp"
#include "test_support.hpp"
#include "tiny_model.hpp"

#include <bosch/cpu/backend.hpp>
#include <bosch/cpu/kv_cache.hpp>
#include <bosch/cpu/moe.hpp>
#include <bosch/model/model.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace {

using namespace bosch;

constexpr double tolerance = 2e-5;
constexpr double decode_tolerance = 1e-5;
constexpr double min_router_margin = 1e-4;

/// CPU forward vs the naive reference on n random tokens under `w`.
void check_reference(const model::Model& m, const AttentionWindows& w, int n, std::uint64_t seed,
                     cpu::Options opt = {}) {
  const auto tokens = test::random_tokens(n, m.config.vocab_size, seed);
  const auto pos = test::all_positions(n);
  const auto got = cpu::Backend(m, opt).forward(tokens, w, pos);
  double margin = 0;
  const auto want = test::reference_logits(m, tokens, w, pos, nullptr, nullptr, &margin);
  const auto d = test::compare(got, want);
  INFO("max abs diff " << d.max_abs << ", logit scale " << d.scale << ", smallest router margin " << margin);
  CHECK(margin >= min_router_margin);
  CHECK(d.max_abs <= tolerance * std::max(1.0, d.scale));
  CHECK(d.scale > 0.5);
}

std::vector<AttentionWindows> window_patterns(const model::Config& c, std::uint64_t seed) {
  return {AttentionWindows::full(),
          AttentionWindows::from_mask(HeadMask::filled(c.layout(), true), 5, 0),
          AttentionWindows::from_mask(HeadMask::filled(c.layout(), true), 4, 3),
          AttentionWindows::from_mask(test::random_mask(c.layout(), seed), 6, 2),
          AttentionWindows::from_mask(test::random_mask(c.layout(), seed + 1), 3, 1)};
}

double max_relative_diff(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::abs(want[i])));
  }
  return diff / std::max(1.0, scale);
}

}  // namespace

TEST_CASE("route_top_k: softmax over all experts, top-k, renormalization, ties to the lower expert") {
  // Row 0: experts by logit 3 > 1 > 0 > -1 (expert 2, 0, 3, 1). Row 1: a tie
  // between experts 1 and 3 at the top. Row 2: all equal.
  const std::vector<float> logits = {1, -1, 3, 0, /**/ 0, 2, -5, 2, /**/ 0.5f, 0.5f, 0.5f, 0.5f};
  for (bool normalize : {false, true}) {
    cpu::Routing r;
    cpu::route_top_k(logits.data(), 3, 4, 2, normalize, r);
    CAPTURE(normalize);
    CHECK(r.expert == std::vector<int>{2, 0, 1, 3, 0, 1});
    const double z0 = std::exp(1.0) + std::exp(-1.0) + std::exp(3.0) + 1.0;
    const double p2 = std::exp(3.0) / z0, p0 = std::exp(1.0) / z0;
    CHECK(r.weight[0] == doctest::Approx(normalize ? p2 / (p2 + p0) : p2).epsilon(1e-6));
    CHECK(r.weight[1] == doctest::Approx(normalize ? p0 / (p2 + p0) : p0).epsilon(1e-6));
    CHECK(r.weight[2] == doctest::Approx(normalize ? 0.5 : r.weight[3]).epsilon(1e-6));
    CHECK(r.weight[4] == doctest::Approx(normalize ? 0.5 : 0.25).epsilon(1e-6));
    // Grouped by expert, rows ascending: expert 0 <- rows 0, 2; 1 <- rows 1, 2; 2 <- row 0; 3 <- row 1.
    CHECK(r.offsets == std::vector<int>{0, 2, 4, 5, 6});
    CHECK(r.row_of == std::vector<int>{0, 2, 1, 2, 0, 1});
    for (std::size_t slot = 0; slot < r.expert.size(); ++slot) {
      const int p = r.position[slot];
      CHECK(r.row_of[static_cast<std::size_t>(p)] == static_cast<int>(slot / 2));
      CHECK(p >= r.offsets[static_cast<std::size_t>(r.expert[slot])]);
      CHECK(p < r.offsets[static_cast<std::size_t>(r.expert[slot]) + 1]);
    }
  }
  cpu::Routing all;
  cpu::route_top_k(logits.data(), 3, 4, 4, false, all);  // k = E: every expert, weights sum to 1
  for (int row = 0; row < 3; ++row)
    CHECK(std::accumulate(all.weight.begin() + 4 * row, all.weight.begin() + 4 * row + 4, 0.0) ==
          doctest::Approx(1.0).epsilon(1e-6));
}

TEST_CASE("cpu MoE forward matches the naive reference: full, windowed and mixed masks with sinks") {
  struct Variant {
    const char* name;
    model::Config config;
  };
  std::vector<Variant> variants = {
      {"top-2 of 4, renormalized, layer 1 dense", test::tiny_moe_config()},
      {"top-2 of 4, not renormalized", test::tiny_moe_config(2, 4, 2, false)},
      {"top-1 of 4", test::tiny_moe_config(2, 4, 1)},
      {"top-4 of 4 (every expert)", test::tiny_moe_config(2, 4, 4, false)},
      {"top-3 of 8, all sparse, one KV head", test::tiny_moe_config(1, 8, 3, true, 2, {})},
      {"top-2 of 6, four KV heads, untied output", test::tiny_moe_config(4, 6, 2, true, 3, {0})},
  };
  variants.back().config.tie_embeddings = false;
  for (std::size_t v = 0; v < variants.size(); ++v) {
    const auto& [name, cfg] = variants[v];
    const auto m = test::tiny_model(cfg, test::seed(500 + v));
    const auto patterns = window_patterns(cfg, test::seed(510 + v));
    for (std::size_t p = 0; p < patterns.size(); ++p) {
      INFO(name << ", window pattern " << p);
      check_reference(m, patterns[p], 40, test::seed(520));
    }
  }
}

TEST_CASE("cpu MoE forward: many rows per expert (blocks of rows and columns) and thread counts") {
  // 300 tokens x top-2 of 3 experts: ~200 rows per expert, more than one
  // block of 128; expert size 300 > 256 columns per block.
  auto cfg = test::tiny_moe_config(2, 3, 2, true, 2, {});
  cfg.moe.expert_intermediate_size = 300;
  const auto m = test::tiny_model(cfg, test::seed(530));
  const auto w = AttentionWindows::from_mask(test::random_mask(cfg.layout(), test::seed(531)), 16, 2);
  check_reference(m, w, 300, test::seed(532));
  // The expert blocks do not depend on the thread count; only the router
  // GEMM's blocking may, so the logits agree to rounding.
  const auto tokens = test::random_tokens(300, cfg.vocab_size, test::seed(533));
  const auto pos = test::all_positions(300);
  const auto one = cpu::Backend(m, {.threads = 1}).forward(tokens, w, pos);
  const auto two = cpu::Backend(m, {.threads = 2}).forward(tokens, w, pos);
  CHECK(max_relative_diff(two, one) <= tolerance);
}

TEST_CASE("cpu MoE: a GGUF file and a Hugging Face directory of the same model give the same logits") {
  test::writers::TempDir dir("moe-formats");
  test::writers::TinySpec spec;
  spec.arch = model::Arch::qwen3moe;
  spec.layers = 3;
  spec.head_dim = 16;
  spec.dense_layers = {2};
  spec.experts = 5;
  spec.experts_used = 2;
  spec.norm_topk_prob = false;
  const auto tiny = test::writers::random_model(spec, test::seed(540));
  test::writers::write_gguf(tiny, dir / "m.gguf");
  test::writers::write_hf(tiny, dir / "hf");
  const model::Model g = model::load(dir / "m.gguf");
  const model::Model h = model::load(dir / "hf");
  REQUIRE(g.config.arch == model::Arch::qwen3moe);
  REQUIRE(h.config.arch == model::Arch::qwen3moe);
  CHECK(g.config.moe.sparse_layers == h.config.moe.sparse_layers);
  CHECK_FALSE(g.config.moe.norm_topk_prob);
  CHECK_FALSE(h.config.moe.norm_topk_prob);
  const int n = 36;
  const auto tokens = test::random_tokens(n, g.config.vocab_size, test::seed(541));
  const auto pos = test::all_positions(n);
  for (const auto& w : window_patterns(g.config, test::seed(542))) {
    const auto lg = cpu::Backend(g).forward(tokens, w, pos);
    const auto lh = cpu::Backend(h).forward(tokens, w, pos);
    // Same weights; only rms_norm_eps differs in its last bits (f32 in GGUF).
    CHECK(max_relative_diff(lg, lh) <= 1e-6);
    // And both are the model that was written.
    double margin = 0;
    const auto want = test::reference_logits(g, tokens, w, pos, nullptr, nullptr, &margin);
    CHECK(margin >= min_router_margin);
    const auto d = test::compare(lh, want);
    CHECK(d.max_abs <= tolerance * std::max(1.0, d.scale));
  }
}

TEST_CASE("cpu MoE: prefill + decode_step with the hybrid KV cache equal fresh forwards") {
  for (const auto& cfg : {test::tiny_moe_config(), test::tiny_moe_config(1, 6, 3, false, 2, {})}) {
    const auto m = test::tiny_model(cfg, test::seed(550 + cfg.moe.num_experts));
    const cpu::Backend b(m);
    const auto tokens = test::random_tokens(30, cfg.vocab_size, test::seed(551));
    const std::vector<int> prompt(tokens.begin(), tokens.begin() + 12);
    for (const auto& w : window_patterns(cfg, test::seed(552))) {
      std::vector<float> last;
      auto state = b.prefill(prompt, w, &last);
      std::vector<int> seq = prompt;
      int at = static_cast<int>(seq.size()) - 1;
      CHECK(last == b.forward(seq, w, std::span<const int>(&at, 1)));  // the forward's own layers: bitwise
      for (std::size_t t = prompt.size(); t < tokens.size(); ++t) {
        const auto got = b.decode_step(state, tokens[t], w);
        seq.push_back(tokens[t]);
        at = static_cast<int>(seq.size()) - 1;
        const auto want = b.forward(seq, w, std::span<const int>(&at, 1));
        INFO("experts " << cfg.moe.num_experts << ", position " << at);
        CHECK(max_relative_diff(got, want) <= decode_tolerance);
      }
      CHECK(state.bytes() == cpu::kv_bytes(cfg, w, state.cache.capacity()));
    }
  }
}

TEST_CASE("cpu MoE: layer by layer equals the whole forward, bitwise; forward_batch agrees") {
  const auto cfg = test::tiny_moe_config();
  const auto m = test::tiny_model(cfg, test::seed(560));
  const cpu::Backend b(m);
  const auto w = AttentionWindows::from_mask(test::random_mask(cfg.layout(), test::seed(561)), 5, 2);
  const auto tokens = test::random_tokens(33, cfg.vocab_size, test::seed(562));
  const auto pos = test::all_positions(33);
  const auto whole = b.forward(tokens, w, pos);
  cpu::Residual x = b.embed(tokens);
  for (int l = 0; l < cfg.num_layers; ++l) b.run_layers(x, l, l + 1, w);
  CHECK(b.logits(x, pos) == whole);
  const std::vector<std::vector<int>> seqs = {tokens, std::vector<int>(tokens.begin(), tokens.begin() + 17)};
  const std::vector<std::vector<int>> positions = {pos, test::all_positions(17)};
  const auto batch = b.forward_batch(seqs, w, positions);
  CHECK(max_relative_diff(batch[0], whole) <= tolerance);
  CHECK(max_relative_diff(batch[1], b.forward(seqs[1], w, positions[1])) <= tolerance);
}

TEST_CASE("cpu MoE: the FLOP model counts the router and the active experts only") {
  const int n = 50;
  const auto w = AttentionWindows::full();
  auto flops = [&](int experts, int used) {
    const auto cfg = test::tiny_moe_config(2, experts, used, true, 3, {1});
    const auto m = test::tiny_model(cfg, test::seed(570));
    return cpu::Backend(m).flops(n, 1, w);
  };
  const auto cfg = test::tiny_moe_config(2, 4, 2, true, 3, {1});
  const double d = cfg.hidden_size, fe = cfg.moe.expert_intermediate_size, ff = cfg.intermediate_size;
  // Two sparse layers: doubling the experts adds only router columns ...
  CHECK(flops(8, 2) - flops(4, 2) == doctest::Approx(2 * n * 2.0 * d * 4));
  // ... one more active expert adds its three matrices per token and sparse layer.
  CHECK(flops(4, 3) - flops(4, 2) == doctest::Approx(2 * n * 2.0 * 3 * d * fe));
  // A sparse layer instead of a dense one swaps 3 d ff for the router and k experts.
  const auto dense_cfg = test::tiny_config(model::Arch::qwen3moe, 2);
  auto all_dense = dense_cfg;
  all_dense.num_layers = 3;
  const double dense = cpu::Backend(test::tiny_model(all_dense, test::seed(571))).flops(n, 1, w);
  CHECK(flops(4, 2) - dense == doctest::Approx(2 * n * 2.0 * (d * 4 + 2 * 3 * d * fe - 3 * d * ff)));
  CHECK(model::ffn_flops(cfg, 0) == doctest::Approx(2.0 * (d * 4 + 2 * 3 * d * fe)));
  CHECK(model::ffn_flops(cfg, 1) == doctest::Approx(2.0 * 3 * d * ff));
}
