// Loading models written by tests/model/writers.hpp: GGUF (each architecture,
// each tensor type, v2/v3, alignments, tied/untied) and Hugging Face
// directories (F32/F16/BF16, single file and shards) load back to the
// weights that were written: exactly for F32, within the rounding of the
// stored type otherwise. Also the fingerprint.
#include "test_support.hpp"
#include "writers.hpp"

#include <bosch/error.hpp>
#include <bosch/model/hf_config.hpp>
#include <bosch/model/loader.hpp>
#include <bosch/model/model.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <span>
#include <string_view>
#include <tuple>

using namespace bosch;
using namespace bosch::model;
namespace w = bosch::test::writers;

namespace {

/// Max |a - b| over two float vectors of equal size (infinity if sizes differ).
double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

/// Calls f(name, loaded, written) for every tensor pair of two Weights; also
/// checks that matrices agree in shape.
template <class F>
void for_each_tensor(const Weights& got, const Weights& want, F&& f) {
  auto mat = [&](const std::string& n, const Matrix& a, const Matrix& b) {
    CAPTURE(n);
    CHECK(a.rows == b.rows);
    CHECK(a.cols == b.cols);
    f(n, a.data, b.data);
  };
  mat("embedding", got.embedding, want.embedding);
  mat("lm_head", got.lm_head, want.lm_head);
  f("final_norm", got.final_norm, want.final_norm);
  REQUIRE(got.layers.size() == want.layers.size());
  for (std::size_t l = 0; l < got.layers.size(); ++l) {
    const auto &a = got.layers[l], &b = want.layers[l];
    const std::string p = "layer " + std::to_string(l) + " ";
    f(p + "attn_norm", a.attn_norm, b.attn_norm);
    mat(p + "wq", a.wq, b.wq);
    mat(p + "wk", a.wk, b.wk);
    mat(p + "wv", a.wv, b.wv);
    mat(p + "wo", a.wo, b.wo);
    f(p + "bq", a.bq, b.bq);
    f(p + "bk", a.bk, b.bk);
    f(p + "bv", a.bv, b.bv);
    f(p + "q_norm", a.q_norm, b.q_norm);
    f(p + "k_norm", a.k_norm, b.k_norm);
    f(p + "ffn_norm", a.ffn_norm, b.ffn_norm);
    mat(p + "w_gate", a.w_gate, b.w_gate);
    mat(p + "w_up", a.w_up, b.w_up);
    mat(p + "w_down", a.w_down, b.w_down);
    mat(p + "router", a.router, b.router);
    mat(p + "gate_exps", a.gate_exps, b.gate_exps);
    mat(p + "up_exps", a.up_exps, b.up_exps);
    mat(p + "down_exps", a.down_exps, b.down_exps);
  }
}

void check_exact(const Weights& got, const Weights& want) {
  for_each_tensor(got, want, [](const std::string& n, const std::vector<float>& a, const std::vector<float>& b) {
    CAPTURE(n);
    CHECK(a == b);
  });
}

void check_config(const Config& got, const Config& want) {
  CHECK(got.arch == want.arch);
  CHECK(got.vocab_size == want.vocab_size);
  CHECK(got.hidden_size == want.hidden_size);
  CHECK(got.intermediate_size == want.intermediate_size);
  CHECK(got.num_layers == want.num_layers);
  CHECK(got.num_heads == want.num_heads);
  CHECK(got.num_kv_heads == want.num_kv_heads);
  CHECK(got.head_dim == want.head_dim);
  CHECK(got.max_position == want.max_position);
  CHECK(got.rms_eps == doctest::Approx(want.rms_eps).epsilon(1e-6));  // stored as f32 in GGUF
  CHECK(got.rope_theta == doctest::Approx(want.rope_theta).epsilon(1e-6));
  CHECK(got.tie_embeddings == want.tie_embeddings);
  CHECK(got.qkv_bias == want.qkv_bias);
  CHECK(got.qk_norm == want.qk_norm);
  CHECK(got.rope_scaling.type == want.rope_scaling.type);
  CHECK(got.moe.num_experts == want.moe.num_experts);
  CHECK(got.moe.num_experts_used == want.moe.num_experts_used);
  CHECK(got.moe.expert_intermediate_size == want.moe.expert_intermediate_size);
  CHECK(got.moe.norm_topk_prob == want.moe.norm_topk_prob);
  CHECK(got.moe.sparse_layers == want.moe.sparse_layers);
}

}  // namespace

