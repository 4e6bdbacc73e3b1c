// SPDX-License-Identifier: Apache-2.0
// The tiled attention with bf16 products (cpu/attention.hpp, a bf16 kernel)
// against a direct softmax in double on the same bf16-rounded queries, keys
// and values: the only further rounding is the probabilities' (relative
// 2^-9 each, so at most 2^-9 max|v| on an output) and fp32 sums. Lengths,
// first rows, windows and head sizes cross every 16-key panel, 48-key group
// and 256-key chunk boundary; the AVX512_BF16 kernel gives the emulation's
// bits.

#include "bf16_kernels.hpp"
#include "test_support.hpp"

#include <bosch/cpu/attention.hpp>
#include <bosch/cpu/bf16.hpp>
#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/precision.hpp>
#include <bosch/error.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {
using namespace bosch;

std::vector<float> random_floats(std::size_t n, std::uint64_t seed, double a) {
  boost::random::mt19937_64 rng(seed);
  boost::random::uniform_real_distribution<double> u(-a, a);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(u(rng));
  return v;
}

float bf(float x) { return cpu::from_bf16(cpu::to_bf16(x)); }

struct Case {
  int H, Hkv, hd;
  std::vector<int> offsets;
  std::vector<cpu::HeadWindow> win;
  std::vector<float> q, k, v;
  cpu::AttentionShape shape() const {
    return {H, Hkv, hd, static_cast<std::size_t>(H * hd), static_cast<std::size_t>(Hkv * hd),
            static_cast<std::size_t>(H * hd)};
  }
};

Case make_case(int H, int Hkv, int hd, std::vector<int> offsets, std::vector<cpu::HeadWindow> win, std::uint64_t s) {
  const auto N = static_cast<std::size_t>(offsets.back());
  Case c{H, Hkv, hd, std::move(offsets), std::move(win), {}, {}, {}};
  // Scores of a few units (peaked softmax rows as well as flat ones).
  c.q = random_floats(N * H * hd, test::seed(s), 2.0);
  c.k = random_floats(N * Hkv * hd, test::seed(s + 1), 2.0);
  c.v = random_floats(N * Hkv * hd, test::seed(s + 2), 1.0);
  return c;
}

/// Direct attention in double of sequence b's query rows [qb, n) on the
/// kernel's bf16 inputs: bf16(q * fp32(1/sqrt(hd))), bf16(k), bf16(v).
std::vector<double> direct_bf16(const Case& c, std::size_t b, int qb) {
  const int base = c.offsets[b], n = c.offsets[b + 1] - base, H = c.H, Hkv = c.Hkv, hd = c.hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<double> out(static_cast<std::size_t>(n - qb) * H * hd, 0.0);
  for (int h = 0; h < H; ++h) {
    const int g = h / (H / Hkv);
    const auto& w = c.win[static_cast<std::size_t>(g)];
    for (int i = qb; i < n; ++i) {
      std::vector<double> s(static_cast<std::size_t>(i + 1), 0.0);
      std::vector<bool> seen(s.size(), false);
      double mx = -1e300;
      for (int j = 0; j <= i; ++j) {
        if (!w.full() && !(j > i - w.window || j < w.sinks)) continue;
        double dot = 0;
        for (int e = 0; e < hd; ++e)
          dot += double(bf(c.q[((base + i) * H + h) * hd + e] * scale)) * double(bf(c.k[((base + j) * Hkv + g) * hd + e]));
        s[j] = dot;
        seen[j] = true;
        mx = std::max(mx, dot);
      }
      double sum = 0;
      for (int j = 0; j <= i; ++j) sum += seen[j] ? (s[j] = std::exp(s[j] - mx)) : (s[j] = 0);
      for (int j = 0; j <= i; ++j)
        for (int e = 0; e < hd; ++e)
          out[((i - qb) * H + h) * hd + e] += s[j] / sum * double(bf(c.v[((base + j) * Hkv + g) * hd + e]));
    }
  }
  return out;
}

std::vector<cpu::Bf16Kernel> kernels() { return test::bf16_kernels(); }

/// Max |kernel - direct| over every output of every sequence, with the bound
/// 2^-9 max|bf16(v)| (the probabilities' rounding) + 2e-5 (fp32 sums, exp).
void check_against_direct(const Case& c, cpu::Bf16Kernel kernel, int tile) {
  std::vector<float> out(c.q.size(), std::nanf(""));
  cpu::attention(c.q.data(), c.k.data(), c.v.data(), out.data(), c.offsets, c.shape(), c.win, {tile, 0}, kernel);
  double err = 0, vmax = 0;
  for (float x : c.v) vmax = std::max(vmax, double(std::abs(bf(x))));
  for (std::size_t b = 0; b + 1 < c.offsets.size(); ++b) {
    const auto want = direct_bf16(c, b, 0);
    const std::size_t first = static_cast<std::size_t>(c.offsets[b]) * c.H * c.hd;
    for (std::size_t e = 0; e < want.size(); ++e) err = std::max(err, std::abs(want[e] - out[first + e]));
  }
  INFO("kernel " << cpu::to_string(kernel) << ", head_dim " << c.hd << ", tile " << tile << ", max abs error " << err);
  CHECK(err <= std::ldexp(vmax, -9) + 2e-5);
  CHECK(err > 0);  // (the probabilities are rounded: not the fp32 path by accident)
}

}  // namespace

