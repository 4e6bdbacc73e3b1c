// The tiled fp32 forward pass against the naive float64 reference, across
// window patterns, GQA ratios, architecture variants and tile sizes; and the
// exact (bitwise) identities: layer-wise = whole forward, window >= n = full.
//
// Tolerance: max |logit - reference| <= 2e-5 * max(1, max |reference logit|).
// Why: the backend computes in fp32 (unit roundoff 6e-8) with dot products of
// length <= 48, two layers, a softmax and two RMSNorms; propagated rounding
// error stays around 1e-6 relative (measured max 1.0e-6 relative here), while any
// semantic slip (a wrong mask entry, RoPE pair, bias, norm or scale) moves
// logits by 1e-2 or more. The bound leaves a 10x margin over rounding and
// stays 500x below a real error.

#include "reference.hpp"
#include "test_support.hpp"
#include "tiny_model.hpp"

#include <bosch/cpu/backend.hpp>
#include <bosch/cpu/layer.hpp>

#include <boost/random/bernoulli_distribution.hpp>
#include <boost/random/mersenne_twister.hpp>

#include <cstring>

namespace {

using namespace bosch;
using bosch::test::compare;
using bosch::test::reference_logits;

constexpr double tolerance = 2e-5;

void check_against_reference(const model::Model& m, const AttentionWindows& w, int n, cpu::Options opt,
                             std::uint64_t seed) {
  const auto tokens = test::random_tokens(n, m.config.vocab_size, seed);
  const auto pos = test::all_positions(n);
  cpu::Backend b(m, opt);
  const auto got = b.forward(tokens, w, pos);
  REQUIRE(got.size() == static_cast<std::size_t>(n) * m.config.vocab_size);
  const auto want = reference_logits(m, tokens, w, pos);
  const auto d = compare(got, want);
  INFO("max abs diff " << d.max_abs << ", logit scale " << d.scale << ", tile " << opt.tile << ", swa_tile "
                       << opt.swa_tile << ", n " << n);
  CHECK(d.max_abs <= tolerance * std::max(1.0, d.scale));
  CHECK(d.scale > 0.5);  // the logits are not degenerate
}

HeadMask random_mask(HeadLayout layout, std::uint64_t seed) {
  boost::random::mt19937_64 rng(seed);
  boost::random::bernoulli_distribution<double> coin(0.5);
  HeadMask m(layout);
  for (std::size_t i = 0; i < m.size(); ++i) m.set_flat(i, coin(rng));
  return m;
}

}  // namespace

TEST_CASE("cpu forward: full attention matches the naive reference for several tile sizes") {
  const auto m = test::tiny_model(test::tiny_config(), test::seed(1));
  for (int tile : {1, 3, 5, 8, 16, 64})
    check_against_reference(m, AttentionWindows::full(), 37, {.threads = 0, .tile = tile}, test::seed(2));
}

TEST_CASE("cpu forward: all heads windowed, with and without sinks") {
  const auto m = test::tiny_model(test::tiny_config(), test::seed(3));
  const int n = 41;
  for (int w : {1, 2, 5, 13, 40, 41, 60})
    for (int s : {0, 1, 3})
      for (int tile : {4, 7, 64}) {
        const auto win = AttentionWindows::from_mask(HeadMask::filled(m.config.layout(), true), w, s);
        INFO("w " << w << " s " << s);
        check_against_reference(m, win, n, {.threads = 0, .tile = tile}, test::seed(4));
      }
}

TEST_CASE("cpu forward: explicit query tiles for window heads (swa_tile) do not change the result") {
  const auto m = test::tiny_model(test::tiny_config(), test::seed(5));
  const auto win = AttentionWindows::from_mask(HeadMask::filled(m.config.layout(), true), 9, 2);
  for (int st : {1, 3, 8, 32}) check_against_reference(m, win, 35, {.threads = 0, .tile = 6, .swa_tile = st}, test::seed(6));
}

