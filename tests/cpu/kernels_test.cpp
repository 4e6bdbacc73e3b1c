// Pieces of the CPU forward pass: RoPE frequencies and layouts, the tiled
// attention kernel against a direct double-precision softmax, and the work it
// does (key tiles outside a window are never visited).

#include "test_support.hpp"
#include "tiny_model.hpp"

#include <bosch/cpu/attention.hpp>
#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/rope.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <cmath>

namespace {
using namespace bosch;

std::vector<float> random_floats(std::size_t n, std::uint64_t seed, double a = 1.0) {
  boost::random::mt19937_64 rng(seed);
  boost::random::uniform_real_distribution<double> u(-a, a);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(u(rng));
  return v;
}
}  // namespace

TEST_CASE("rope_inv_freq: plain, linear and llama3 scaling") {
  auto c = test::tiny_config();
  c.head_dim = 8;
  c.rope_theta = 10000.0;
  auto f = cpu::rope_inv_freq(c);
  REQUIRE(f.size() == 4);
  // theta^(-2i/d): 1, 0.1, 0.01, 0.001 (to double rounding).
  CHECK(f[0] == 1.0);
  CHECK(std::abs(f[1] - 0.1) < 1e-15);
  CHECK(std::abs(f[3] - 0.001) < 1e-17);

  c.rope_scaling.type = "linear";
  c.rope_scaling.factor = 4.0;
  auto g = cpu::rope_inv_freq(c);
  for (int i = 0; i < 4; ++i) CHECK(g[i] == doctest::Approx(f[i] / 4.0).epsilon(1e-15));

  // llama3 with original context 64, factors 1 and 4, scale 8: wavelengths
  // 6.28 (< 16: kept), 62.8 (between 16 and 64: smoothed), 628 and 6283
  // (> 64: divided by 8). Expected values computed by hand from the HF formula.
  c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 64};
  auto h = cpu::rope_inv_freq(c);
  CHECK(h[0] == 1.0);
  CHECK(h[1] == doctest::Approx(0.0130422560438).epsilon(1e-11));
  CHECK(h[2] == doctest::Approx(0.00125).epsilon(1e-12));
  CHECK(h[3] == doctest::Approx(0.000125).epsilon(1e-12));

  c.rope_scaling.type = "yarn";
  CHECK_THROWS_AS(cpu::rope_inv_freq(c), invalid_argument);
  c.rope_scaling.type = "none";
  c.head_dim = 7;
  CHECK_THROWS_AS(cpu::rope_inv_freq(c), invalid_argument);
}

TEST_CASE("RopeTable: neox on halves equals interleaved on the permuted vector; norms kept") {
  auto c = test::tiny_config();
  c.head_dim = 8;
  const int n = 9, heads = 2, hd = 8;
  const auto x = random_floats(static_cast<std::size_t>(n) * heads * hd, test::seed(1));
  auto neox = x, inter = x;
  // inter[2i] = x[i], inter[2i+1] = x[i + 4] within each head.
  for (int r = 0; r < n * heads; ++r)
    for (int i = 0; i < hd / 2; ++i) {
      inter[r * hd + 2 * i] = x[r * hd + i];
      inter[r * hd + 2 * i + 1] = x[r * hd + i + hd / 2];
    }
  c.rope_style = model::RopeStyle::neox;
  cpu::RopeTable(c, n).apply(neox.data(), n, heads * hd, heads, 0);
  c.rope_style = model::RopeStyle::interleaved;
  cpu::RopeTable(c, n).apply(inter.data(), n, heads * hd, heads, 0);
  for (int r = 0; r < n * heads; ++r) {
    double n0 = 0, n1 = 0;
    for (int i = 0; i < hd / 2; ++i) {
      CHECK(inter[r * hd + 2 * i] == neox[r * hd + i]);
      CHECK(inter[r * hd + 2 * i + 1] == neox[r * hd + i + hd / 2]);
    }
    for (int e = 0; e < hd; ++e) {
      n0 += double(x[r * hd + e]) * x[r * hd + e];
      n1 += double(neox[r * hd + e]) * neox[r * hd + e];
    }
    CHECK(n1 == doctest::Approx(n0).epsilon(1e-5));
  }
  // Position 0 is the identity; positions beyond the table are refused.
  auto y = x;
  cpu::RopeTable t(c, n);
  t.apply(y.data(), 1, heads * hd, heads, 0);
  for (int e = 0; e < heads * hd; ++e) CHECK(y[e] == x[e]);
  CHECK_THROWS_AS(t.apply(y.data(), 2, heads * hd, heads, n - 1), invalid_argument);
}