TEST_CASE("GGUF F32 models of every architecture load back exactly") {
  w::TempDir dir("load-gguf");
  for (Arch arch : {Arch::llama, Arch::qwen2, Arch::qwen3}) {
    for (bool tie : {false, true}) {
      CAPTURE(to_string(arch));
      CAPTURE(tie);
      w::TinySpec spec;
      spec.arch = arch;
      spec.tie_embeddings = tie;
      if (arch == Arch::qwen3) spec.head_dim = 16;  // Qwen3: heads * head_dim != hidden
      const auto m = w::random_model(spec, bosch::test::seed(20 + static_cast<int>(arch)));
      const auto path = dir / (std::string(to_string(arch)) + (tie ? "-tied" : "") + ".gguf");
      w::write_gguf(m, path);
      const Checkpoint ck = read_checkpoint(path);
      check_config(ck.config, m.config);
      CHECK(ck.config.rope_style == (arch == Arch::llama ? RopeStyle::interleaved : RopeStyle::neox));
      CHECK(ck.config.name == m.config.name);
      check_exact(ck.weights, m.weights);
      CHECK(ck.weights.lm_head.empty() == tie);
      CHECK(ck.tokenizer.tokens == m.tokenizer.tokens);
      CHECK(ck.source == std::filesystem::absolute(path));
      CHECK(ck.fingerprint.size() == 16);
      CHECK(ck.weights.bytes() == m.weights.bytes());
    }
  }
}

TEST_CASE("GGUF quantized and half tensors load within the stored type's rounding") {
  w::TempDir dir("load-quant");
  struct Case {
    GgmlType type;
    int hidden, ffn;
  };
  // K-quants need rows that are multiples of 256.
  const Case cases[] = {{GgmlType::f16, 32, 64},  {GgmlType::bf16, 32, 64}, {GgmlType::q8_0, 32, 64},
                        {GgmlType::q4_0, 32, 64}, {GgmlType::q4_1, 32, 64}, {GgmlType::q4_k, 256, 256},
                        {GgmlType::q6_k, 256, 256}};
  for (const Case& c : cases) {
    CAPTURE(type_name(static_cast<std::uint32_t>(c.type)));
    w::TinySpec spec;
    spec.hidden = c.hidden;
    spec.intermediate = c.ffn;
    spec.heads = 4;
    spec.kv_heads = 2;
    spec.layers = 1;
    const auto m = w::random_model(spec, bosch::test::seed(30));
    w::GgufOptions opt;
    opt.matrix_type = c.type;
    opt.embedding_type = c.type;
    const auto path = dir / "q.gguf";
    w::write_gguf(m, path, opt);
    const Checkpoint ck = read_gguf(path);
    // Each matrix equals exactly the dequantization of what was written (the
    // loader puts every block in its place), and is within the type's error
    // bound of the original values.
    for_each_tensor(ck.weights, m.weights,
                    [&](const std::string& n, const std::vector<float>& got, const std::vector<float>& want) {
                      CAPTURE(n);
                      if (want.empty()) {
                        CHECK(got.empty());
                        return;
                      }
                      const bool matrix = n.find("norm") == std::string::npos;
                      if (!matrix) {
                        CHECK(got == want);  // norms stay F32
                        return;
                      }
                      std::vector<float> expect(want.size());
                      dequantize(c.type, w::quantize(c.type, want), expect);
                      CHECK(got == expect);
                      double amax = 0;
                      for (float x : want) amax = std::max(amax, std::abs(static_cast<double>(x)));
                      // Loosest per-type bound of dequant_test.cpp, over the whole tensor.
                      CHECK(max_diff(got, want) <= amax * (2.0 / 15 + 2.0 / 63) + 1e-6);
                    });
  }
}