TEST_CASE("cpu forward: mixed per-head masks and GQA ratios 1, 2, 4") {
  for (int kv : {4, 2, 1}) {
    auto cfg = test::tiny_config(model::Arch::llama, kv);
    cfg.num_layers = 3;
    const auto m = test::tiny_model(cfg, test::seed(10 + kv));
    for (int trial = 0; trial < 3; ++trial) {
      const auto mask = random_mask(cfg.layout(), test::seed(20 + trial));
      const auto win = AttentionWindows::from_mask(mask, 4 + 3 * trial, trial);
      INFO("kv heads " << kv << ", trial " << trial << ", swa heads " << mask.count());
      check_against_reference(m, win, 33, {.threads = 0, .tile = 5}, test::seed(30 + trial));
    }
  }
}

TEST_CASE("cpu forward: architecture variants match the reference") {
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
    const auto m = test::tiny_model(v.config, test::seed(40 + k));
    check_against_reference(m, AttentionWindows::full(), 29, {.threads = 0, .tile = 8}, test::seed(50 + k));
    const auto mask = random_mask(v.config.layout(), test::seed(60 + k));
    check_against_reference(m, AttentionWindows::from_mask(mask, 6, 1), 29, {.threads = 0, .tile = 8},
                            test::seed(70 + k));
    ++k;
  }
}

TEST_CASE("cpu forward: layer-wise entry points equal the whole forward bitwise") {
  auto cfg = test::tiny_config(model::Arch::qwen3);
  cfg.num_layers = 4;
  const auto m = test::tiny_model(cfg, test::seed(80));
  cpu::Backend b(m, {.threads = 0, .tile = 7});
  const int n = 45;
  const auto tokens = test::random_tokens(n, cfg.vocab_size, test::seed(81));
  const auto mask = random_mask(cfg.layout(), test::seed(82));
  const auto win = AttentionWindows::from_mask(mask, 5, 2);
  const std::vector<int> pos{0, 7, 44, 3};
  const auto whole = b.forward(tokens, win, pos);

  auto x = b.embed(tokens);
  b.run_layers(x, 0, 1, win);
  const auto saved = x;  // the stream entering layer 1
  b.run_layers(x, 1, 3, win);
  b.run_layers(x, 3, 3, win);  // empty range: no-op
  b.run_layers(x, 3, 4, win);
  const auto split = b.logits(x, pos);
  REQUIRE(split.size() == whole.size());
  CHECK(std::memcmp(split.data(), whole.data(), whole.size() * sizeof(float)) == 0);

  auto y = saved;
  b.run_layers(y, 1, 4, win);
  CHECK(std::memcmp(y.data.data(), x.data.data(), x.bytes()) == 0);
}

