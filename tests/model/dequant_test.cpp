// Dequantization of the ggml tensor types: exact half/bfloat conversions,
// hand-built blocks with known values (the layouts of bosch/model/dequant.hpp),
// and round trips through the reference quantizers of writers.hpp with each
// type's error bound.
#include "test_support.hpp"
#include "writers.hpp"

#include <bosch/error.hpp>
#include <bosch/model/dequant.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/normal_distribution.hpp>

#include <bit>
#include <fstream>
#include <map>
#include <cmath>
#include <limits>

using namespace bosch;
using namespace bosch::model;
namespace w = bosch::test::writers;

namespace {

std::vector<float> gaussian(std::uint64_t seed, std::size_t n, double sigma = 1.0) {
  boost::random::mt19937_64 rng(seed);
  boost::random::normal_distribution<double> nd(0.0, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(nd(rng));
  return v;
}

std::vector<float> dq(GgmlType t, const w::Bytes& b, std::size_t n) {
  std::vector<float> out(n);
  dequantize(t, b, out);
  return out;
}

}  // namespace

TEST_CASE("fp16 conversion is exact and rounds to nearest even") {
  CHECK(fp16_to_fp32(0x3c00) == 1.0f);
  CHECK(fp16_to_fp32(0xc000) == -2.0f);
  CHECK(fp16_to_fp32(0x7bff) == 65504.0f);
  CHECK(fp16_to_fp32(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(fp16_to_fp32(0x0400) == std::ldexp(1.0f, -14));  // smallest normal
  CHECK(std::isinf(fp16_to_fp32(0x7c00)));
  CHECK(std::isnan(fp16_to_fp32(0x7e00)));
  CHECK(std::signbit(fp16_to_fp32(0x8000)));
  // Every finite half survives float and back unchanged.
  int bad = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    if (fp32_to_fp16(f) != h) ++bad;
  }
  CHECK(bad == 0);
  // Ties to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  CHECK(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(fp32_to_fp16(70000.0f) == 0x7c00);  // overflow to infinity
  CHECK(fp32_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);  // halfway to the smallest subnormal: even
  CHECK(fp32_to_fp16(std::ldexp(3.0f, -26)) == 0x0001);
  CHECK(std::isnan(fp16_to_fp32(fp32_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("bf16 conversion") {
  CHECK(bf16_to_fp32(0x3f80) == 1.0f);
  CHECK(bf16_to_fp32(0xc040) == -3.0f);
  CHECK(fp32_to_bf16(1.0f) == 0x3f80);
  // 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties to even (down).
  CHECK(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
  CHECK(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
  CHECK(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  const auto v = gaussian(bosch::test::seed(1), 1000);
  for (float x : v) CHECK(std::abs(bf16_to_fp32(fp32_to_bf16(x)) - x) <= std::abs(x) * std::ldexp(1.0f, -8));
}

TEST_CASE("block formats and storage sizes follow ggml") {
  CHECK(block_format(static_cast<std::uint32_t>(GgmlType::q4_k))->block_bytes == 144);
  CHECK(block_format(static_cast<std::uint32_t>(GgmlType::q6_k))->block_bytes == 210);
  CHECK(block_format(static_cast<std::uint32_t>(GgmlType::q8_0))->block_bytes == 34);
  CHECK(block_format(static_cast<std::uint32_t>(GgmlType::q4_1))->block_bytes == 20);
  CHECK(block_format(static_cast<std::uint32_t>(GgmlType::q4_0))->block_bytes == 18);
  CHECK_FALSE(block_format(4).has_value());   // removed Q4_2
  CHECK_FALSE(block_format(99).has_value());
  CHECK(storage_bytes(static_cast<std::uint32_t>(GgmlType::q8_0), 64) == 68u);
  CHECK_FALSE(storage_bytes(static_cast<std::uint32_t>(GgmlType::q8_0), 33).has_value());
  CHECK(type_name(12) == "Q4_K");
  CHECK(type_name(99) == "type 99");
  CHECK(can_dequantize(GgmlType::q6_k));
  CHECK(can_dequantize(GgmlType::q5_k));
  CHECK_FALSE(can_dequantize(GgmlType::q3_k));
  std::vector<float> out(256);
  std::vector<std::byte> in(110);
  CHECK_THROWS_AS(dequantize(GgmlType::q3_k, in, out), invalid_argument);
  std::vector<std::byte> short_in(143);
  CHECK_THROWS_AS(dequantize(GgmlType::q4_k, short_in, out), invalid_argument);
}

TEST_CASE("hand-built blocks decode to the values their layout defines") {
  SUBCASE("Q8_0") {
    w::Bytes b;
    w::put<std::uint16_t>(b, 0x3800);  // d = 0.5
    for (int j = 0; j < 32; ++j) w::put<std::int8_t>(b, static_cast<std::int8_t>(j - 16));
    const auto y = dq(GgmlType::q8_0, b, 32);
    for (int j = 0; j < 32; ++j) CHECK(y[static_cast<std::size_t>(j)] == 0.5f * static_cast<float>(j - 16));
  }
  SUBCASE("Q4_0: low nibbles are elements 0-15, high nibbles 16-31, offset 8") {
    w::Bytes b;
    w::put<std::uint16_t>(b, 0x4000);  // d = 2
    for (int j = 0; j < 16; ++j) w::put<std::uint8_t>(b, static_cast<std::uint8_t>(j | ((15 - j) << 4)));
    const auto y = dq(GgmlType::q4_0, b, 32);
    for (int j = 0; j < 16; ++j) {
      CHECK(y[static_cast<std::size_t>(j)] == 2.0f * static_cast<float>(j - 8));
      CHECK(y[static_cast<std::size_t>(j + 16)] == 2.0f * static_cast<float>(7 - j));
    }
  }
  SUBCASE("Q4_1: d * q + m") {
    w::Bytes b;
    w::put<std::uint16_t>(b, 0x3400);  // d = 0.25
    w::put<std::uint16_t>(b, 0xbc00);  // m = -1
    for (int j = 0; j < 16; ++j) w::put<std::uint8_t>(b, static_cast<std::uint8_t>(j | (j << 4)));
    const auto y = dq(GgmlType::q4_1, b, 32);
    for (int j = 0; j < 16; ++j) {
      CHECK(y[static_cast<std::size_t>(j)] == 0.25f * static_cast<float>(j) - 1.0f);
      CHECK(y[static_cast<std::size_t>(j + 16)] == 0.25f * static_cast<float>(j) - 1.0f);
    }
  }
  SUBCASE("Q4_K: 6-bit scales/mins packed in 12 bytes") {
    // Sub-block s gets scale sc[s] = 10 + 7s (>= 16 for s >= 1, so the high
    // bits matter for s >= 4) and min mn[s] = 60 - 5s; all quants = s + 1
    // (elements of the second sub-block of a pair are the high nibbles).
    const int sc[8] = {10, 17, 24, 31, 38, 45, 52, 59};
    const int mn[8] = {60, 55, 50, 45, 40, 35, 30, 25};
    std::uint8_t packed[12] = {};
    for (int j = 0; j < 4; ++j) {
      packed[j] = static_cast<std::uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
      packed[j + 4] = static_cast<std::uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
      packed[j + 8] = static_cast<std::uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
    w::Bytes b;
    w::put<std::uint16_t>(b, 0x3c00);  // d = 1
    w::put<std::uint16_t>(b, 0x3800);  // dmin = 0.5
    for (auto p : packed) w::put<std::uint8_t>(b, p);
    for (int pair = 0; pair < 4; ++pair)
      for (int l = 0; l < 32; ++l)
        w::put<std::uint8_t>(b, static_cast<std::uint8_t>((2 * pair + 1) | ((2 * pair + 2) << 4)));
    REQUIRE(b.size() == 144);
    const auto y = dq(GgmlType::q4_k, b, 256);
    for (int s = 0; s < 8; ++s)
      for (int l = 0; l < 32; ++l)
        CHECK(y[static_cast<std::size_t>(32 * s + l)] ==
              static_cast<float>(sc[s] * (s + 1)) - 0.5f * static_cast<float>(mn[s]));
  }
  SUBCASE("Q6_K: ql low nibbles, qh 2-bit pairs, int8 scale per 16 elements, offset 32") {
    // Element i (0..255) gets quant value (i % 64) - 32 and scale (i / 16) - 8.
    std::uint8_t ql[128] = {}, qh[64] = {};
    auto qv = [](int i) { return i % 64; };  // stored unsigned value
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 32; ++l) {
        const int base = 128 * h + l;
        const int q1 = qv(base), q2 = qv(base + 32), q3 = qv(base + 64), q4 = qv(base + 96);
        ql[64 * h + l] = static_cast<std::uint8_t>((q1 & 15) | ((q3 & 15) << 4));
        ql[64 * h + l + 32] = static_cast<std::uint8_t>((q2 & 15) | ((q4 & 15) << 4));
        qh[32 * h + l] = static_cast<std::uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    w::Bytes b;
    for (auto x : ql) w::put<std::uint8_t>(b, x);
    for (auto x : qh) w::put<std::uint8_t>(b, x);
    for (int s = 0; s < 16; ++s) w::put<std::int8_t>(b, static_cast<std::int8_t>(s - 8));
    w::put<std::uint16_t>(b, 0x3400);  // d = 0.25
    REQUIRE(b.size() == 210);
    const auto y = dq(GgmlType::q6_k, b, 256);
    for (int i = 0; i < 256; ++i)
      CHECK(y[static_cast<std::size_t>(i)] == 0.25f * static_cast<float>((i / 16 - 8) * (i % 64 - 32)));
  }
}

TEST_CASE("quantize/dequantize round trips stay within each type's step") {
  // 8 super-blocks of gaussian values, with one block of constants and one of
  // zeros to exercise degenerate scales.
  auto x = gaussian(bosch::test::seed(2), 2048, 0.05);
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
  std::fill(x.begin() + 512, x.begin() + 768, 0.0123f);
  struct Case {
    GgmlType type;
    int block;
    // Error bound for a block, from its values (see writers.hpp quantizers);
    // the 2^-10 relative term covers the fp16 rounding of scales and offsets.
    double (*bound)(const float*, int);
  };
  auto amax = [](const float* p, int n) {
    double m = 0;
    for (int i = 0; i < n; ++i) m = std::max(m, std::abs(static_cast<double>(p[i])));
    return m;
  };
  auto range = [](const float* p, int n) {
    double lo = p[0], hi = p[0];
    for (int i = 0; i < n; ++i) lo = std::min<double>(lo, p[i]), hi = std::max<double>(hi, p[i]);
    return hi - lo;
  };
  static decltype(amax) s_amax = amax;
  static decltype(range) s_range = range;
  const Case cases[] = {
      {GgmlType::q8_0, 32, [](const float* p, int n) { return s_amax(p, n) / 127 * 0.5 + s_amax(p, n) * 1e-3; }},
      {GgmlType::q4_0, 32, [](const float* p, int n) { return s_amax(p, n) / 8 * 1.0 + s_amax(p, n) * 1e-3; }},
      {GgmlType::q4_1, 32, [](const float* p, int n) { return s_range(p, n) / 15 * 0.5 + s_amax(p, n) * 1e-3; }},
      // Q4_K: sub-block step (range incl. 0)/15 rounded up by one 6-bit scale
      // step of the super-block, plus half a min step; bounded by 1/15 + 2/63
      // of the super-block's range + 0.
      {GgmlType::q4_k, 256,
       [](const float* p, int n) {
         double lo = 0, hi = 0;
         for (int i = 0; i < n; ++i) lo = std::min<double>(lo, p[i]), hi = std::max<double>(hi, p[i]);
         return (hi - lo) * (0.5 / 15 + 1.0 / 63) + s_amax(p, n) * 2e-3;
       }},
      // Q6_K: step d*sc <= amax/31 + d, error half of it.
      {GgmlType::q6_k, 256, [](const float* p, int n) { return s_amax(p, n) * (0.5 / 31 + 1.0 / 127) + s_amax(p, n) * 2e-3; }},
      {GgmlType::f16, 1, [](const float* p, int) { return std::abs(p[0]) * std::ldexp(1.0, -11) + 1e-7; }},
      {GgmlType::bf16, 1, [](const float* p, int) { return std::abs(p[0]) * std::ldexp(1.0, -8); }},
      {GgmlType::f32, 1, [](const float*, int) { return 0.0; }},
  };
  for (const Case& c : cases) {
    CAPTURE(type_name(static_cast<std::uint32_t>(c.type)));
    const w::Bytes q = w::quantize(c.type, x);
    REQUIRE(q.size() == storage_bytes(static_cast<std::uint32_t>(c.type), x.size()));
    const auto y = dq(c.type, q, x.size());
    double worst_ratio = 0, worst_err = 0;
    for (std::size_t b = 0; b < x.size(); b += static_cast<std::size_t>(c.block)) {
      const double bound = c.bound(x.data() + b, c.block);
      for (std::size_t i = b; i < b + static_cast<std::size_t>(c.block); ++i) {
        const double err = std::abs(static_cast<double>(y[i]) - x[i]);
        worst_err = std::max(worst_err, err);
        if (bound > 0) worst_ratio = std::max(worst_ratio, err / bound);
        else CHECK(err == 0.0);
      }
    }
    MESSAGE(type_name(static_cast<std::uint32_t>(c.type)) << ": max abs error " << worst_err
                                                           << ", max error / bound " << worst_ratio);
    CHECK(worst_ratio <= 1.0);
    // Zero blocks decode to exact zeros; constant blocks (within fp16) to the constant.
    for (std::size_t i = 256; i < 512; ++i) CHECK(y[i] == 0.0f);
    CHECK(y[600] == doctest::Approx(0.0123).epsilon(2e-3));
  }
}

TEST_CASE("large tensors dequantize identically with OpenMP splitting") {
  // 2^20 values take the parallel path; compare against block-by-block decoding.
  const auto x = gaussian(bosch::test::seed(3), 1u << 20, 0.1);
  for (GgmlType t : {GgmlType::q4_1, GgmlType::q6_k}) {
    const w::Bytes q = w::quantize(t, x);
    const auto all = dq(t, q, x.size());
    const auto f = *block_format(static_cast<std::uint32_t>(t));
    std::vector<float> one(static_cast<std::size_t>(f.block_elements));
    bool same = true;
    for (std::size_t b = 0; b < x.size() / one.size(); b += 997) {
      dequantize(t, std::span(q).subspan(b * static_cast<std::size_t>(f.block_bytes), static_cast<std::size_t>(f.block_bytes)), one);
      same = same && std::equal(one.begin(), one.end(), all.begin() + static_cast<std::ptrdiff_t>(b * one.size()));
    }
    CHECK(same);
  }
}

TEST_CASE("dequantization agrees with an independent implementation (gguf-py vectors)") {
  // tests/model/data/ggml_blocks.txt: random blocks of each type decoded by
  // the numpy reference of the `gguf` Python package (see make_ggml_blocks.py).
  // Both compute in float32 from the same fp16 scales; allowed difference:
  // 2 float32 ulps (operation order may differ, e.g. d*sc*q vs (d*sc)*q).
  std::ifstream in(std::string(BOSCH_SOURCE_DIR) + "/tests/model/data/ggml_blocks.txt");
  REQUIRE(in.good());
  const std::map<std::string, GgmlType> types = {{"Q4_0", GgmlType::q4_0}, {"Q4_1", GgmlType::q4_1},
                                                 {"Q8_0", GgmlType::q8_0}, {"Q4_K", GgmlType::q4_k},
                                                 {"Q6_K", GgmlType::q6_k}, {"F16", GgmlType::f16},
                                                 {"Q5_0", GgmlType::q5_0}, {"Q5_1", GgmlType::q5_1},
                                                 {"Q5_K", GgmlType::q5_k},
                                                 {"BF16", GgmlType::bf16}};
  std::string word, name, hex;
  int blocks = 0, sections = 0;
  while (in >> word) {
    REQUIRE(word == "type");
    in >> name >> blocks >> word >> hex;
    REQUIRE(word == "bytes");
    CAPTURE(name);
    REQUIRE(types.count(name) == 1);
    const GgmlType t = types.at(name);
    w::Bytes bytes;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
      bytes.push_back(static_cast<std::byte>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    const auto f = *block_format(static_cast<std::uint32_t>(t));
    REQUIRE(bytes.size() == static_cast<std::size_t>(blocks * f.block_bytes));
    const std::size_t n = static_cast<std::size_t>(blocks * f.block_elements);
    in >> word;
    REQUIRE(word == "values");
    std::vector<float> want(n);
    for (auto& v : want) in >> v;
    REQUIRE(in.good());
    const auto got = dq(t, bytes, n);
    int mismatches = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const float tol = 2 * std::abs(want[i]) * std::numeric_limits<float>::epsilon();
      if (std::abs(got[i] - want[i]) > tol) {
        if (mismatches++ < 3) CHECK(got[i] == want[i]);
      }
    }
    CHECK(mismatches == 0);
    ++sections;
  }
  CHECK(sections == 10);
}
