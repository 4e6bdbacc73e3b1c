// Host-side parts of the CUDA backend, checked on every machine (no GPU
// needed): 16-bit conversions, the key-tile walk of the attention kernel
// (which tiles an SWA head loads), the work plan, option checks, and the
// errors a machine without a usable GPU gets.

#include "../cpu/tiny_model.hpp"
#include "../../cuda/src/plan.hpp"
#include "cuda_support.hpp"

#include <bosch/cuda/attention_tiles.hpp>
#include <bosch/cuda/backend.hpp>
#include <bosch/cuda/half.hpp>
#include <bosch/cuda/ops.hpp>
#include <bosch/error.hpp>
#include <bosch/model/kv_slots.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>

using namespace bosch;

namespace {

// Round-to-nearest-even of f to a binary format with `bits` significand bits
// whose smallest normal exponent is emin, computed in double (exact here).
double reference_round(float f, int bits, int emin) {
  if (f == 0.0f) return f;
  int e = std::ilogb(f);
  if (e < emin) e = emin;  // subnormal range: fixed quantum
  const double q = std::rint(std::ldexp(static_cast<double>(f), bits - 1 - e));
  return std::ldexp(q, e - (bits - 1));
}

}  // namespace

TEST_CASE("bf16 and fp16 conversions round to nearest even and round-trip exactly") {
  // Every 16-bit pattern survives a trip through fp32 (NaNs stay NaN).
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto b = static_cast<std::uint16_t>(h);
    const float fb = cuda::bf16_to_float(b);
    if (std::isnan(fb)) CHECK(std::isnan(cuda::bf16_to_float(cuda::float_to_bf16(fb))));
    else REQUIRE(cuda::float_to_bf16(fb) == b);
    const float fh = cuda::fp16_to_float(b);
    if (std::isnan(fh)) CHECK(std::isnan(cuda::fp16_to_float(cuda::float_to_fp16(fh))));
    else REQUIRE(cuda::float_to_fp16(fh) == b);
  }
  // Known values and ties.
  CHECK(cuda::float_to_bf16(1.0f) == 0x3f80);
  CHECK(cuda::float_to_fp16(1.0f) == 0x3c00);
  CHECK(cuda::float_to_fp16(65504.0f) == 0x7bff);
  CHECK(cuda::float_to_fp16(65519.99f) == 0x7bff);
  CHECK(cuda::float_to_fp16(65520.0f) == 0x7c00);           // halfway to 2^16 -> even -> inf
  CHECK(cuda::float_to_fp16(0x1p-24f) == 0x0001);           // smallest subnormal
  CHECK(cuda::float_to_fp16(0x1p-25f) == 0x0000);           // tie -> even (0)
  CHECK(cuda::float_to_fp16(0x1.8p-24f) == 0x0002);         // 1.5 quanta -> 2
  CHECK(cuda::float_to_bf16(1.0f + 0x1p-8f) == 0x3f80);     // tie -> even
  CHECK(cuda::float_to_bf16(1.0f + 0x1.8p-8f) == 0x3f81);
  CHECK(std::isinf(cuda::bf16_to_float(cuda::float_to_bf16(std::numeric_limits<float>::infinity()))));
  // Random values over many binades against a double-precision reference.
  boost::random::mt19937_64 rng(test::seed(501));
  boost::random::uniform_real_distribution<double> mant(1.0, 2.0);
  boost::random::uniform_int_distribution<int> expo(-30, 17);
  for (int i = 0; i < 200000; ++i) {
    const float f = static_cast<float>(std::ldexp(mant(rng), expo(rng)) * (i % 2 ? -1 : 1));
    const double rb = reference_round(f, 8, -126);
    REQUIRE(static_cast<double>(cuda::round_to(f, cuda::DType::bf16)) == rb);
    const double rh = std::abs(f) >= 65520.0 ? std::copysign(INFINITY, f) : reference_round(f, 11, -14);
    REQUIRE(static_cast<double>(cuda::round_to(f, cuda::DType::fp16)) == rh);
    // The unit roundoff bounds the relative error of one rounding.
    if (std::abs(f) < 60000.0f && std::abs(f) > 0x1p-14f)
      REQUIRE(std::abs(rh - f) <= cuda::unit_roundoff(cuda::DType::fp16) * std::abs(f));
    REQUIRE(std::abs(rb - f) <= cuda::unit_roundoff(cuda::DType::bf16) * std::abs(f));
  }
}

