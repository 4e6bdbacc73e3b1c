// The bf16 products of the CPU backend (cpu/bf16.hpp): rounding to bf16, the
// packed product against a scalar implementation of the VDPBF16PS rule
// written here (bitwise), against float64 products of the unrounded inputs
// (within the bf16 error bound), independent of threads and blocking, and
// the AVX512_BF16 kernel bitwise equal to the emulation where the CPU has it.

#include "bf16_kernels.hpp"
#include "test_support.hpp"

#include <bosch/cpu/bf16.hpp>
#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/precision.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {

using namespace bosch;

std::uint32_t bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

float from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

std::vector<float> uniform(std::size_t n, std::uint64_t seed, double a = 1.0) {
  boost::random::mt19937_64 rng(seed);
  boost::random::uniform_real_distribution<double> u(-a, a);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(u(rng));
  return v;
}

model::Matrix matrix(int rows, int cols, std::uint64_t seed) {
  model::Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.data = uniform(static_cast<std::size_t>(rows) * cols, seed);
  return m;
}

/// The VDPBF16PS rule, scalar, from the unrounded inputs: round x and w to
/// bf16, then per pair t acc += x_odd w_odd, acc += x_even w_even, each sum
/// rounded to fp32 (products of bf16 values are exact in double and float).
std::vector<float> spec_product(const std::vector<float>& x, std::size_t rows, const model::Matrix& w,
                                const float* bias) {
  std::vector<float> y(rows * static_cast<std::size_t>(w.rows));
  const int K = w.cols;
  auto at = [](const float* v, int k, int K_) { return k < K_ ? cpu::from_bf16(cpu::to_bf16(v[k])) : 0.0f; };
  for (std::size_t r = 0; r < rows; ++r)
    for (int c = 0; c < w.rows; ++c) {
      const float* xr = x.data() + r * static_cast<std::size_t>(K);
      const float* wc = w.data.data() + static_cast<std::size_t>(c) * K;
      float acc = 0.0f;
      for (int t = 0; 2 * t < K; ++t) {
        acc = static_cast<float>(static_cast<double>(acc) +
                                 static_cast<double>(at(xr, 2 * t + 1, K)) * static_cast<double>(at(wc, 2 * t + 1, K)));
        acc = static_cast<float>(static_cast<double>(acc) +
                                 static_cast<double>(at(xr, 2 * t, K)) * static_cast<double>(at(wc, 2 * t, K)));
      }
      y[r * static_cast<std::size_t>(w.rows) + static_cast<std::size_t>(c)] = bias ? acc + bias[c] : acc;
    }
  return y;
}

/// sum_k |x_k w_k| (+ |bias|) of output (r, c), from the inputs rounded to
/// bf16 when `rounded`.
double mass(const std::vector<float>& x, std::size_t r, const model::Matrix& w, int c, const float* bias,
            bool rounded) {
  const int K = w.cols;
  double m = bias ? std::abs(static_cast<double>(bias[c])) : 0.0;
  for (int k = 0; k < K; ++k) {
    float a = x[r * static_cast<std::size_t>(K) + static_cast<std::size_t>(k)];
    float b = w.data[static_cast<std::size_t>(c) * K + static_cast<std::size_t>(k)];
    if (rounded) {
      a = cpu::from_bf16(cpu::to_bf16(a));
      b = cpu::from_bf16(cpu::to_bf16(b));
    }
    m += std::abs(static_cast<double>(a) * b);
  }
  return m;
}

/// The largest |got - spec| over the fp32 error bound of a sum of the bf16
/// products, (K + 2) 2^-24 x mass (a ratio <= 1 is within the bound): how
/// far AMX's own rounding of the accumulation may move from the rule.
double fp32_excess(const std::vector<float>& got, const std::vector<float>& spec, const std::vector<float>& x,
                   std::size_t rows, const model::Matrix& w, const float* bias) {
  double worst = 0;
  for (std::size_t r = 0; r < rows; ++r)
    for (int c = 0; c < w.rows; ++c) {
      const std::size_t i = r * static_cast<std::size_t>(w.rows) + static_cast<std::size_t>(c);
      const double bound = (w.cols + 2) * std::ldexp(1.0, -24) * mass(x, r, w, c, bias, true);
      worst = std::max(worst, std::abs(static_cast<double>(got[i]) - spec[i]) / (bound + 1e-30));
    }
  return worst;
}

