// The real models: the stories260K fixture (all F32) and the default
// SmolLM2-135M-Instruct Q4_1 GGUF (Q4_1 + Q8_0 tensors) load with the
// configuration their documentation states; load time and fp32 memory are
// reported. Qwen2.5-Coder-0.5B-Instruct (Q4_K_M: Q5_0, Q8_0, Q6_K, Q4_K) is
// read without loading (header, tensor directory, a few dequantized rows):
// its forward is checked outside CI by scripts/check-qwen (docs/models.md).
#include "test_support.hpp"

#include <bosch/model/dequant.hpp>
#include <bosch/model/loader.hpp>
#include <bosch/model/model.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

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

TEST_CASE("Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF): header, tensors and dequantized rows") {
  const auto path = bosch::test::qwen_model();
  if (path.empty()) return;
  const gguf::File f(path);  // memory-mapped; no weights are loaded
  CHECK(f.file_size() == 491400064);
  CHECK(f.get_string("general.architecture") == "qwen2");
  CHECK(f.get_int("general.file_type") == 15);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  const Config c = config_from_gguf(f);
  CHECK(c.arch == Arch::qwen2);
  CHECK(c.num_layers == 24);
  CHECK(c.hidden_size == 896);
  CHECK(c.intermediate_size == 4864);
  CHECK(c.num_heads == 14);
  CHECK(c.num_kv_heads == 2);
  CHECK(c.head_dim == 64);
  CHECK(c.vocab_size == 151936);
  CHECK(c.max_position == 32768);
  CHECK(c.rope_theta == 1e6);
  CHECK(c.rope_style == RopeStyle::neox);
  CHECK(c.rope_scaling.type == "none");
  CHECK(c.rms_eps == doctest::Approx(1e-6).epsilon(1e-6));
  CHECK(c.qkv_bias);
  CHECK_FALSE(c.qk_norm);
  CHECK_FALSE(c.tie_embeddings);  // output.weight is stored (Q8_0), token_embd is Q5_0
  CHECK(c.layout().size() == 48);

  // Every tensor with its GGUF shape (fastest dimension first) and the type mix
  // of llama.cpp's Q4_K_M for this model (K-quants need rows of 256: only
  // ffn_down's 4864 columns qualify; the rest falls back to Q5_0 / Q8_0).
  std::map<std::string, std::vector<std::uint64_t>> want = {
      {"token_embd.weight", {896, 151936}}, {"output.weight", {896, 151936}}, {"output_norm.weight", {896}}};
  const std::map<std::string, std::vector<std::uint64_t>> per_layer = {
      {"attn_norm.weight", {896}},         {"attn_q.weight", {896, 896}},      {"attn_q.bias", {896}},
      {"attn_k.weight", {896, 128}},       {"attn_k.bias", {128}},             {"attn_v.weight", {896, 128}},
      {"attn_v.bias", {128}},              {"attn_output.weight", {896, 896}}, {"ffn_norm.weight", {896}},
      {"ffn_gate.weight", {896, 4864}},    {"ffn_up.weight", {896, 4864}},     {"ffn_down.weight", {4864, 896}}};
  for (int l = 0; l < 24; ++l)
    for (const auto& [name, shape] : per_layer) want["blk." + std::to_string(l) + "." + name] = shape;
  std::map<std::string, int> types;
  CHECK(f.tensors().size() == want.size());
  for (const auto& t : f.tensors()) {
    CAPTURE(t.name);
    REQUIRE(want.count(t.name) == 1);
    CHECK(t.shape == want[t.name]);
    ++types[type_name(t.type)];
  }
  CHECK(types == std::map<std::string, int>{{"F32", 121}, {"Q4_K", 12}, {"Q5_0", 133}, {"Q6_K", 12}, {"Q8_0", 13}});

  // The first row of one tensor of each quantized type, dequantized by bosch,
  // equals the gguf Python package's dequantizer (scripts/check-qwen --vectors):
  // the first values, the row sum and the largest magnitude.
  struct Row {
    const char* tensor;
    GgmlType type;
    std::size_t cols;
    float first[4];
    double sum, max_abs;
  };
  const Row rows[] = {
      {"blk.0.attn_q.weight", GgmlType::q5_0, 896,
       {-0.01084136962890625f, -0.0216827392578125f, 0.004065513610839844f, 0.005420684814453125f},
       0.4659299850463867, 0.07208251953125},
      {"blk.0.attn_v.weight", GgmlType::q8_0, 896,
       {0.009490013122558594f, 0.011263847351074219f, 0.009312629699707031f, 0.00044345855712890625f},
       0.035273969173431396, 0.026675939559936523},
      {"blk.0.ffn_down.weight", GgmlType::q6_k, 4864,
       {-0.0018410682678222656f, -0.0018410682678222656f, 0.02945709228515625f, 0.009205341339111328f},
       -1.4057015180587769, 0.173126220703125},
      {"blk.23.ffn_down.weight", GgmlType::q4_k, 4864,
       {0.0030891895294189453f, 0.010632097721099854f, 0.013146400451660156f, 0.0005748867988586426f},
       0.24150753021240234, 0.036950111389160156},
      {"token_embd.weight", GgmlType::q5_0, 896,
       {-0.01709747314453125f, 0.02469635009765625f, 0.022796630859375f, 0.0113983154296875f}, 0.458465576171875,
       0.051025390625},
      {"output.weight", GgmlType::q8_0, 896,
       {-0.016516685485839844f, 0.02513408660888672f, 0.022979736328125f, 0.012207984924316406f},
       0.4596714973449707, 0.05102038383483887},
  };
  for (const Row& r : rows) {
    CAPTURE(r.tensor);
    const auto* t = f.find_tensor(r.tensor);
    REQUIRE(t != nullptr);
    REQUIRE(t->ggml_type() == r.type);
    REQUIRE(t->shape[0] == r.cols);
    const auto bytes = storage_bytes(t->type, r.cols);
    REQUIRE(bytes.has_value());
    std::vector<float> row(r.cols);
    dequantize(r.type, f.tensor_data(*t).subspan(0, *bytes), row);
    for (int i = 0; i < 4; ++i) CHECK(row[static_cast<std::size_t>(i)] == doctest::Approx(r.first[i]).epsilon(1e-6));
    double sum = 0, max_abs = 0;
    for (float x : row) {
      sum += x;
      max_abs = std::max(max_abs, static_cast<double>(std::abs(x)));
    }
    CHECK(sum == doctest::Approx(r.sum).epsilon(1e-5));
    CHECK(max_abs == doctest::Approx(r.max_abs).epsilon(1e-6));
  }
}
