// Attention statistics (HeadStats): against the naive float64 reference's
// probabilities, and on hand-made heads whose answer is known in closed form.

#include "reference.hpp"
#include "test_support.hpp"
#include "tiny_model.hpp"

#include <bosch/cpu/backend.hpp>

#include <cmath>
#include <cstring>

namespace {
using namespace bosch;

/// Statistics are sums over rows of probability-weighted quantities; the fp32
/// probabilities carry ~1e-6 relative error, so sums over <= 40 rows agree
/// with the float64 reference to well within 1e-4 relative (+1e-6 absolute).
void check_close(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(what << " [" << i << "]: " << got[i] << " vs " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= 1e-4 * std::abs(want[i]) + 1e-6);
  }
}
}  // namespace

TEST_CASE("head stats match the naive reference probabilities (mixed windows, sinks, period)") {
  auto cfg = test::tiny_config(model::Arch::qwen3, 2);
  cfg.num_layers = 3;
  const auto m = test::tiny_model(cfg, test::seed(1));
  HeadMask mask(cfg.layout());
  mask.set(0, 1, true);
  mask.set(2, 0, true);
  const auto win = AttentionWindows::from_mask(mask, 6, 2);
  // A sequence of period 9 repeated (plus a leading token), like RazorAttention's probe.
  auto base = test::random_tokens(9, cfg.vocab_size, test::seed(2));
  std::vector<int> tokens{3};
  for (int r = 0; r < 4; ++r) tokens.insert(tokens.end(), base.begin(), base.end());
  const int n = static_cast<int>(tokens.size());

  for (int variant = 0; variant < 2; ++variant) {
    cpu::StatsRequest req;
    req.window = 4;
    req.sinks = 1;
    req.period = 9;
    if (variant == 0)
      req.query_begin = 10;
    else
      req.rows = {36, 2, 20, 21, 0};
    cpu::Backend b(m, {.threads = 0, .tile = 5});
    auto x = b.embed(tokens);
    cpu::HeadStats got;
    b.run_layers(x, 0, cfg.num_layers, win, &got, &req);
    cpu::HeadStats want;
    auto sorted = req;
    const std::vector<int> none;
    test::reference_logits(m, tokens, win, none, &want, &sorted);
    INFO("variant " << variant);
    CHECK(got.num_layers == cfg.num_layers);
    CHECK(got.num_heads == cfg.num_heads);
    CHECK(got.rows == want.rows);
    CHECK(got.rows == (variant == 0 ? n - 10 : 5));
    check_close(got.beyond_window_mass, want.beyond_window_mass, "beyond_window_mass");
    check_close(got.mean_distance, want.mean_distance, "mean_distance");
    check_close(got.entropy, want.entropy, "entropy");
    check_close(got.sink_mass, want.sink_mass, "sink_mass");
    check_close(got.echo, want.echo, "echo");
    check_close(got.induction, want.induction, "induction");
    // Statistics do not change the forward result.
    auto y = b.embed(tokens);
    b.run_layers(y, 0, cfg.num_layers, win);
    CHECK(std::memcmp(x.data.data(), y.data.data(), x.bytes()) == 0);
  }
}