/// The largest |got - exact| over the bf16 error bound, where exact is the
/// float64 product of the unrounded inputs: each input rounds by <= 2^-8
/// relative (half an ulp of 8 significant bits), so each product by
/// <= 2^-7 + 2^-16; the fp32 sum of the K terms and the bias adds
/// <= (K + 2) 2^-24 of the mass (doubled for slack on the rounded mass).
double bf16_excess(const std::vector<float>& got, const std::vector<float>& x, std::size_t rows,
                   const model::Matrix& w, const float* bias) {
  const int K = w.cols;
  double worst = 0;
  for (std::size_t r = 0; r < rows; ++r)
    for (int c = 0; c < w.rows; ++c) {
      double exact = bias ? bias[c] : 0.0;
      for (int k = 0; k < K; ++k)
        exact += static_cast<double>(x[r * static_cast<std::size_t>(K) + static_cast<std::size_t>(k)]) *
                 w.data[static_cast<std::size_t>(c) * K + static_cast<std::size_t>(k)];
      const double m = mass(x, r, w, c, bias, false);
      const double bound = (std::ldexp(1.0, -7) + std::ldexp(1.0, -15)) * (m - (bias ? std::abs(bias[c]) : 0.0)) +
                           (K + 2) * std::ldexp(1.0, -23) * m;
      const double err = std::abs(got[r * static_cast<std::size_t>(w.rows) + static_cast<std::size_t>(c)] - exact);
      worst = std::max(worst, err / (bound + 1e-30));
    }
  return worst;
}

std::vector<float> run(const std::vector<float>& x, std::size_t rows, const cpu::PackedMatrix& p, const float* bias,
                       cpu::Bf16Kernel kernel) {
  std::vector<std::uint16_t> xb(rows * cpu::bf16_stride(p.cols), 0xffff);  // NaN bits: padding must be written
  cpu::convert_bf16(x.data(), rows, p.cols, xb.data(), kernel);
  std::vector<float> y(rows * static_cast<std::size_t>(p.rows), std::numeric_limits<float>::quiet_NaN());
  cpu::gemm_bf16(xb.data(), rows, p, bias, y.data(), kernel);
  return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<cpu::Bf16Kernel> kernels() { return test::bf16_kernels(); }

bool runs(cpu::Bf16Kernel kernel) {
  const auto k = kernels();
  return std::find(k.begin(), k.end(), kernel) != k.end();
}

}  // namespace

