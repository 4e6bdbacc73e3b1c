// run_probed_layer against the CPU backend: without a blend it is the
// backend's layer bit for bit, with gate 0 it is the layer with that KV head
// SWA, the visitor sees the real post-RoPE queries and keys, and FISHER with a
// gate step of 1 is exactly the summed squared single-head ablation.
#include <bosch/cpu/backend.hpp>
#include <bosch/eval/head_scores.hpp>
#include <bosch/tasks/scoring.hpp>

#include <doctest/doctest.h>

#include "cpu/tiny_model.hpp"
#include "test_support.hpp"

#include <cmath>
#include <vector>

using namespace bosch;
using namespace bosch::eval;

namespace {

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST_CASE("probed layer equals the backend's layer: no blend / gate 1 (full) and gate 0 (that head SWA)") {
  // Qwen3-MoE (layers 0 and 2 sparse): the probes run the experts too.
  for (const auto& cfg : {test::tiny_config(model::Arch::llama, 2), test::tiny_config(model::Arch::qwen2, 2),
                          test::tiny_config(model::Arch::qwen3, 2), test::tiny_moe_config()}) {
    CAPTURE(model::to_string(cfg.arch));
    const auto m = test::tiny_model(cfg, test::seed(21));
    const cpu::Backend backend(m);
    const auto tokens = test::random_tokens(70, m.config.vocab_size, test::seed(22));
    const auto x0 = backend.embed(tokens);
    for (int l = 0; l < m.config.num_layers; ++l) {
      auto ref = x0;
      backend.run_layers(ref, 0, l, AttentionWindows::full());
      const auto entering = ref;
      backend.run_layers(ref, l, l + 1, AttentionWindows::full());
      // Same kernels in the same order: bit for bit (documented in head_scores.hpp).
      auto a = entering;
      run_probed_layer(backend, a, l, LayerProbe{});
      CHECK(max_abs_diff(a.data, ref.data) == 0.0f);
      for (int g = 0; g < m.config.num_kv_heads; ++g) {
        LayerProbe p;
        p.blend_kv = g;
        p.window = 9;
        p.sinks = 2;
        p.gate = 1.0f;
        auto b = entering;
        run_probed_layer(backend, b, l, p);
        CHECK(max_abs_diff(b.data, ref.data) == 0.0f);
        HeadMask mask(m.config.layout());
        mask.set(l, g, true);
        auto swa = entering;
        backend.run_layers(swa, l, l + 1, AttentionWindows::from_mask(mask, 9, 2));
        p.gate = 0.0f;
        auto c = entering;
        run_probed_layer(backend, c, l, p);
        CHECK(max_abs_diff(c.data, swa.data) == 0.0f);
        CHECK(max_abs_diff(swa.data, ref.data) > 0.0f);  // the window matters at 70 tokens
        // A gate in between lands between the two (the layer is not linear in the gate,
        // but at 0.5 the output differs from both ends).
        p.gate = 0.5f;
        auto h = entering;
        run_probed_layer(backend, h, l, p);
        CHECK(max_abs_diff(h.data, ref.data) > 0.0f);
        CHECK(max_abs_diff(h.data, swa.data) > 0.0f);
      }
    }
  }
}

TEST_CASE("the probe's visitor sees the queries and keys the backend's statistics are computed from") {
  const auto m = test::tiny_model(test::tiny_config(model::Arch::qwen3, 2), test::seed(23));
  const cpu::Backend backend(m);
  const auto tokens = test::random_tokens(50, m.config.vocab_size, test::seed(24));
  const int w = 7;
  cpu::HeadStats stats;
  cpu::StatsRequest req;
  req.window = w;
  req.query_begin = w;
  auto x = backend.embed(tokens);
  backend.run_layers(x, 0, m.config.num_layers, AttentionWindows::full(), &stats, &req);
  // Recompute the beyond-window mass from the visitor's Q and K.
  std::vector<double> mass(stats.beyond_window_mass.size(), 0.0);
  auto y = backend.embed(tokens);
  for (int l = 0; l < m.config.num_layers; ++l) {
    LayerProbe p;
    p.visitor = [&](const ProbeView& v) {
      const int d = v.shape.head_dim, G = v.shape.num_heads / v.shape.num_kv_heads;
      for (int h = 0; h < v.shape.num_heads; ++h)
        for (int i = w; i < v.n; ++i) {
          std::vector<double> z(static_cast<std::size_t>(i) + 1);
          double mx = -1e300, tot = 0, far = 0;
          for (int j = 0; j <= i; ++j) {
            double dot = 0;
            for (int a = 0; a < d; ++a)
              dot += static_cast<double>(v.q[static_cast<std::size_t>(i) * v.shape.q_stride + static_cast<std::size_t>(h * d + a)]) *
                     v.k[static_cast<std::size_t>(j) * v.shape.kv_stride + static_cast<std::size_t>((h / G) * d + a)];
            z[static_cast<std::size_t>(j)] = dot / std::sqrt(static_cast<double>(d));
            mx = std::max(mx, z[static_cast<std::size_t>(j)]);
          }
          for (int j = 0; j <= i; ++j) {
            const double e = std::exp(z[static_cast<std::size_t>(j)] - mx);
            tot += e;
            if (j <= i - w) far += e;
          }
          mass[stats.at(v.layer, h)] += far / tot;
        }
    };
    run_probed_layer(backend, y, l, p);
  }
  // fp32 scores in the backend vs double here: agreement to 1e-4 of the summed mass.
  for (std::size_t i = 0; i < mass.size(); ++i)
    CHECK(mass[i] == doctest::Approx(stats.beyond_window_mass[i]).epsilon(1e-4));
}

TEST_CASE("FISHER with gate step 1 is the summed squared loss change of single-head SWA") {
  const auto m = test::tiny_model(test::tiny_config(model::Arch::llama, 2), test::seed(25));
  const cpu::Backend backend(m);
  tasks::TaskSet set;
  for (int s = 0; s < 2; ++s) {
    tasks::Sample smp;
    smp.prompt = test::random_tokens(60, m.config.vocab_size, test::seed(26 + s));
    smp.answer = test::random_tokens(3, m.config.vocab_size, test::seed(30 + s));
    set.samples.push_back(smp);
  }
  HeadScoreOptions o;
  o.window = 8;
  o.sinks = 1;
  o.fisher_epsilon = 1.0;
  const auto f = fisher_scores(backend, set, o);
  const auto lay = m.config.layout();
  REQUIRE(f.scores.size() == lay.size());
  for (int l = 0; l < lay.num_layers; ++l)
    for (int g = 0; g < lay.num_kv_heads; ++g) {
      HeadMask mask(lay);
      mask.set(l, g, true);
      double expect = 0;
      for (const auto& smp : set.samples) {
        const auto tf = tasks::teacher_forcing(smp);
        const auto full = tasks::answer_logprob(backend.forward(tf.tokens, AttentionWindows::full(), tf.positions),
                                                m.config.vocab_size, smp.answer);
        const auto swa = tasks::answer_logprob(
            backend.forward(tf.tokens, AttentionWindows::from_mask(mask, 8, 1), tf.positions), m.config.vocab_size,
            smp.answer);
        expect += std::pow(full.mean_logprob - swa.mean_logprob, 2);
      }
      // Same operations as the backend's forward: equal to double rounding of the sums.
      CHECK(f.scores[mask.index(l, g)] == doctest::Approx(expect).epsilon(1e-9).scale(1e-12));
      CHECK(f.scores[mask.index(l, g)] > 0.0);
    }
  // Forward equivalents: 1 base + sum over layers of Hkv (L - l) / L, per sample.
  CHECK(f.forwards == doctest::Approx(2 * (1 + 2 * (1.0 + 0.5))));
}