TEST_CASE("GGUF v2, other alignments, vocab size from the token list, padded embeddings") {
  w::TempDir dir("load-variants");
  w::TinySpec spec;
  spec.extra_vocab = 5;
  const auto m = w::random_model(spec, bosch::test::seed(40));
  for (std::uint32_t version : {2u, 3u})
    for (std::uint32_t alignment : {32u, 128u})
      for (bool vocab_key : {true, false}) {
        CAPTURE(version);
        CAPTURE(alignment);
        w::GgufOptions opt;
        opt.version = version;
        opt.alignment = alignment;
        opt.write_vocab_size = vocab_key;
        w::write_gguf(m, dir / "v.gguf", opt);
        const Checkpoint ck = read_gguf(dir / "v.gguf");
        CHECK(ck.config.vocab_size == m.config.vocab_size);
        check_exact(ck.weights, m.weights);
      }
}

TEST_CASE("GGUF output.weight byte-identical to the embedding is loaded once, as tied") {
  w::TempDir dir("load-tied-copy");
  auto m = w::random_model({}, bosch::test::seed(41));
  m.weights.lm_head = m.weights.embedding;
  w::write_gguf(m, dir / "t.gguf");
  const Checkpoint ck = read_gguf(dir / "t.gguf");
  CHECK(ck.config.tie_embeddings);
  CHECK(ck.weights.lm_head.empty());
  CHECK(ck.weights.output().data == m.weights.embedding.data);
}

TEST_CASE("Hugging Face directories load back: F32 exact, F16/BF16 within rounding, shards") {
  w::TempDir dir("load-hf");
  for (Arch arch : {Arch::llama, Arch::qwen2, Arch::qwen3}) {
    CAPTURE(to_string(arch));
    w::TinySpec spec;
    spec.arch = arch;
    if (arch == Arch::qwen3) spec.head_dim = 16;
    const auto m = w::random_model(spec, bosch::test::seed(50 + static_cast<int>(arch)));
    Config want = m.config;
    want.rope_style = RopeStyle::neox;  // HF checkpoints rotate halves
    for (const char* dtype : {"F32", "F16", "BF16"}) {
      for (int shards : {1, 3}) {
        CAPTURE(dtype);
        CAPTURE(shards);
        const auto d = dir / (std::string(to_string(arch)) + dtype + std::to_string(shards));
        w::HfOptions opt;
        opt.dtype = dtype;
        opt.shards = shards;
        w::write_hf(m, d, opt);
        CHECK(std::filesystem::exists(d / "model.safetensors.index.json") == (shards > 1));
        const Checkpoint ck = read_checkpoint(d);
        check_config(ck.config, want);
        CHECK(ck.config.rope_style == RopeStyle::neox);
        CHECK(ck.files.size() == static_cast<std::size_t>(2 + (shards > 1 ? 1 + shards : 1)));
        const double rel = std::string(dtype) == "F32" ? 0.0 : std::string(dtype) == "F16" ? std::ldexp(1.0, -11)
                                                                                             : std::ldexp(1.0, -8);
        for_each_tensor(ck.weights, m.weights,
                        [&](const std::string& n, const std::vector<float>& got, const std::vector<float>& exp) {
                          CAPTURE(n);
                          REQUIRE(got.size() == exp.size());
                          for (std::size_t i = 0; i < got.size(); ++i)
                            if (std::abs(got[i] - exp[i]) > std::abs(exp[i]) * rel + 1e-7) {
                              CHECK(got[i] == exp[i]);
                              break;
                            }
                        });
      }
    }
  }
}

TEST_CASE("Hugging Face tie_word_embeddings: explicit, or inferred from lm_head's absence") {
  w::TempDir dir("load-hf-tie");
  auto m = w::random_model({}, bosch::test::seed(60));  // untied: lm_head present
  SUBCASE("explicit true ignores lm_head") {
    w::write_hf(m, dir / "a");
    auto cfg = nlohmann::json::parse(w::read_file(dir / "a" / "config.json"));
    cfg["tie_word_embeddings"] = true;
    w::write_text(dir / "a" / "config.json", cfg.dump());
    const Checkpoint ck = read_hf(dir / "a");
    CHECK(ck.config.tie_embeddings);
    CHECK(ck.weights.lm_head.empty());
    CHECK(read_config(dir / "a").tie_embeddings);
  }
  SUBCASE("unset and absent lm_head means tied") {
    w::HfOptions opt;
    opt.omit = {"lm_head.weight"};
    w::write_hf(m, dir / "b", opt);
    auto cfg = nlohmann::json::parse(w::read_file(dir / "b" / "config.json"));
    cfg.erase("tie_word_embeddings");
    w::write_text(dir / "b" / "config.json", cfg.dump());
    CHECK(read_hf(dir / "b").config.tie_embeddings);
    CHECK(read_config(dir / "b").tie_embeddings);
  }
}