TEST_CASE("bf16 rounding: nearest even, denormals to zero, NaN quieted, exact back to fp32") {
  CHECK(cpu::to_bf16(1.0f) == 0x3f80);
  CHECK(cpu::to_bf16(-2.0f) == 0xc000);
  CHECK(cpu::to_bf16(from_bits(0x3f808000u)) == 0x3f80);  // tie, even below
  CHECK(cpu::to_bf16(from_bits(0x3f818000u)) == 0x3f82);  // tie, even above
  CHECK(cpu::to_bf16(from_bits(0x3f808001u)) == 0x3f81);  // above the tie
  CHECK(cpu::to_bf16(from_bits(0x3f807fffu)) == 0x3f80);  // below the tie
  CHECK(cpu::to_bf16(from_bits(0x7f7fffffu)) == 0x7f80);  // largest float rounds to inf
  CHECK(cpu::to_bf16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(cpu::to_bf16(from_bits(0x00400000u)) == 0x0000);  // denormal
  CHECK(cpu::to_bf16(from_bits(0x80000001u)) == 0x8000);  // negative denormal
  CHECK(cpu::to_bf16(from_bits(0x7f800001u)) == 0x7fc0);  // signalling NaN quieted
  CHECK(std::isnan(cpu::from_bf16(cpu::to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(cpu::from_bf16(0x3fc0) == 1.5f);
  // Random normal floats: the result is one of the two neighbouring bf16
  // values, the nearer one (the even one on a tie).
  boost::random::mt19937_64 rng(test::seed(1));
  boost::random::uniform_int_distribution<std::uint32_t> u32;
  int checked = 0;
  for (int i = 0; i < 100000; ++i) {
    const std::uint32_t u = u32(rng);
    const std::uint32_t e = (u >> 23) & 0xff;
    if (e == 0 || e >= 0xfe) continue;
    const float x = from_bits(u);
    const float lo = from_bits(u & 0xffff0000u), hi = from_bits((u & 0xffff0000u) + 0x10000u);
    const float got = cpu::from_bf16(cpu::to_bf16(x));
    const double dlo = std::abs(static_cast<double>(x) - lo), dhi = std::abs(static_cast<double>(x) - hi);
    const float want = dlo < dhi ? lo : dhi < dlo ? hi : ((bits(lo) >> 16) % 2 == 0 ? lo : hi);
    REQUIRE(bits(got) == bits(want));
    ++checked;
  }
  CHECK(checked > 90000);
}

TEST_CASE("bf16 product: the VDPBF16PS rule (AMX: within fp32 rounding of it), within the bf16 bound of float64") {
  const std::vector<int> row_counts{1, 3, 8, 9, 17, 37};
  const std::vector<int> in_sizes{1, 2, 5, 32, 33, 100};
  const std::vector<int> out_sizes{1, 15, 16, 17, 47, 48, 49, 100, 150};
  std::uint64_t s = test::seed(10);
  for (int K : in_sizes)
    for (int O : out_sizes)
      for (int rows : row_counts) {
        ++s;
        const auto w = matrix(O, K, s);
        const auto x = uniform(static_cast<std::size_t>(rows) * K, s + 1000);
        const auto bias = uniform(static_cast<std::size_t>(O), s + 2000);
        const auto p = cpu::pack_bf16(w);
        REQUIRE(p.data.size() == static_cast<std::size_t>(p.panels()) * p.padded_pairs() * 32);
        for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
          const auto spec = spec_product(x, rows, w, b);
          for (auto kernel : kernels()) {
            const bool with_bias = b != nullptr;
            INFO("rows " << rows << " in " << K << " out " << O << " bias " << with_bias << " kernel "
                         << cpu::to_string(kernel));
            const auto got = run(x, rows, p, b, kernel);
            if (kernel == cpu::Bf16Kernel::amx)
              CHECK(fp32_excess(got, spec, x, rows, w, b) <= 1.0);
            else
              CHECK(same_bits(got, spec));
            CHECK(bf16_excess(got, x, rows, w, b) <= 1.0);
          }
        }
      }
}

TEST_CASE("bf16 product: the result does not depend on the thread count or the row count of a call") {
  const auto w = matrix(200, 96, test::seed(20));
  const auto p = cpu::pack_bf16(w);
  const std::size_t rows = 300;
  const auto x = uniform(rows * 96, test::seed(21));
  for (auto kernel : kernels()) {
    INFO("kernel " << cpu::to_string(kernel));
    std::vector<float> one;
    {
      cpu::ThreadScope t(1);
      one = run(x, rows, p, nullptr, kernel);
    }
    for (int threads : {2, 3, 7}) {
      cpu::ThreadScope t(threads);
      CHECK(same_bits(run(x, rows, p, nullptr, kernel), one));
    }
    // Row r of a 300-row call equals the same row alone.
    for (std::size_t r : {std::size_t{0}, std::size_t{131}, rows - 1}) {
      const std::vector<float> xr(x.begin() + static_cast<std::ptrdiff_t>(r * 96),
                                  x.begin() + static_cast<std::ptrdiff_t>((r + 1) * 96));
      const auto alone = run(xr, 1, p, nullptr, kernel);
      CHECK(std::memcmp(alone.data(), one.data() + r * 200, 200 * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("bf16 product: the AVX512_BF16 kernel gives the emulation's bits (where the CPU has it)") {
  if (!runs(cpu::Bf16Kernel::avx512)) {
    MESSAGE("this CPU has no AVX512_BF16 (or BOSCH_CPU_DISABLE masks it): only the emulation is checked");
    CHECK(cpu::choose_precision(cpu::Precision::bf16).kernel == cpu::Bf16Kernel::emulated);
    return;
  }
  std::uint64_t s = test::seed(30);
  for (int K : {1, 31, 64, 577})
    for (int O : {5, 16, 48, 100, 576})
      for (int rows : {1, 7, 8, 13, 64, 300}) {
        ++s;
        const auto w = matrix(O, K, s);
        auto x = uniform(static_cast<std::size_t>(rows) * K, s + 1, 30.0);
        x[0] = from_bits(0x00012345u);  // a denormal input (both flush it)
        const auto bias = uniform(static_cast<std::size_t>(O), s + 2);
        const auto p = cpu::pack_bf16(w);
        INFO("rows " << rows << " in " << K << " out " << O);
        // Conversion alone.
        std::vector<std::uint16_t> a(static_cast<std::size_t>(rows) * cpu::bf16_stride(K)), b(a.size());
        cpu::convert_bf16(x.data(), rows, K, a.data(), cpu::Bf16Kernel::avx512);
        cpu::convert_bf16(x.data(), rows, K, b.data(), cpu::Bf16Kernel::emulated);
        CHECK(a == b);
        CHECK(same_bits(run(x, rows, p, bias.data(), cpu::Bf16Kernel::avx512),
                        run(x, rows, p, bias.data(), cpu::Bf16Kernel::emulated)));
      }
}

TEST_CASE("bf16 packing: a matrix whose data does not match its shape is refused") {
  model::Matrix w;
  w.rows = 3;
  w.cols = 4;
  w.data.assign(11, 0.0f);
  CHECK_THROWS_AS(cpu::pack_bf16(w), invalid_argument);
}