TEST_CASE("attention key tiles: every visible key covered, no tile outside the window") {
  // Exhaustive over small shapes: the tiles a query tile visits are exactly
  // those holding a key visible to one of its rows; tile_touches and
  // tile_fully_visible agree with brute force.
  long long tiles_checked = 0;
  for (int key_tile : {16, 32, 64}) {
    for (int query_tile : {16, 64, 128}) {
      for (int n : {1, 2, 15, 16, 17, 63, 64, 65, 130, 200}) {
        for (int window : {0, 1, 2, 5, 16, 33, 64, 100, 500}) {
          for (int sinks : {0, 1, 3, 40}) {
            for (int q0 = 0; q0 < n; q0 += query_tile) {
              const int q1 = std::min(n, q0 + query_tile);
              const cuda::KeyTiles walk = cuda::key_tiles(q0, q1, window, sinks, key_tile);
              std::set<int> visited;
              int last = -1;
              for (int k = 0; k < walk.count(); ++k) {
                const int t = walk.at(k);
                REQUIRE(t > last);  // increasing, no repeats
                last = t;
                visited.insert(t);
              }
              const int tiles = (n + key_tile - 1) / key_tile;
              for (int t = 0; t < tiles; ++t) {
                const int k0 = t * key_tile, k1 = std::min(n, k0 + key_tile);
                bool any = false, all = true;
                for (int i = q0; i < q1; ++i)
                  for (int j = k0; j < k0 + key_tile; ++j) {
                    const bool vis = j < n && cuda::key_visible(i, j, window, sinks);
                    any = any || vis;
                    all = all && vis;
                  }
                INFO("n " << n << " w " << window << " s " << sinks << " q0 " << q0 << " tile " << t);
                REQUIRE(visited.count(t) == (any ? 1u : 0u));
                REQUIRE(cuda::tile_touches(q0, q1, k0, k0 + key_tile, window, sinks) == any);
                if (k1 == k0 + key_tile)  // full tiles (keys past n are masked by the kernel)
                  REQUIRE(cuda::tile_fully_visible(q0, q1, k0, k0 + key_tile, window, sinks) == all);
                else if (cuda::tile_fully_visible(q0, q1, k0, k0 + key_tile, window, sinks))
                  REQUIRE(all);
                ++tiles_checked;
              }
              // An SWA head's work is O(window): at most the window's span of
              // tiles plus the sink tiles.
              if (window > 0) {
                const int span = (window + (q1 - q0) + key_tile - 2) / key_tile + 1;
                const int sink_tiles = (sinks + key_tile - 1) / key_tile;
                CHECK(walk.count() <= span + sink_tiles);
              }
            }
          }
        }
      }
    }
  }
  MESSAGE("checked " << tiles_checked << " (query tile, key tile) pairs");
}

TEST_CASE("attention plan covers every row once and counts visible keys exactly") {
  const std::vector<int> lengths = {1, 64, 65, 200, 3};
  const cuda::detail::Plan plan = cuda::detail::make_plan(lengths, 64);
  CHECK(plan.total == 333);
  CHECK(plan.max_len == 200);
  REQUIRE(plan.seq_start.size() == lengths.size() + 1);
  std::vector<int> covered(static_cast<std::size_t>(plan.total), 0);
  int previous_q1 = std::numeric_limits<int>::max();
  for (const auto& t : plan.tiles) {
    CHECK(t.q1 <= previous_q1);  // longest causal span first
    previous_q1 = t.q1;
    REQUIRE(t.seq >= 0);
    REQUIRE(t.seq < static_cast<int>(lengths.size()));
    CHECK(t.q1 - t.q0 <= 64);
    CHECK(t.q0 < t.q1);
    CHECK(t.q1 <= lengths[static_cast<std::size_t>(t.seq)]);
    for (int i = t.q0; i < t.q1; ++i) ++covered[static_cast<std::size_t>(plan.seq_start[static_cast<std::size_t>(t.seq)] + i)];
  }
  for (int c : covered) CHECK(c == 1);
  CHECK_THROWS_AS(cuda::detail::make_plan(std::vector<int>{4, 0}, 64), invalid_argument);

  for (int window : {0, 1, 7, 50}) {
    for (int sinks : {0, 2, 9}) {
      double brute = 0;
      for (int i = 0; i < 120; ++i) {
        long long row = 0;
        for (int j = 0; j <= i; ++j) row += cuda::key_visible(i, j, window, sinks);
        CHECK(cuda::detail::visible_keys(i, window, sinks) == row);
        brute += static_cast<double>(row);
      }
      CHECK(cuda::detail::visible_pairs(120, window, sinks) == brute);
    }
  }
  cuda::ops::AttentionProblem p;
  p.num_q_heads = 6;
  p.num_kv_heads = 2;
  p.head_dim = 64;
  p.lengths = {100, 50};
  p.windows = {0, 10};  // KV head 0 full, head 1 SWA, both sequences
  p.sinks = {2};
  const double expected = 3.0 * (cuda::detail::visible_pairs(100, 0, 0) + cuda::detail::visible_pairs(100, 10, 2) +
                                 cuda::detail::visible_pairs(50, 0, 0) + cuda::detail::visible_pairs(50, 10, 2));
  CHECK(p.visible_pairs() == expected);
  CHECK(p.flops() == 4.0 * 64 * expected);
  CHECK(p.rows() == 150);
}