TEST_CASE("read_config reads only the configuration") {
  w::TempDir dir("read-config");
  const auto m = w::random_model({}, bosch::test::seed(61));
  w::write_gguf(m, dir / "m.gguf");
  w::write_hf(m, dir / "hf");
  check_config(read_config(dir / "m.gguf"), m.config);
  Config hf = m.config;
  hf.rope_style = RopeStyle::neox;
  check_config(read_config(dir / "hf"), hf);
  CHECK(read_config(dir / "m.gguf").layout().num_kv_heads == 2);
}

TEST_CASE("load() builds the tokenizer and records source and fingerprint") {
  w::TempDir dir("load-model");
  const auto m = w::random_model({}, bosch::test::seed(62));
  w::write_gguf(m, dir / "m.gguf");
  w::write_hf(m, dir / "hf");
  const Model g = load(dir / "m.gguf");
  CHECK(g.tokenizer.vocab_size() == static_cast<int>(m.tokenizer.tokens.size()));
  CHECK(g.tokenizer.eos() == m.tokenizer.eos);
  CHECK(g.source == std::filesystem::absolute(dir / "m.gguf"));
  CHECK(g.parameter_count() == m.weights.bytes() / 4);
  const Model h = load(dir / "hf");
  CHECK(h.tokenizer.vocab_size() == static_cast<int>(m.tokenizer.tokens.size()));
  CHECK(h.config.rope_style == RopeStyle::neox);
  CHECK(h.fingerprint != g.fingerprint);
}

TEST_CASE("fingerprints are stable, path-independent and content-sensitive") {
  w::TempDir dir("fingerprint");
  const auto m = w::random_model({}, bosch::test::seed(63));
  const auto bytes = w::write_gguf(m, dir / "a.gguf");
  w::write_file(dir / "b.gguf", bytes);
  const std::string fa = fingerprint({dir / "a.gguf"});
  CHECK(fa.size() == 16);
  CHECK(fa.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(fingerprint({dir / "b.gguf"}) == fa);
  CHECK(read_gguf(dir / "b.gguf").fingerprint == fa);
  auto changed = bytes;
  changed[bytes.size() / 2] ^= std::byte{1};
  w::write_file(dir / "c.gguf", changed);
  CHECK(fingerprint({dir / "c.gguf"}) != fa);  // small files are hashed whole
  auto longer = bytes;
  longer.push_back(std::byte{0});
  w::write_file(dir / "d.gguf", longer);
  CHECK(fingerprint({dir / "d.gguf"}) != fa);
  CHECK(fingerprint({dir / "a.gguf", dir / "b.gguf"}) != fa);
  // Known values: XXH64's reference vectors, and an empty file: XXH64 of its
  // size (0) and content digest, 8 bytes each.
  auto bytes_of = [](std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); };
  CHECK(xxh64(bytes_of("")) == 0xef46db3751d8e999ull);
  CHECK(xxh64(bytes_of("abc")) == 0x44bc2cf5ad770999ull);
  w::write_file(dir / "empty", w::Bytes{});
  std::vector<std::byte> record(8, std::byte{0});
  const std::uint64_t empty = 0xef46db3751d8e999ull;
  for (int i = 0; i < 8; ++i) record.push_back(static_cast<std::byte>((empty >> (8 * i)) & 0xff));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(xxh64(record)));
  CHECK(fingerprint({dir / "empty"}) == hex);
}

TEST_CASE("fingerprints cover every byte of a large file") {
  // Before: a file over 1 MiB was fingerprinted by sampling about 256 KB, so a
  // byte between the samples (a changed weight) left it unchanged.
  w::TempDir dir("fingerprint-large");
  w::Bytes big(std::size_t{24} << 20);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
  w::write_file(dir / "a.gguf", big);
  const std::string fa = fingerprint({dir / "a.gguf"});
  CHECK(fingerprint({dir / "a.gguf"}) == fa);  // cached: the same
  for (const std::size_t at : {std::size_t{70} << 10, big.size() / 2 + 12345, big.size() - (100u << 10)}) {
    CAPTURE(at);
    auto changed = big;
    changed[at] ^= std::byte{0x40};
    w::write_file(dir / "b.gguf", changed);
    CHECK(fingerprint({dir / "b.gguf"}) != fa);
  }
  // A file rewritten in place (same path and size, new content) is hashed again.
  auto changed = big;
  changed[big.size() / 3] ^= std::byte{1};
  std::filesystem::last_write_time(dir / "a.gguf", std::filesystem::last_write_time(dir / "a.gguf") -
                                                       std::chrono::seconds(10));
  const std::string before = fingerprint({dir / "a.gguf"});
  w::write_file(dir / "a.gguf", changed);
  CHECK(fingerprint({dir / "a.gguf"}) != before);
}