TEST_CASE("bf16 attention: batches, mixed windows and sinks, head sizes, tiles, against a direct softmax") {
  for (auto kernel : kernels()) {
    // Lengths 150 and 77 (not multiples of 16), 6 query heads on 3 KV heads.
    for (int hd : {16, 40, 64}) {
      const auto c = make_case(6, 3, hd, {0, 150, 227}, {{0, 0}, {7, 0}, {20, 3}}, 40 + hd);
      for (int tile : {13, 64}) check_against_direct(c, kernel, tile);
    }
    // One sequence of 700 keys: full heads walk chunks of up to 256 keys
    // (groups of 48), a window of 300 with 17 sinks spans several panels.
    const auto c = make_case(4, 2, 64, {0, 700}, {{0, 0}, {300, 17}}, 90);
    check_against_direct(c, kernel, 64);
  }
}

TEST_CASE("bf16 attention_rows: the query rows past any first row against a direct softmax") {
  const int n = 150;
  const auto c = make_case(6, 3, 64, {0, n}, {{0, 0}, {7, 0}, {20, 3}}, 70);
  const std::size_t row = static_cast<std::size_t>(c.H) * c.hd;
  double vmax = 0;
  for (float x : c.v) vmax = std::max(vmax, double(std::abs(bf(x))));
  for (auto kernel : kernels())
    for (int qb : {0, 1, 20, 64, 149, 150}) {
      const auto want = direct_bf16(c, 0, qb);
      const std::vector<float> qs(c.q.begin() + static_cast<std::ptrdiff_t>(qb * row), c.q.end());
      std::vector<float> out(qs.size(), std::nanf(""));
      cpu::attention_rows(qs.data(), c.k.data(), c.v.data(), out.data(), n, qb, c.shape(), c.win, {64, 0}, kernel);
      double err = 0;
      for (std::size_t e = 0; e < out.size(); ++e) err = std::max(err, std::abs(want[e] - out[e]));
      INFO("kernel " << cpu::to_string(kernel) << ", first query row " << qb << ", max abs error " << err);
      CHECK(err <= std::ldexp(vmax, -9) + 2e-5);
    }
}

TEST_CASE("bf16 attention: the AVX512_BF16 kernel gives the emulation's bits, and AMX CPUs run it") {
  const auto ks = kernels();
  if (ks.size() == 1) {
    MESSAGE("this CPU has no AVX512_BF16 (or BOSCH_CPU_DISABLE masks it): only the emulation is checked");
    CHECK(cpu::choose_precision(cpu::Precision::bf16).kernel == cpu::Bf16Kernel::emulated);
    return;
  }
  const auto c = make_case(6, 2, 64, {0, 333, 520}, {{0, 0}, {50, 4}}, 80);
  std::vector<float> want(c.q.size());
  cpu::attention(c.q.data(), c.k.data(), c.v.data(), want.data(), c.offsets, c.shape(), c.win, {64, 0},
                 cpu::Bf16Kernel::emulated);
  for (auto kernel : ks) {
    std::vector<float> got(c.q.size());
    cpu::attention(c.q.data(), c.k.data(), c.v.data(), got.data(), c.offsets, c.shape(), c.win, {64, 0}, kernel);
    INFO("kernel " << cpu::to_string(kernel));
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("bf16 attention: independent of the thread count and of the other sequences of the call") {
  const auto c = make_case(4, 2, 64, {0, 300, 301, 650}, {{0, 0}, {33, 2}}, 95);
  const auto kernel = cpu::choose_precision(cpu::Precision::bf16).kernel;
  std::vector<float> two(c.q.size()), one(c.q.size());
  {
    cpu::ThreadScope t(3);
    cpu::attention(c.q.data(), c.k.data(), c.v.data(), two.data(), c.offsets, c.shape(), c.win, {64, 0}, kernel);
  }
  {
    cpu::ThreadScope t(1);
    cpu::attention(c.q.data(), c.k.data(), c.v.data(), one.data(), c.offsets, c.shape(), c.win, {64, 0}, kernel);
  }
  CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
  // The last sequence alone gives its rows of the batch, bitwise.
  const std::size_t kq = static_cast<std::size_t>(c.H) * c.hd, kk = static_cast<std::size_t>(c.Hkv) * c.hd;
  const int b0 = c.offsets[2], n = c.offsets[3] - b0;
  const std::vector<float> q(c.q.begin() + b0 * static_cast<std::ptrdiff_t>(kq), c.q.end());
  const std::vector<float> k(c.k.begin() + b0 * static_cast<std::ptrdiff_t>(kk), c.k.end());
  const std::vector<float> v(c.v.begin() + b0 * static_cast<std::ptrdiff_t>(kk), c.v.end());
  std::vector<float> alone(q.size());
  const std::vector<int> offsets{0, n};
  cpu::attention(q.data(), k.data(), v.data(), alone.data(), offsets, c.shape(), c.win, {64, 0}, kernel);
  CHECK(std::memcmp(alone.data(), two.data() + b0 * static_cast<std::ptrdiff_t>(kq), alone.size() * sizeof(float)) == 0);
}
