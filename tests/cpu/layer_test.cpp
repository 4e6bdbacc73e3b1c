// The one decoder layer (cpu/layer.hpp): hooks that only look (inspect, a
// cache that returns the new rows) leave every layer bitwise unchanged and see
// the layer's real queries and keys; the cached attention kernel of decoding
// equals the tiled kernel on the same rows.
//
// Tolerance of the kernel comparison: |cached - tiled| <= 1e-5 * max(1, |tiled|).
// Both are fp32; the cached kernel sums dot products, softmax and P V in a
// plain loop, the tiled one with Eigen GEMMs and an online softmax, so the
// orders differ by ~1e-6 relative for head_dim 8 and <= 40 keys, while a key
// outside the window or a missing sink moves outputs by 1e-2 or more.

#include "test_support.hpp"
#include "tiny_model.hpp"

#include <bosch/cpu/backend.hpp>
#include <bosch/cpu/layer.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <cmath>
#include <doctest/doctest.h>
#include <vector>

using namespace bosch;

TEST_CASE("decoder layer: look-only hooks change nothing and see every layer's queries and keys") {
  for (auto arch : {model::Arch::llama, model::Arch::qwen2, model::Arch::qwen3}) {
    CAPTURE(model::to_string(arch));
    const auto m = test::tiny_model(test::tiny_config(arch, 2), test::seed(200));
    const cpu::Backend backend(m);
    const auto tokens = test::random_tokens(37, m.config.vocab_size, test::seed(201));
    HeadMask mask(m.config.layout());
    mask.set(0, 1, true);
    mask.set(1, 0, true);
    const auto windows = AttentionWindows::from_mask(mask, 7, 2);

    auto plain = backend.embed(tokens);
    backend.run_layers(plain, 0, m.config.num_layers, windows);

    std::vector<int> layers_seen;
    std::vector<float> k_copy;
    cpu::LayerHooks hooks;
    hooks.inspect = [&](const cpu::LayerView& v) {
      layers_seen.push_back(v.layer);
      CHECK(v.rows == 37);
      CHECK(v.windows.size() == 2);
      CHECK(v.windows[0].window == (v.layer == 1 ? 7 : 0));
      CHECK(v.windows[1].window == (v.layer == 0 ? 7 : 0));
    };
    hooks.cache = [&](const cpu::LayerView& v) {
      k_copy.assign(v.k, v.k + static_cast<std::size_t>(v.rows) * v.shape.kv_stride);
      return cpu::KeyValues{v.k, v.v, v.rows};  // the new rows: attention runs as without a cache
    };
    auto hooked = backend.embed(tokens);
    backend.run_layers(hooked, 0, m.config.num_layers, windows, hooks);
    CHECK(hooked.data == plain.data);
    CHECK(layers_seen == std::vector<int>{0, 1});

    // The keys a hook sees are the ones prefill caches (RoPE applied): the
    // last layer's full head 1 keeps all 37 positions, its SWA head 0
    // (window 7, 2 sinks) only positions 0, 1 and 31 .. 36, the ones the
    // next query (position 37) can see.
    const auto state = backend.prefill(tokens, windows);
    const int last = m.config.num_layers - 1, hd = m.config.head_dim;
    const std::size_t stride = static_cast<std::size_t>(m.config.num_kv_heads) * hd;
    for (int g = 0; g < 2; ++g)
      for (int j = 0; j < 37; ++j) {
        CAPTURE(g);
        CAPTURE(j);
        const float* key = state.cache.key(last, g, j);
        const bool held = windows.is_swa(last, g) ? (j < 2 || j > 37 - 7) : true;
        REQUIRE((key != nullptr) == held);
        if (key)
          CHECK(std::vector<float>(key, key + hd) ==
                std::vector<float>(k_copy.begin() + static_cast<std::ptrdiff_t>(j * stride + g * hd),
                                   k_copy.begin() + static_cast<std::ptrdiff_t>(j * stride + (g + 1) * hd)));
      }
  }
}

TEST_CASE("decoder layer: the cached kernel equals the tiled kernel on the last rows") {
  boost::random::mt19937_64 rng(test::seed(210));
  boost::random::uniform_real_distribution<double> u(-1.5, 1.5);
  cpu::AttentionShape shape;
  shape.num_heads = 4;
  shape.num_kv_heads = 2;
  shape.head_dim = 8;
  shape.q_stride = shape.out_stride = 4 * 8;
  shape.kv_stride = 2 * 8;
  const int n = 40;
  auto fill = [&](std::size_t count) {
    std::vector<float> x(count);
    for (auto& f : x) f = static_cast<float>(u(rng));
    return x;
  };
  const auto q = fill(n * shape.q_stride), k = fill(n * shape.kv_stride), v = fill(n * shape.kv_stride);
  const int offsets[2] = {0, n};
  for (const auto& windows : {std::vector<cpu::HeadWindow>{{}, {}}, std::vector<cpu::HeadWindow>{{5, 0}, {}},
                              std::vector<cpu::HeadWindow>{{6, 3}, {9, 1}}}) {
    std::vector<float> tiled(n * shape.out_stride);
    cpu::attention(q.data(), k.data(), v.data(), tiled.data(), offsets, shape, windows, cpu::AttentionTiles{16, 8});
    for (int rows : {1, 3, 40}) {
      CAPTURE(rows);
      const int start = n - rows;
      std::vector<float> cached(static_cast<std::size_t>(rows) * shape.out_stride);
      cpu::attention_cached(q.data() + static_cast<std::size_t>(start) * shape.q_stride, rows, start, k.data(),
                            v.data(), cached.data(), shape, windows);
      double worst = 0;
      for (std::size_t i = 0; i < cached.size(); ++i) {
        const double ref = tiled[static_cast<std::size_t>(start) * shape.out_stride + i];
        worst = std::max(worst, std::abs(cached[i] - ref) / std::max(1.0, std::abs(ref)));
      }
      CHECK(worst <= 1e-5);
    }
  }
}