namespace {

/// A tiny Qwen3-MoE: 3 layers (layer 1 dense), 4 experts of 16, top-2.
w::TinySpec moe_spec() {
  w::TinySpec spec;
  spec.arch = Arch::qwen3moe;
  spec.layers = 3;
  spec.head_dim = 16;  // heads * head_dim != hidden, as in Qwen3
  spec.dense_layers = {1};
  return spec;
}

}  // namespace

TEST_CASE("Qwen3-MoE GGUF files load back exactly: 3-D expert tensors, dense layers, norm_topk_prob") {
  w::TempDir dir("load-moe-gguf");
  for (bool norm : {true, false})
    for (bool tie : {false, true}) {
      CAPTURE(norm);
      CAPTURE(tie);
      w::TinySpec spec = moe_spec();
      spec.norm_topk_prob = norm;
      spec.tie_embeddings = tie;
      const auto m = w::random_model(spec, bosch::test::seed(70));
      w::write_gguf(m, dir / "moe.gguf");
      const Checkpoint ck = read_checkpoint(dir / "moe.gguf");
      check_config(ck.config, m.config);
      CHECK(ck.config.moe.sparse_layers == std::vector<bool>{true, false, true});
      CHECK(ck.config.qk_norm);
      CHECK(ck.config.rope_style == RopeStyle::neox);
      check_exact(ck.weights, m.weights);
      CHECK(ck.weights.layers[0].w_gate.empty());
      CHECK(ck.weights.layers[1].router.empty());
      CHECK(ck.weights.layers[2].gate_exps.rows == 4 * 16);
      CHECK(ck.weights.bytes() == m.weights.bytes());
      check_config(read_config(dir / "moe.gguf"), m.config);
    }
}

TEST_CASE("Qwen3-MoE GGUF expert tensors dequantize block by block like 2-D tensors") {
  w::TempDir dir("load-moe-quant");
  struct Case {
    GgmlType type;
    int hidden, expert_ffn;
  };
  // Rows of a 3-D tensor run along its first dimension (hidden for gate/up,
  // the expert size for down): multiples of the block size.
  const Case cases[] = {{GgmlType::q8_0, 32, 32}, {GgmlType::q4_0, 32, 64}, {GgmlType::f16, 32, 16},
                        {GgmlType::q4_k, 256, 256}, {GgmlType::q6_k, 256, 256}};
  for (const Case& c : cases) {
    CAPTURE(type_name(static_cast<std::uint32_t>(c.type)));
    w::TinySpec spec = moe_spec();
    spec.layers = 2;
    spec.dense_layers = {};
    spec.hidden = c.hidden;
    spec.head_dim = 0;
    spec.intermediate = c.expert_ffn;
    spec.expert_intermediate = c.expert_ffn;
    spec.experts = 3;
    const auto m = w::random_model(spec, bosch::test::seed(71));
    w::GgufOptions opt;
    opt.matrix_type = c.type;
    w::write_gguf(m, dir / "q.gguf", opt);
    const Checkpoint ck = read_gguf(dir / "q.gguf");
    for (std::size_t l = 0; l < ck.weights.layers.size(); ++l) {
      const auto &got = ck.weights.layers[l], &want = m.weights.layers[l];
      for (auto [name, a, b] : {std::tuple{"gate_exps", &got.gate_exps, &want.gate_exps},
                                std::tuple{"up_exps", &got.up_exps, &want.up_exps},
                                std::tuple{"down_exps", &got.down_exps, &want.down_exps}}) {
        CAPTURE(l);
        CAPTURE(name);
        std::vector<float> expect(b->data.size());
        dequantize(c.type, w::quantize(c.type, b->data), expect);
        CHECK(a->rows == b->rows);
        CHECK(a->cols == b->cols);
        CHECK(a->data == expect);
        CHECK(max_diff(a->data, b->data) > 0.0);  // really quantized
      }
      CHECK(got.router.data == want.router.data);  // F32, as llama.cpp keeps it
    }
  }
}