TEST_CASE("cpu forward: the rows past a shared prefix match the naive reference of the whole sequence") {
  // The evaluator's shared prefix (eval/transformer_evaluator.hpp): keys and
  // values of the first P rows from a forward over them alone, then only the
  // later rows, for windows of w >= P keys.
  for (auto arch : {model::Arch::llama, model::Arch::qwen2, model::Arch::qwen3}) {
    auto cfg = test::tiny_config(arch, 2);
    cfg.num_layers = 3;
    const auto m = test::tiny_model(cfg, test::seed(85));
    cpu::Backend b(m, {.threads = 0, .tile = 7});
    const int n = 60;
    const auto tokens = test::random_tokens(n, cfg.vocab_size, test::seed(86));
    const std::span<const int> all(tokens);
    for (int P : {0, 1, 9, 16}) {
      for (int sinks : {0, 2}) {
        const auto mask = random_mask(cfg.layout(), test::seed(87 + static_cast<std::uint64_t>(P)));
        const auto win = AttentionWindows::from_mask(mask, 16, sinks);
        const auto prefix = b.shared_prefix(all.first(static_cast<std::size_t>(P)));
        CHECK(prefix.rows == P);
        auto x = b.embed(all.subspan(static_cast<std::size_t>(P)));
        b.run_layers(x, 0, 1, win, prefix);
        b.run_layers(x, 1, cfg.num_layers, win, prefix);
        const std::vector<int> rows{0, n - P - 1, (n - P) / 2};  // positions P, n - 1 and between
        std::vector<int> pos;
        for (int r : rows) pos.push_back(r + P);
        const auto got = b.logits(x, rows);
        const auto d = compare(got, reference_logits(m, tokens, win, pos));
        INFO(model::to_string(arch) << ", prefix " << P << ", sinks " << sinks << ": max abs diff " << d.max_abs);
        CHECK(d.max_abs <= tolerance * std::max(1.0, d.scale));
        CHECK(d.scale > 0.5);
      }
    }
    // The last layer for the rows from F on only (the evaluator's answer
    // rows): their logits as the whole sequence's, in fp32 against the naive
    // reference, in bf16 against the bf16 forward over every row.
    cpu::Backend b16(m, {.threads = 0, .tile = 7, .precision = cpu::Precision::bf16});
    for (int F : {0, 1, 20, n - 11}) {  // up to the last row past P = 10
      const int P = 10;
      const auto mask = random_mask(cfg.layout(), test::seed(88 + static_cast<std::uint64_t>(F)));
      const auto win = AttentionWindows::from_mask(mask, 16, 1);
      std::vector<int> rows, pos;
      for (int r = F; r < n - P; r += 3) rows.push_back(r);
      rows.push_back(n - P - 1);
      for (int r : rows) pos.push_back(r + P);
      auto run = [&](const cpu::Backend& be, int outputs_from) {
        const auto prefix = be.shared_prefix(all.first(static_cast<std::size_t>(P)));
        auto x = be.embed(all.subspan(static_cast<std::size_t>(P)));
        be.run_layers(x, 0, cfg.num_layers - 1, win, prefix);
        be.run_layers(x, cfg.num_layers - 1, cfg.num_layers, win, prefix, outputs_from);
        return be.logits(x, rows);
      };
      const auto d = compare(run(b, F), reference_logits(m, tokens, win, pos));
      INFO(model::to_string(arch) << ", outputs from " << F << ": max abs diff " << d.max_abs);
      CHECK(d.max_abs <= tolerance * std::max(1.0, d.scale));
      CHECK(d.scale > 0.5);
      const auto got16 = run(b16, F), want16 = run(b16, 0);
      REQUIRE(got16.size() == want16.size());
      double diff16 = 0, scale16 = 0;
      for (std::size_t i = 0; i < got16.size(); ++i) {
        diff16 = std::max(diff16, std::abs(static_cast<double>(got16[i]) - want16[i]));
        scale16 = std::max(scale16, std::abs(static_cast<double>(want16[i])));
      }
      INFO("bf16: max abs diff " << diff16);
      CHECK(diff16 <= tolerance * std::max(1.0, scale16));
    }
    {
      const auto prefix = b.shared_prefix(all.first(10));
      auto x = b.embed(all.subspan(10));
      const auto win = AttentionWindows::from_mask(HeadMask(cfg.layout()), 16, 0);
      CHECK_THROWS_AS(b.run_layers(x, 0, 1, win, prefix, n - 9), invalid_argument);
      CHECK_THROWS_AS(b.run_layers(x, 0, 1, win, prefix, -1), invalid_argument);
    }
    // A window shorter than the prefix would change the prefix's own rows: refused.
    HeadMask one(cfg.layout());
    one.set(0, 0, true);
    const auto prefix = b.shared_prefix(all.first(16));
    auto x = b.embed(all.subspan(16));
    CHECK_THROWS_AS(b.run_layers(x, 0, 1, AttentionWindows::from_mask(one, 15), prefix), invalid_argument);
    cpu::SharedPrefix wrong = prefix;
    wrong.k.pop_back();
    CHECK_THROWS_AS(b.run_layers(x, 0, 1, AttentionWindows::from_mask(one, 16), wrong), invalid_argument);
  }
}