namespace {
/// Direct attention in double: out[i, h] = sum_j softmax_j(q.k / sqrt(d)) v_j over visible j.
std::vector<double> direct_attention(const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, int n, int H, int Hkv, int hd,
                                     const std::vector<cpu::HeadWindow>& win) {
  std::vector<double> out(static_cast<std::size_t>(n) * H * hd, 0.0);
  for (int h = 0; h < H; ++h) {
    const int g = h / (H / Hkv);
    for (int i = 0; i < n; ++i) {
      std::vector<double> s(static_cast<std::size_t>(i + 1), -1e300);
      double mx = -1e300;
      for (int j = 0; j <= i; ++j) {
        const auto& w = win[static_cast<std::size_t>(g)];
        if (!w.full() && !(j > i - w.window || j < w.sinks)) continue;
        double dot = 0;
        for (int e = 0; e < hd; ++e) dot += double(q[(i * H + h) * hd + e]) * k[(j * Hkv + g) * hd + e];
        s[j] = dot / std::sqrt(double(hd));
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (auto& x : s) sum += x > -1e299 ? (x = std::exp(x - mx)) : (x = 0);
      for (int j = 0; j <= i; ++j)
        for (int e = 0; e < hd; ++e) out[(i * H + h) * hd + e] += s[j] / sum * v[(j * Hkv + g) * hd + e];
    }
  }
  return out;
}
}  // namespace

TEST_CASE("attention kernel: batches of sequences, mixed windows, odd tiles, against a direct softmax") {
  // Two sequences back to back (lengths 150 and 77), 6 query heads on 3 KV heads.
  const int H = 6, Hkv = 3, hd = 16;
  const std::vector<int> offsets{0, 150, 227};
  const int N = offsets.back();
  const auto q = random_floats(static_cast<std::size_t>(N) * H * hd, test::seed(10), 1.5);
  const auto k = random_floats(static_cast<std::size_t>(N) * Hkv * hd, test::seed(11), 1.5);
  const auto v = random_floats(static_cast<std::size_t>(N) * Hkv * hd, test::seed(12));
  const std::vector<cpu::HeadWindow> win{{0, 0}, {7, 0}, {20, 3}};
  cpu::AttentionShape shape{H, Hkv, hd, static_cast<std::size_t>(H * hd), static_cast<std::size_t>(Hkv * hd),
                            static_cast<std::size_t>(H * hd)};
  for (int tile : {13, 64}) {
    std::vector<float> out(q.size(), std::nanf(""));
    cpu::attention(q.data(), k.data(), v.data(), out.data(), offsets, shape, win, {tile, 0});
    double err = 0;
    for (std::size_t b = 0; b + 1 < offsets.size(); ++b) {
      const int n = offsets[b + 1] - offsets[b];
      auto slice = [&](const std::vector<float>& a, int width) {
        return std::vector<float>(a.begin() + offsets[b] * width, a.begin() + offsets[b + 1] * width);
      };
      const auto want = direct_attention(slice(q, H * hd), slice(k, Hkv * hd), slice(v, Hkv * hd), n, H, Hkv, hd, win);
      for (std::size_t e = 0; e < want.size(); ++e)
        err = std::max(err, std::abs(want[e] - out[static_cast<std::size_t>(offsets[b]) * H * hd + e]));
    }
    INFO("tile " << tile << " max abs error " << err);
    // fp32 softmax over <= 150 keys of unit-scale values: rounding ~1e-6.
    CHECK(err <= 1e-5);
  }
}

TEST_CASE("attention kernel: SWA heads only visit the keys of their band (O(n w) work)") {
  const int H = 4, Hkv = 2, hd = 8, n = 1024;
  const auto q = random_floats(static_cast<std::size_t>(n) * H * hd, test::seed(20));
  const auto k = random_floats(static_cast<std::size_t>(n) * Hkv * hd, test::seed(21));
  const auto v = random_floats(static_cast<std::size_t>(n) * Hkv * hd, test::seed(22));
  std::vector<float> out(q.size());
  cpu::AttentionShape shape{H, Hkv, hd, static_cast<std::size_t>(H * hd), static_cast<std::size_t>(Hkv * hd),
                            static_cast<std::size_t>(H * hd)};
  const std::vector<int> offsets{0, n};
  const cpu::AttentionTiles tiles{64, 0};
  const std::vector<cpu::HeadWindow> full(2), swa(2, cpu::HeadWindow{64, 0}), sinks(2, cpu::HeadWindow{64, 4});
  const auto wf = cpu::attention(q.data(), k.data(), v.data(), out.data(), offsets, shape, full, tiles);
  const auto ws = cpu::attention(q.data(), k.data(), v.data(), out.data(), offsets, shape, swa, tiles);
  const auto wk = cpu::attention(q.data(), k.data(), v.data(), out.data(), offsets, shape, sinks, tiles);
  const double exact_full = double(H) * n * (n + 1) / 2;
  CHECK(double(wf.scores) >= exact_full);
  CHECK(double(wf.scores) <= double(H) * n * (n + 64) / 2);  // only the diagonal tiles are partly masked
  const int t = cpu::query_tile(tiles, swa[0]);
  CHECK(t == 16);
  // Each query tile of t rows walks exactly its rows' band: t + w - 1 keys (fewer at the start).
  CHECK(double(ws.scores) <= double(H) * n * (64 + t - 1));
  CHECK(double(ws.scores) >= double(H) * n * 64 * 0.9);
  // Sinks add at most s keys per row.
  CHECK(wk.scores <= ws.scores + static_cast<std::size_t>(H) * n * 4);
  CHECK(wk.scores > ws.scores);
  CHECK(double(ws.scores) < exact_full / 6);
}

TEST_CASE("attention kernel: rejects inconsistent shapes") {
  std::vector<float> buf(64);
  cpu::AttentionShape bad{3, 2, 8, 24, 16, 24};  // 2 does not divide 3
  const std::vector<int> offsets{0, 1};
  const std::vector<cpu::HeadWindow> win(2);
  CHECK_THROWS_AS(cpu::attention(buf.data(), buf.data(), buf.data(), buf.data(), offsets, bad, win, {}), invalid_argument);
  cpu::AttentionShape ok{2, 2, 8, 16, 16, 16};
  const std::vector<cpu::HeadWindow> one(1);
  CHECK_THROWS_AS(cpu::attention(buf.data(), buf.data(), buf.data(), buf.data(), offsets, ok, one, {}), invalid_argument);
  const std::vector<int> decreasing{0, 2, 1};
  CHECK_THROWS_AS(cpu::attention(buf.data(), buf.data(), buf.data(), buf.data(), decreasing, ok, win, {}), invalid_argument);
}

TEST_CASE("attention_rows: the query rows past a prefix against a direct softmax, any first row") {
  // One sequence of 150 keys; the queries from row qb on, in tiles that start at qb.
  const int H = 6, Hkv = 3, hd = 16, n = 150;
  const auto q = random_floats(static_cast<std::size_t>(n) * H * hd, test::seed(13), 1.5);
  const auto k = random_floats(static_cast<std::size_t>(n) * Hkv * hd, test::seed(14), 1.5);
  const auto v = random_floats(static_cast<std::size_t>(n) * Hkv * hd, test::seed(15));
  const std::vector<cpu::HeadWindow> win{{0, 0}, {7, 0}, {20, 3}};
  cpu::AttentionShape shape{H, Hkv, hd, static_cast<std::size_t>(H * hd), static_cast<std::size_t>(Hkv * hd),
                            static_cast<std::size_t>(H * hd)};
  const auto want = direct_attention(q, k, v, n, H, Hkv, hd, win);
  const std::size_t row = static_cast<std::size_t>(H) * hd;
  for (int tile : {13, 64})
    for (int qb : {0, 1, 20, 64, 149, 150}) {
      const std::vector<float> qs(q.begin() + static_cast<std::ptrdiff_t>(qb * row), q.end());
      std::vector<float> out(qs.size(), std::nanf(""));
      cpu::attention_rows(qs.data(), k.data(), v.data(), out.data(), n, qb, shape, win, {tile, 0});
      double err = 0;
      for (std::size_t e = 0; e < out.size(); ++e)
        err = std::max(err, std::abs(want[static_cast<std::size_t>(qb) * row + e] - out[e]));
      INFO("tile " << tile << ", first query row " << qb << ", max abs error " << err);
      CHECK(err <= 1e-5);
    }
  std::vector<float> buf(static_cast<std::size_t>(n) * row);
  CHECK_THROWS_AS(cpu::attention_rows(buf.data(), buf.data(), buf.data(), buf.data(), n, n + 1, shape, win, {}),
                  invalid_argument);
  CHECK_THROWS_AS(cpu::attention_rows(buf.data(), buf.data(), buf.data(), buf.data(), n, -1, shape, win, {}),
                  invalid_argument);
}