TEST_CASE("head stats: a head with zero queries attends uniformly; closed-form answers") {
  auto cfg = test::tiny_config(model::Arch::llama, 2);
  auto m = test::tiny_model(cfg, test::seed(3));
  // Query head 0 of layer 0 (KV head 0): zero query => every visible key scores 0 => uniform.
  auto& wq = m.weights.layers[0].wq;
  for (int r = 0; r < cfg.head_dim; ++r)
    for (int c = 0; c < wq.cols; ++c) wq.row(r)[c] = 0.0f;
  const int n = 40, w = 6, P = 7;
  const auto tokens = test::random_tokens(n, cfg.vocab_size, test::seed(4));
  cpu::Backend b(m, {.threads = 0, .tile = 8});
  cpu::StatsRequest req;
  req.window = w;
  req.period = P;

  SUBCASE("full attention: a_ij = 1 / (i + 1)") {
    auto x = b.embed(tokens);
    cpu::HeadStats st;
    b.run_layers(x, 0, 1, AttentionWindows::full(), &st, &req);
    double entropy = 0, distance = 0, beyond = 0, echo = 0;
    for (int i = 0; i < n; ++i) {
      entropy += std::log(i + 1.0);
      distance += i / 2.0;
      beyond += std::max(0, i - w + 1) / (i + 1.0);
      echo += (i / P) / (i + 1.0);
    }
    const auto at = st.at(0, 0);
    CHECK(st.rows == n);
    CHECK(st.entropy[at] == doctest::Approx(entropy).epsilon(1e-5));
    CHECK(st.mean_distance[at] == doctest::Approx(distance).epsilon(1e-5));
    CHECK(st.beyond_window_mass[at] == doctest::Approx(beyond).epsilon(1e-5));
    CHECK(st.echo[at] == doctest::Approx(echo).epsilon(1e-5));
    CHECK(st.induction[at] == doctest::Approx(echo).epsilon(1e-5));
    CHECK(st.sink_mass[at] == 0.0);
    // Layer 1 was not run: nothing accumulated there.
    CHECK(st.entropy[st.at(1, 0)] == 0.0);
  }

  SUBCASE("windowed head: beyond-window mass exactly 0, uniform over the w keys and the sinks") {
    const int s = 2;
    HeadMask mask(cfg.layout());
    mask.set(0, 0, true);  // KV head 0 of layer 0 (query heads 0 and 1)
    const auto win = AttentionWindows::from_mask(mask, w, s);
    req.sinks = s;
    auto x = b.embed(tokens);
    cpu::HeadStats st;
    b.run_layers(x, 0, 2, win, &st, &req);
    double entropy = 0, sink = 0, distance = 0;
    for (int i = 0; i < n; ++i) {
      const int lo = std::max(0, i - w + 1);
      const int sinks_seen = std::min(s, lo);  // sinks outside the window
      const double count = (i + 1 - lo) + sinks_seen;
      entropy += std::log(count);
      double sk = 0;
      for (int j = 0; j <= i; ++j) {
        const bool vis = j >= lo || j < s;
        if (!vis) continue;
        if (j < s) sk += 1 / count;
        else distance += (i - j) / count;
      }
      sink += sk;
    }
    const auto at = st.at(0, 0);
    CHECK(st.beyond_window_mass[at] == 0.0);
    CHECK(st.beyond_window_mass[st.at(0, 1)] == 0.0);  // the other query head of the group
    CHECK(st.entropy[at] == doctest::Approx(entropy).epsilon(1e-5));
    CHECK(st.sink_mass[at] == doctest::Approx(sink).epsilon(1e-5));
    CHECK(st.mean_distance[at] == doctest::Approx(distance).epsilon(1e-5));
    // A full head of the same layer does look beyond the window.
    CHECK(st.beyond_window_mass[st.at(0, 2)] > 0.01);
  }
}

TEST_CASE("head stats: rows accumulate per call; a mis-sized HeadStats is refused") {
  auto cfg = test::tiny_config();
  const auto m = test::tiny_model(cfg, test::seed(5));
  cpu::Backend b(m);
  const auto tokens = test::random_tokens(12, cfg.vocab_size, test::seed(6));
  cpu::HeadStats st;
  cpu::StatsRequest req;
  req.query_begin = 4;
  auto x = b.embed(tokens);
  b.run_layers(x, 0, 2, AttentionWindows::full(), &st, &req);
  const double e1 = st.entropy[st.at(1, 3)];
  auto y = b.embed(tokens);
  b.run_layers(y, 0, 2, AttentionWindows::full(), &st, &req);
  CHECK(st.rows == 16);
  CHECK(st.entropy[st.at(1, 3)] == doctest::Approx(2 * e1));
  cpu::HeadStats wrong;
  wrong.num_layers = 5;
  wrong.num_heads = 4;
  auto z = b.embed(tokens);
  CHECK_THROWS_AS(b.run_layers(z, 0, 2, AttentionWindows::full(), &wrong, &req), invalid_argument);
  req.rows = {12};
  cpu::HeadStats fresh;
  CHECK_THROWS_AS(b.run_layers(z, 0, 2, AttentionWindows::full(), &fresh, &req), invalid_argument);
}