TEST_CASE("cpu forward: a window at least as long as the sequence is exactly full attention") {
  const auto m = test::tiny_model(test::tiny_config(), test::seed(90));
  cpu::Backend b(m, {.threads = 0, .tile = 6});
  const int n = 30;
  const auto tokens = test::random_tokens(n, m.config.vocab_size, test::seed(91));
  const auto pos = test::all_positions(n);
  const auto full = b.forward(tokens, AttentionWindows::full(), pos);
  for (int w : {n, n + 1, 1000})
    for (int s : {0, 4}) {
      const auto win = AttentionWindows::from_mask(HeadMask::filled(m.config.layout(), true), w, s);
      const auto got = b.forward(tokens, win, pos);
      INFO("w " << w << " s " << s);
      CHECK(std::memcmp(got.data(), full.data(), full.size() * sizeof(float)) == 0);
    }
  // And w = n - 1 is not: the first key drops out of the last row's window.
  const auto win = AttentionWindows::from_mask(HeadMask::filled(m.config.layout(), true), n - 1, 0);
  const auto got = b.forward(tokens, win, pos);
  CHECK(std::memcmp(got.data(), full.data(), full.size() * sizeof(float)) != 0);
}

TEST_CASE("cpu forward: results do not depend on the thread count beyond rounding") {
  const auto m = test::tiny_model(test::tiny_config(), test::seed(100));
  const auto tokens = test::random_tokens(40, m.config.vocab_size, test::seed(101));
  const auto pos = test::all_positions(40);
  const auto win = AttentionWindows::from_mask(random_mask(m.config.layout(), test::seed(102)), 7, 1);
  const auto one = cpu::Backend(m, {.threads = 1, .tile = 8}).forward(tokens, win, pos);
  const auto two = cpu::Backend(m, {.threads = 2, .tile = 8}).forward(tokens, win, pos);
  const auto again = cpu::Backend(m, {.threads = 2, .tile = 8}).forward(tokens, win, pos);
  CHECK(std::memcmp(two.data(), again.data(), two.size() * sizeof(float)) == 0);  // deterministic
  double diff = 0;
  for (std::size_t i = 0; i < one.size(); ++i) diff = std::max(diff, std::abs(double(one[i]) - two[i]));
  CHECK(diff <= 1e-5);
}

TEST_CASE("cpu forward_batch equals per-sequence forwards up to rounding") {
  auto cfg = test::tiny_config(model::Arch::qwen2);
  const auto m = test::tiny_model(cfg, test::seed(110));
  cpu::Backend b(m, {.threads = 0, .tile = 8});
  const auto win = AttentionWindows::from_mask(random_mask(cfg.layout(), test::seed(111)), 5, 1);
  std::vector<std::vector<int>> seqs{test::random_tokens(17, cfg.vocab_size, test::seed(112)),
                                     test::random_tokens(1, cfg.vocab_size, test::seed(113)),
                                     {},
                                     test::random_tokens(30, cfg.vocab_size, test::seed(114))};
  std::vector<std::vector<int>> pos{{0, 16, 5}, {0}, {}, test::all_positions(30)};
  const auto batch = b.forward_batch(seqs, win, pos);
  REQUIRE(batch.size() == seqs.size());
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const auto single = b.forward(seqs[i], win, pos[i]);
    REQUIRE(batch[i].size() == single.size());
    double diff = 0, scale = 0;
    for (std::size_t e = 0; e < single.size(); ++e) {
      diff = std::max(diff, std::abs(double(batch[i][e]) - single[e]));
      scale = std::max(scale, std::abs(double(single[e])));
    }
    INFO("sequence " << i << " diff " << diff);
    CHECK(diff <= 1e-5 * std::max(1.0, scale));
  }
}

