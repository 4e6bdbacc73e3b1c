// The real models: the stories260K fixture (all F32) and the default
// SmolLM2-135M-Instruct Q4_1 GGUF (Q4_1 + Q8_0 tensors) load with the
// configuration their documentation states; load time and fp32 memory are
// reported.
#include "test_support.hpp"

#include <bosch/model/loader.hpp>
#include <bosch/model/model.hpp>

#include <chrono>
#include <cmath>
#include <cstring>

using namespace bosch;
using namespace bosch::model;

namespace {

/// Mean and standard deviation of a tensor, and whether all values are finite.
struct Stats {
  double mean = 0, sd = 0;
  bool finite = true;
};
Stats stats(const std::vector<float>& v) {
  Stats s;
  double sum = 0, sq = 0;
  for (float x : v) {
    s.finite = s.finite && std::isfinite(x);
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  s.mean = sum / static_cast<double>(v.size());
  s.sd = std::sqrt(std::max(0.0, sq / static_cast<double>(v.size()) - s.mean * s.mean));
  return s;
}

}  // namespace

TEST_CASE("stories260K loads with the configuration of its README") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  if (path.empty()) return;
  const Model m = load(path);
  const Config& c = m.config;
  CHECK(c.arch == Arch::llama);
  CHECK(c.num_layers == 5);
  CHECK(c.hidden_size == 64);
  CHECK(c.num_heads == 8);
  CHECK(c.num_kv_heads == 4);
  CHECK(c.head_dim == 8);
  CHECK(c.intermediate_size == 172);
  CHECK(c.vocab_size == 512);
  CHECK(c.rms_eps == doctest::Approx(1e-5).epsilon(1e-6));
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.rope_style == RopeStyle::interleaved);
  CHECK(c.rope_scaling.type == "none");
  // The file stores output.weight as a byte copy of token_embd: loaded once, tied.
  CHECK(c.tie_embeddings);
  CHECK(m.weights.lm_head.empty());
  CHECK_FALSE(c.qkv_bias);
  CHECK_FALSE(c.qk_norm);
  // The file's metadata says context_length 128 (the README's 512 is the
  // training context of the original llama2.c checkpoint).
  CHECK(c.max_position == 128);
  CHECK(c.layout().num_kv_heads == 4);
  CHECK(m.tokenizer.vocab_size() == 512);
  CHECK(m.tokenizer.bos() == 1);
  CHECK(m.tokenizer.eos() == 2);
  // The first embedding values equal the raw F32 bytes of token_embd.weight.
  const gguf::File f(path);
  const auto* t = f.find_tensor("token_embd.weight");
  REQUIRE(t != nullptr);
  std::vector<float> raw(64);
  std::memcpy(raw.data(), f.tensor_data(*t).data(), 64 * sizeof(float));
  CHECK(std::vector<float>(m.weights.embedding.data.begin(), m.weights.embedding.data.begin() + 64) == raw);
  CHECK(m.weights.layers[4].wk.rows == 32);
  CHECK(m.weights.layers[4].wk.cols == 64);
  CHECK(m.weights.layers[2].w_down.rows == 64);
  CHECK(m.weights.layers[2].w_down.cols == 172);
  CHECK(m.parameter_count() == 512 * 64 + 64 + 5 * (64 * 2 + 64 * 64 * 2 + 32 * 64 * 2 + 172 * 64 * 3));
  CHECK(m.fingerprint.size() == 16);
  CHECK(load(path).fingerprint == m.fingerprint);
}

TEST_CASE("SmolLM2-135M-Instruct (Q4_1 + Q8_0 GGUF) loads") {
  const auto path = bosch::test::default_model();
  if (path.empty()) return;
  {
    const gguf::File f(path);
    std::size_t q4_1 = 0, q8_0 = 0, f32 = 0;
    for (const auto& t : f.tensors()) {
      q4_1 += t.ggml_type() == GgmlType::q4_1;
      q8_0 += t.ggml_type() == GgmlType::q8_0;
      f32 += t.ggml_type() == GgmlType::f32;
    }
    MESSAGE("SmolLM2 tensors: " << q4_1 << " Q4_1, " << q8_0 << " Q8_0, " << f32 << " F32");
    CHECK(q4_1 > 0);
    CHECK(q8_0 > 0);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const Model m = load(path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Config& c = m.config;
  CHECK(c.arch == Arch::llama);
  CHECK(c.num_layers == 30);
  CHECK(c.hidden_size == 576);
  CHECK(c.num_heads == 9);
  CHECK(c.num_kv_heads == 3);
  CHECK(c.head_dim == 64);
  CHECK(c.intermediate_size == 1536);
  CHECK(c.vocab_size == 49152);
  CHECK(c.rope_theta == 100000.0);
  CHECK(c.max_position == 8192);
  CHECK(c.rope_style == RopeStyle::interleaved);
  CHECK(c.tie_embeddings);
  CHECK(m.tokenizer.vocab_size() == 49152);
  const double mib = static_cast<double>(m.weights.bytes()) / (1 << 20);
  MESSAGE("SmolLM2 load: " << seconds << " s (file " << std::filesystem::file_size(path) / (1 << 20)
                           << " MiB), fp32 weights " << mib << " MiB, " << m.parameter_count()
                           << " parameters, fingerprint " << m.fingerprint);
  // Tied embedding counted once; per layer 2 norms, Q and O 576x576, K and V
  // 192x576, three FFN matrices 1536x576.
  const std::uint64_t per_layer = 2 * 576 + 2 * 576 * 576 + 2 * 192 * 576 + 3 * 1536 * 576;
  CHECK(m.parameter_count() == 49152ull * 576 + 576 + 30 * per_layer);  // 134,515,008
  // Dequantized weights look like trained weights: finite, centred, with a
  // spread typical of these layers (not zeros or garbage from a misplaced block).
  const Stats e = stats(m.weights.embedding.data);
  CHECK(e.finite);
  CHECK(std::abs(e.mean) < 0.01);
  CHECK(e.sd > 0.01);
  CHECK(e.sd < 1.0);
  for (int l : {0, 15, 29}) {
    CAPTURE(l);
    const auto& L = m.weights.layers[static_cast<std::size_t>(l)];
    for (const auto* mat : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
      const Stats s = stats(mat->data);
      CHECK(s.finite);
      CHECK(std::abs(s.mean) < 0.02);
      CHECK(s.sd > 0.005);
      CHECK(s.sd < 1.0);
    }
    CHECK(stats(L.attn_norm).finite);
  }
}