TEST_CASE("decode attention: the key chunks cover the head that reads the most keys, no more") {
  const int chunk = cuda::detail::decode_chunk_keys();
  CHECK(chunk >= 32);
  for (int position : {0, 1, chunk - 2, chunk - 1, chunk, 3 * chunk + 5, 10000})
    for (int sinks : {0, 4})
      for (const std::vector<int>& windows : {std::vector<int>{0, 0}, std::vector<int>{64, 64, 7},
                                               std::vector<int>{64, 0, 64}, std::vector<int>{1}}) {
        int longest = 0;
        for (int w : windows) {
          const int count = kv::reads(w > 0, w, sinks, position).count();
          CHECK(count == cuda::detail::visible_keys(position, w, sinks));
          longest = std::max(longest, count);
        }
        const int chunks = cuda::detail::decode_chunks(windows, sinks, position);
        INFO("position " << position << ", sinks " << sinks << ", longest head " << longest);
        CHECK(chunks >= 1);
        CHECK(static_cast<long long>(chunks) * chunk >= longest);       // every key in some block
        CHECK(static_cast<long long>(chunks - 1) * chunk < longest);    // no block without keys for all heads
      }
}

TEST_CASE("CUDA options and weights are validated before any device is touched") {
  const auto model = test::tiny_model(test::tiny_config(model::Arch::llama, 2), test::seed(502));
  cuda::Options bad;
  bad.query_tile = 48;
  CHECK_THROWS_AS(cuda::Backend(model, bad), invalid_argument);
  bad = {};
  bad.key_tile = 128;
  CHECK_THROWS_AS(cuda::Backend(model, bad), invalid_argument);
  bad = {};
  bad.row_chunk = 0;
  CHECK_THROWS_AS(cuda::Backend(model, bad), invalid_argument);
  bad = {};
  bad.attention = cuda::AttentionKernel::tensor_core;  // head_dim 8
  CHECK_THROWS_AS(cuda::Backend(model, bad), invalid_argument);
  auto broken = model;
  broken.weights.layers[1].wk.rows -= 1;
  try {
    cuda::Backend b{broken};
    FAIL("expected invalid_argument");
  } catch (const invalid_argument& e) {
    CHECK(std::string(e.what()).find("blk.1.attn_k") != std::string::npos);
  }
  auto missing_bias = test::tiny_model(test::tiny_config(model::Arch::qwen2), test::seed(504));
  missing_bias.weights.layers[0].bv.clear();
  CHECK_THROWS_AS(cuda::Backend{missing_bias}, invalid_argument);
  auto stray_norm = model;  // llama: no Q/K norm expected
  stray_norm.weights.layers[0].q_norm.assign(8, 1.0f);
  CHECK_THROWS_AS(cuda::Backend{stray_norm}, invalid_argument);
  broken = model;
  broken.weights.layers.pop_back();
  CHECK_THROWS_AS(cuda::Backend{broken}, invalid_argument);
  auto moe = test::tiny_model(test::tiny_moe_config(), test::seed(505));
  moe.weights.layers[0].router.rows -= 1;
  try {
    cuda::Backend b{moe};
    FAIL("expected invalid_argument");
  } catch (const invalid_argument& e) {
    CHECK(std::string(e.what()).find("blk.0.ffn_gate_inp") != std::string::npos);
  }
}

TEST_CASE("a build with BOSCH_REQUIRE_CUDA=ON has a usable CUDA device") {
#if defined(BOSCH_REQUIRE_CUDA) && BOSCH_REQUIRE_CUDA
  std::string why;
  if (!cuda::device_available(&why))
    FAIL("no CUDA device (" << why << "), and this build requires one (BOSCH_REQUIRE_CUDA=ON)");
#else
  MESSAGE("BOSCH_REQUIRE_CUDA is OFF: without a device the device tests print SKIPPED and pass");
#endif
}

TEST_CASE("without a usable GPU every entry point says so with a device_error") {
  std::string why;
  if (cuda::device_available(&why)) {
    const std::string description = cuda::device_description();
    MESSAGE("CUDA device present: " << description);
    CHECK(!description.empty());
    return;
  }
  MESSAGE("no CUDA device (" << why << "): checking the error path");
  CHECK(!why.empty());
  const auto model = test::tiny_model(test::tiny_config(model::Arch::llama, 2), test::seed(503));
  try {
    cuda::Backend backend(model);
    FAIL("constructed a CUDA backend without a device");
  } catch (const device_error& e) {
    const std::string what = e.what();
    MESSAGE("cuda::Backend: " << what);
    CHECK(what.find("no usable CUDA device") != std::string::npos);
  }
  const std::vector<float> x(8, 1.0f), g(4, 1.0f);
  CHECK_THROWS_AS(cuda::ops::rms_norm(x, 2, 4, g, 1e-5f), device_error);
  CHECK_THROWS_AS(cuda::device_description(), device_error);
  CHECK(!cuda::device_available(nullptr, 0));
}