TEST_CASE("Qwen3-MoE Hugging Face directories load back: one tensor per expert, shards, mlp_only_layers") {
  w::TempDir dir("load-moe-hf");
  const auto m = w::random_model(moe_spec(), bosch::test::seed(72));
  for (int shards : {1, 3}) {
    CAPTURE(shards);
    const auto d = dir / ("hf" + std::to_string(shards));
    w::HfOptions opt;
    opt.shards = shards;
    w::write_hf(m, d, opt);
    const Checkpoint ck = read_checkpoint(d);
    check_config(ck.config, m.config);
    check_exact(ck.weights, m.weights);
    check_config(read_config(d), m.config);
  }
}

TEST_CASE("Qwen3-MoE config.json: decoder_sparse_step, mlp_only_layers and transformers' defaults") {
  nlohmann::json j = w::config_json(w::random_model(moe_spec(), bosch::test::seed(73)).config, {});
  j["num_hidden_layers"] = 6;
  j["decoder_sparse_step"] = 2;  // layers 1, 3, 5 sparse ...
  j["mlp_only_layers"] = {3};    // ... but 3 dense
  j.erase("norm_topk_prob");     // transformers' default: false
  const Config c = parse_hf_config(j.dump(), "config.json").config;
  CHECK(c.arch == Arch::qwen3moe);
  CHECK(c.moe.sparse_layers == std::vector<bool>{false, true, false, false, false, true});
  CHECK_FALSE(c.moe.norm_topk_prob);
  CHECK(c.moe.num_experts == 4);
  CHECK(c.moe.num_experts_used == 2);
  CHECK(c.moe.expert_intermediate_size == 16);
  // model_type alone names the architecture too; all-sparse needs no intermediate_size.
  j.erase("architectures");
  j.erase("intermediate_size");
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = nlohmann::json::array();
  const Config all = parse_hf_config(j.dump(), "config.json").config;
  CHECK(all.arch == Arch::qwen3moe);
  CHECK(all.moe.sparse_layers == std::vector<bool>(6, true));
  CHECK_FALSE(all.has_dense_layer());
}

TEST_CASE("Qwen3-MoE config.json shaped like Qwen3-30B-A3B's is read with every key honoured or ignored") {
  const char* text = R"({
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
    "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [],
    "model_type": "qwen3_moe", "moe_intermediate_size": 768, "norm_topk_prob": true,
    "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
    "num_key_value_heads": 4, "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
    "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true,
    "use_sliding_window": false, "vocab_size": 151936})";
  const Config c = parse_hf_config(text, "config.json").config;
  CHECK(c.arch == Arch::qwen3moe);
  CHECK(c.qk_norm);
  CHECK(c.layout().num_layers == 48);
  CHECK(c.layout().num_kv_heads == 4);
  CHECK(c.head_dim == 128);
  CHECK(c.moe.num_experts == 128);
  CHECK(c.moe.num_experts_used == 8);
  CHECK(c.moe.expert_intermediate_size == 768);
  CHECK(c.moe.norm_topk_prob);
  CHECK(c.moe.sparse_layers == std::vector<bool>(48, true));
  // Active FFN work per token and layer: router 2048 x 128 plus 8 experts of 3 x 2048 x 768.
  CHECK(ffn_flops(c, 0) == 2.0 * (2048.0 * 128 + 8 * 3 * 2048.0 * 768));
}

TEST_CASE("writers: the neox <-> interleaved row permutation is llama.cpp's and invertible") {
  Matrix m;
  m.rows = 8;  // 2 heads of 4
  m.cols = 1;
  for (int i = 0; i < 8; ++i) m.data.push_back(static_cast<float>(i));
  const Matrix p = w::rope_rows_neox_to_interleaved(m, 2);
  // Head 0 rows (0 1 | 2 3) -> (0 2 1 3); head 1 (4 5 | 6 7) -> (4 6 5 7).
  CHECK(p.data == std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7});
  CHECK(w::rope_rows_interleaved_to_neox(p, 2).data == m.data);
}