TEST_CASE("cpu backend: bad inputs raise invalid_argument naming what is wrong") {
  auto cfg = test::tiny_config();
  auto m = test::tiny_model(cfg, test::seed(120));
  cpu::Backend b(m);
  const std::vector<int> bad_token{1, cfg.vocab_size};
  CHECK_THROWS_AS(b.embed(bad_token), invalid_argument);
  const std::vector<int> neg{-1};
  CHECK_THROWS_AS(b.embed(neg), invalid_argument);
  const std::vector<int> tokens{1, 2, 3};
  const std::vector<int> out_of_range{3};
  CHECK_THROWS_AS(b.forward(tokens, AttentionWindows::full(), out_of_range), invalid_argument);
  // A mask of another layout.
  HeadMask other(HeadLayout{3, 4, 2});
  other.set(0, 0, true);
  CHECK_THROWS_AS(b.forward(tokens, AttentionWindows::from_mask(other, 4), out_of_range), invalid_argument);
  // SWA bits with no window (built by hand, bypassing from_mask's check).
  AttentionWindows no_window{HeadMask::filled(cfg.layout(), true), 0, 0};
  const std::vector<int> p0{0};
  CHECK_THROWS_AS(b.forward(tokens, no_window, p0), invalid_argument);
  auto x = b.embed(tokens);
  CHECK_THROWS_AS(b.run_layers(x, 1, 5, AttentionWindows::full()), invalid_argument);
  CHECK_THROWS_AS(b.run_layers(x, 2, 1, AttentionWindows::full()), invalid_argument);
  x.data.pop_back();
  CHECK_THROWS_AS(b.run_layers(x, 0, 1, AttentionWindows::full()), invalid_argument);

  // A weight of the wrong shape is caught when the backend is built, naming the tensor.
  auto broken = m;
  broken.weights.layers[1].wk.rows -= 1;
  try {
    cpu::Backend bb(broken);
    FAIL("expected invalid_argument");
  } catch (const invalid_argument& e) {
    CHECK(std::string(e.what()).find("blk.1.attn_k") != std::string::npos);
  }
  auto missing_bias = test::tiny_model(test::tiny_config(model::Arch::qwen2), test::seed(121));
  missing_bias.weights.layers[0].bv.clear();
  CHECK_THROWS_AS(cpu::Backend{missing_bias}, invalid_argument);
  cpu::Options bad_tile;
  bad_tile.tile = 0;
  CHECK_THROWS_AS(cpu::Backend(m, bad_tile), invalid_argument);
}

TEST_CASE("cpu backend: an empty sequence gives an empty result") {
  const auto m = test::tiny_model(test::tiny_config(), test::seed(130));
  cpu::Backend b(m);
  const std::vector<int> none;
  CHECK(b.forward(none, AttentionWindows::full(), none).empty());
}

TEST_CASE("cpu forward: a sequence longer than one feed-forward block matches the naive reference") {
  // The dense feed-forward runs in blocks of cpu::ffn_block_rows rows
  // (cpu/layer.hpp): rows on both sides of the block boundary, in fp32 and
  // with a mixed mask, against the reference of the whole sequence.
  const auto m = test::tiny_model(test::tiny_config(), test::seed(95));
  const int n = static_cast<int>(cpu::ffn_block_rows) + 37;
  const auto tokens = test::random_tokens(n, m.config.vocab_size, test::seed(96));
  const std::vector<int> pos{0, 1, n / 2, static_cast<int>(cpu::ffn_block_rows) - 1,
                             static_cast<int>(cpu::ffn_block_rows), n - 1};
  const cpu::Backend b(m);
  for (const auto& w : {AttentionWindows::full(),
                        AttentionWindows::from_mask(random_mask(m.config.layout(), test::seed(97)), 300, 2)}) {
    const auto d = compare(b.forward(tokens, w, pos), reference_logits(m, tokens, w, pos));
    INFO("max abs diff " << d.max_abs << ", logit scale " << d.scale);
    CHECK(d.max_abs <= tolerance * std::max(1.0, d.scale));
  }
}
