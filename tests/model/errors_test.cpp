// Corrupt, truncated and mismatched model files raise bosch::format_error (or
// file_error for missing paths) whose message names the file and the tensor or
// field; random corruption never crashes the loader. Also the Llama 3.1 RoPE
// frequency factors of GGUF files.
#include "test_support.hpp"
#include "writers.hpp"

#include <bosch/error.hpp>
#include <bosch/model/hf_config.hpp>
#include <bosch/model/loader.hpp>
#include <bosch/model/model.hpp>
#include <bosch/model/safetensors.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

using namespace bosch;
using namespace bosch::model;
namespace w = bosch::test::writers;

namespace {

template <class E, class F>
std::string error_text(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("threw another exception: " << e.what());
  }
  FAIL("did not throw");
  return {};
}

/// Requires load(path) to throw E with all `parts` in its message.
template <class E = format_error>
void expect_error(const std::filesystem::path& path, std::initializer_list<std::string> parts) {
  const std::string t = error_text<E>([&] { (void)read_checkpoint(path); });
  CAPTURE(t);
  for (const auto& p : parts) CHECK(t.find(p) != std::string::npos);
}

w::TinyModel tiny(Arch arch = Arch::llama, std::uint64_t k = 0) {
  w::TinySpec s;
  s.arch = arch;
  return w::random_model(s, bosch::test::seed(100 + k));
}

}  // namespace

TEST_CASE("GGUF models with wrong content name file and tensor or key") {
  w::TempDir dir("err-gguf");
  const auto path = dir / "m.gguf";
  const std::string p = path.string();
  const auto m = tiny();

  SUBCASE("wrong magic / unsupported version / truncated header") {
    auto b = w::write_gguf(m, path);
    b[3] = std::byte{'X'};
    w::write_file(path, b);
    expect_error(path, {p, "wrong magic"});
    b = w::gguf_writer(m).bytes();
    const std::uint32_t v = 7;
    std::memcpy(b.data() + 4, &v, 4);
    w::write_file(path, b);
    expect_error(path, {p, "unsupported GGUF version 7"});
    b = w::gguf_writer(m).bytes();
    w::write_file(path, std::span(b).first(10));
    expect_error(path, {p, "truncated", "header"});
  }
  SUBCASE("tensor beyond the end of the file") {
    auto b = w::write_gguf(m, path);
    b.resize(b.size() - 100);
    w::write_file(path, b);
    expect_error(path, {p, "tensor 'blk.1.ffn_down.weight'", "beyond the end of the file"});  // the last one
  }
  SUBCASE("unknown tensor type") {
    auto g = w::gguf_writer(m);
    g.remove_tensor("blk.1.ffn_up.weight");
    g.add_raw_tensor("blk.1.ffn_up.weight", 77, {32, 64}, w::Bytes(32 * 64 * 4));
    g.write(path);
    expect_error(path, {p, "tensor 'blk.1.ffn_up.weight'", "unknown tensor type 77"});
  }
  SUBCASE("known but unsupported tensor type") {
    auto g = w::gguf_writer(m);
    g.remove_tensor("blk.0.attn_v.weight");
    g.add_raw_tensor("blk.0.attn_v.weight", static_cast<std::uint32_t>(GgmlType::q8_1), {32, 16}, w::Bytes(16 * 36));
    g.write(path);
    expect_error(path, {p, "tensor 'blk.0.attn_v.weight'", "unsupported tensor type Q8_1"});
  }
  SUBCASE("unknown architecture") {
    auto g = w::gguf_writer(m);
    g.remove_key("general.architecture");
    g.set_string("general.architecture", "gpt2");
    g.write(path);
    expect_error(path, {p, "key 'general.architecture'", "unsupported architecture 'gpt2'"});
  }
  SUBCASE("shape not matching the config") {
    auto bad = m;
    bad.config.intermediate_size = 96;  // metadata says 96, tensors hold 64
    w::write_gguf(bad, path);
    expect_error(path, {p, "tensor 'blk.0.ffn_gate.weight'", "shape [64, 32]", "expected [96, 32]"});
    bad = m;
    bad.config.num_kv_heads = 4;  // K/V hold 2 heads
    w::write_gguf(bad, path);
    expect_error(path, {p, "tensor 'blk.0.attn_k.weight'", "does not match the configuration"});
  }
  SUBCASE("missing tensors") {
    for (const char* name : {"token_embd.weight", "output_norm.weight", "blk.1.ffn_up.weight", "blk.0.attn_norm.weight"}) {
      w::GgufOptions opt;
      opt.omit = {name};
      w::write_gguf(m, path, opt);
      expect_error(path, {p, "missing tensor", std::string("tensor '") + name + "'"});
    }
    w::GgufOptions opt;
    opt.omit = {"blk.0.attn_q.bias"};
    w::write_gguf(tiny(Arch::qwen2), path, opt);
    expect_error(path, {p, "missing tensor", "tensor 'blk.0.attn_q.bias'"});
    opt.omit = {"blk.1.attn_k_norm.weight"};
    w::write_gguf(tiny(Arch::qwen3), path, opt);
    expect_error(path, {p, "missing tensor", "tensor 'blk.1.attn_k_norm.weight'"});
  }
  SUBCASE("duplicate tensor") {
    auto g = w::gguf_writer(m);
    g.add_tensor("blk.0.ffn_norm.weight", GgmlType::f32, {32}, m.weights.layers[0].ffn_norm);
    g.write(path);
    expect_error(path, {p, "tensor 'blk.0.ffn_norm.weight'", "duplicate tensor name"});
  }
  SUBCASE("tensor of a layer beyond block_count") {
    auto g = w::gguf_writer(m);
    g.add_tensor("blk.2.ffn_norm.weight", GgmlType::f32, {32}, m.weights.layers[0].ffn_norm);
    g.write(path);
    expect_error(path, {p, "tensor 'blk.2.ffn_norm.weight'", "layer 2", "2 layers"});
  }
  SUBCASE("missing, mistyped and inconsistent metadata") {
    auto g = w::gguf_writer(m);
    g.remove_key("llama.block_count");
    g.write(path);
    expect_error(path, {p, "key 'llama.block_count'", "missing metadata key"});
    g = w::gguf_writer(m);
    g.remove_key("llama.embedding_length");
    g.set_string("llama.embedding_length", "32");
    g.write(path);
    expect_error(path, {p, "key 'llama.embedding_length'", "expected an integer, found string"});
    g = w::gguf_writer(m);
    g.remove_key("llama.attention.head_count_kv");
    g.set_u32("llama.attention.head_count_kv", 3);
    g.write(path);
    expect_error(path, {p, "key 'llama.attention.head_count_kv'", "not a multiple"});
    g = w::gguf_writer(m);
    g.remove_key("llama.block_count");
    g.set_u32("llama.block_count", 2147483647u);  // checked against the tensors before allocating
    g.write(path);
    expect_error(path, {p, "missing tensor", "tensor 'blk.2.attn_norm.weight'"});
    g = w::gguf_writer(m);
    g.remove_key("llama.block_count");
    g.set_u32("llama.block_count", 0);
    g.write(path);
    expect_error(path, {p, "key 'llama.block_count'", "must be positive"});
    g = w::gguf_writer(m);
    g.remove_key("llama.rope.dimension_count");
    g.set_u32("llama.rope.dimension_count", 4);
    g.write(path);
    expect_error(path, {p, "key 'llama.rope.dimension_count'", "partial rotary"});
    g = w::gguf_writer(m);
    g.set_string("llama.rope.scaling.type", "yarn");
    g.write(path);
    expect_error(path, {p, "key 'llama.rope.scaling.type'", "unsupported RoPE scaling type 'yarn'"});
    g = w::gguf_writer(m);
    g.remove_key("tokenizer.ggml.model");
    g.write(path);
    expect_error(path, {p, "key 'tokenizer.ggml.model'", "missing metadata key"});
  }
  SUBCASE("floats that are not finite and positive: NaN, infinities, 0 and negatives, naming the key") {
    // Before: a RoPE base of +inf was accepted (every frequency 0 but the first).
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    for (const std::string k : {"llama.rope.freq_base", "llama.attention.layer_norm_rms_epsilon"})
      for (const float v : {inf, -inf, nan, 0.0f, -2.0f}) {
        CAPTURE(k);
        CAPTURE(v);
        auto g = w::gguf_writer(m);
        g.remove_key(k);
        g.set_f32(k, v);
        g.write(path);
        expect_error(path, {p, "key '" + k + "'", "must be positive and finite"});
      }
    for (const float v : {inf, nan, 0.0f}) {
      CAPTURE(v);
      auto g = w::gguf_writer(m);
      g.set_string("llama.rope.scaling.type", "linear");
      g.set_f32("llama.rope.scaling.factor", v);
      g.write(path);
      expect_error(path, {p, "key 'llama.rope.scaling.factor'", "must be positive and finite"});
    }
  }
  SUBCASE("not a file") {
    expect_error<file_error>(dir / "absent.gguf", {(dir / "absent.gguf").string(), "no such file"});
    CHECK_THROWS_AS(load(dir / "absent.gguf"), file_error);
  }
}

TEST_CASE("GGUF loading survives random corruption of a whole model") {
  // Header and directory bytes of a tiny model overwritten at random: load
  // either succeeds or throws bosch::error (run under sanitizers in CI).
  w::TempDir dir("err-fuzz");
  const auto path = dir / "f.gguf";
  const auto good = w::write_gguf(tiny(), path);
  gguf::File f(path);
  const std::size_t dir_end = static_cast<std::size_t>(f.data_offset());
  boost::random::mt19937_64 rng(bosch::test::seed(12));
  boost::random::uniform_int_distribution<std::size_t> pos(0, dir_end - 1);
  boost::random::uniform_int_distribution<int> byte(0, 255);
  int rejected = 0;
  for (int trial = 0; trial < 300; ++trial) {
    auto b = good;
    for (int k = 0; k < 3; ++k) b[pos(rng)] = static_cast<std::byte>(byte(rng));
    w::write_file(path, b);
    try {
      (void)read_checkpoint(path);
    } catch (const bosch::error&) {
      ++rejected;
    } catch (const std::exception& e) {
      FAIL("non-bosch exception: " << e.what());
    }
  }
  MESSAGE("corrupted models rejected: " << rejected << " of 300");
  CHECK(rejected > 0);
}

TEST_CASE("Llama 3.1 RoPE frequency factors (rope_freqs.weight) become RopeScaling llama3") {
  w::TempDir dir("rope-freqs");
  w::TinySpec spec;
  spec.hidden = 256;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.intermediate = 64;
  spec.layers = 1;
  spec.rope_theta = 500000.0;
  const auto m = w::random_model(spec, bosch::test::seed(70));
  const int d = 64;
  struct Case {
    double factor, low, high;
    int old_ctx;
  };
  for (const Case& c : {Case{8, 1, 4, 8192}, Case{32, 1, 4, 8192}, Case{8, 2, 8, 8192}, Case{16, 1, 4, 4096}}) {
    CAPTURE(c.factor);
    CAPTURE(c.low);
    CAPTURE(c.high);
    // llama.cpp's converter: the divisor of each pair's frequency (HF formula).
    std::vector<float> ff;
    for (int i = 0; i < d / 2; ++i) {
      const double freq = std::pow(spec.rope_theta, -2.0 * i / d), wl = 2 * std::numbers::pi / freq;
      double r;
      if (wl < c.old_ctx / c.high) r = 1;
      else if (wl > c.old_ctx / c.low) r = c.factor;
      else {
        const double smooth = (c.old_ctx / wl - c.low) / (c.high - c.low);
        r = 1 / ((1 - smooth) / c.factor + smooth);
      }
      ff.push_back(static_cast<float>(r));
    }
    auto g = w::gguf_writer(m);
    g.add_tensor("rope_freqs.weight", GgmlType::f32, {static_cast<std::uint64_t>(d / 2)}, ff);
    if (c.old_ctx != 8192) g.set_u32("llama.rope.scaling.original_context_length", static_cast<std::uint32_t>(c.old_ctx));
    g.write(dir / "r.gguf");
    const Config cfg = read_config(dir / "r.gguf");
    CHECK(cfg.rope_scaling.type == "llama3");
    CHECK(cfg.rope_scaling.factor == doctest::Approx(c.factor).epsilon(1e-6));
    CHECK(cfg.rope_scaling.original_max_position == c.old_ctx);
    // low/high are identifiable only through the frequencies they change; the
    // loader verifies that every factor is reproduced to 1e-3.
    CHECK(cfg.rope_scaling.low_freq_factor == doctest::Approx(c.low).epsilon(1e-3));
    CHECK(cfg.rope_scaling.high_freq_factor == doctest::Approx(c.high).epsilon(1e-3));
    // Factors that follow no such formula are rejected.
    std::reverse(ff.begin(), ff.end());
    auto h = w::gguf_writer(m);
    h.add_tensor("rope_freqs.weight", GgmlType::f32, {static_cast<std::uint64_t>(d / 2)}, ff);
    h.write(dir / "bad.gguf");
    const auto t = error_text<format_error>([&] { (void)read_config(dir / "bad.gguf"); });
    CHECK(t.find("tensor 'rope_freqs.weight'") != std::string::npos);
    CHECK(t.find("Llama 3.1") != std::string::npos);
  }
}

TEST_CASE("Hugging Face checkpoints with wrong content name file and tensor or field") {
  w::TempDir dir("err-hf");
  const auto m = tiny();
  const auto d = dir / "m";
  const std::string st = (d / "model.safetensors").string();
  auto fresh = [&](const w::HfOptions& opt = {}) {
    std::filesystem::remove_all(d);
    w::write_hf(m, d, opt);
  };
  auto edit_config = [&](auto&& f) {
    auto cfg = nlohmann::json::parse(w::read_file(d / "config.json"));
    f(cfg);
    w::write_text(d / "config.json", cfg.dump());
  };
  /// Rewrites model.safetensors from the model's tensors, letting `f` edit the writer.
  auto rewrite_safetensors = [&](auto&& f) {
    w::SafetensorsWriter sw;
    for (const auto& [name, shape, values] : w::hf_tensors(m)) sw.add(name, "F32", shape, *values);
    return f(sw);
  };

  SUBCASE("config.json problems") {
    fresh();
    edit_config([](auto& c) { c.erase("hidden_size"); });
    expect_error(d, {(d / "config.json").string(), "field 'hidden_size'", "missing"});
    fresh();
    edit_config([](auto& c) { c["architectures"] = {"GPT2LMHeadModel"}; });
    expect_error(d, {(d / "config.json").string(), "field 'architectures'", "unsupported architecture 'GPT2LMHeadModel'"});
    fresh();
    edit_config([](auto& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; });
    expect_error(d, {"field 'rope_scaling'", "unsupported RoPE scaling type 'yarn'"});
    fresh();
    edit_config([](auto& c) { c["attention_bias"] = true; });
    expect_error(d, {"field 'attention_bias'"});
    fresh();
    edit_config([](auto& c) { c["num_key_value_heads"] = 3; });
    expect_error(d, {"field 'num_key_value_heads'", "not a multiple"});
    fresh();
    edit_config([](auto& c) { c["num_hidden_layers"] = -2; });
    expect_error(d, {"field 'num_hidden_layers'", "positive"});
    // Floats the model reads: finite and positive. JSON has no NaN or
    // infinity; an overflowing number is refused by the parser.
    for (const std::string key : {"rope_theta", "rms_norm_eps"})
      for (const std::string v : {"1e999", "-1e999", "0", "-2.5"}) {
        CAPTURE(key);
        CAPTURE(v);
        fresh();
        edit_config([&](auto& c) { c[key] = 12345.5; });
        const auto bytes = w::read_file(d / "config.json");
        std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        text.replace(text.find("12345.5"), 7, v);
        w::write_text(d / "config.json", text);
        if (v.find("e999") != std::string::npos)
          expect_error(d, {(d / "config.json").string(), "not valid JSON", "number overflow parsing '" + v + "'"});
        else
          expect_error(d, {(d / "config.json").string(), "field '" + key + "'", "must be positive and finite"});
      }
    fresh();
    w::write_text(d / "config.json", "{not json");
    expect_error(d, {(d / "config.json").string(), "not valid JSON"});
    std::filesystem::remove(d / "config.json");
    expect_error<file_error>(d, {(d / "config.json").string(), "missing config.json"});
  }
  SUBCASE("missing tokenizer.json") {
    w::HfOptions opt;
    opt.write_tokenizer = false;
    fresh(opt);
    expect_error<file_error>(d, {(d / "tokenizer.json").string()});
  }
  SUBCASE("missing tensor / shape mismatch / layer beyond the config") {
    w::HfOptions opt;
    opt.omit = {"model.layers.1.mlp.down_proj.weight"};
    fresh(opt);
    expect_error(d, {st, "tensor 'model.layers.1.mlp.down_proj.weight'", "missing tensor"});
    fresh();
    edit_config([](auto& c) { c["intermediate_size"] = 48; });
    expect_error(d, {st, "tensor 'model.layers.0.mlp.gate_proj.weight'", "shape [64, 32]", "expected [48, 32]"});
    fresh();
    edit_config([](auto& c) { c["num_hidden_layers"] = 1; });
    expect_error(d, {st, "tensor 'model.layers.1.", "layer 1"});
    fresh();
    edit_config([](auto& c) { c["tie_word_embeddings"] = false; });
    opt.omit = {"lm_head.weight"};
    fresh(opt);
    edit_config([](auto& c) { c["tie_word_embeddings"] = false; });
    expect_error(d, {st, "tensor 'lm_head.weight'", "missing tensor"});
  }
  SUBCASE("unsupported dtype") {
    fresh();
    rewrite_safetensors([&](w::SafetensorsWriter& sw) {
      sw.add_raw("model.extra", "I8", {4}, w::Bytes(4));  // ignored: not a model tensor
      w::SafetensorsWriter bad;
      for (const auto& [name, shape, values] : w::hf_tensors(m)) {
        if (name == "model.norm.weight") bad.add_raw(name, "I32", shape, w::Bytes(values->size() * 4));
        else bad.add(name, "F32", shape, *values);
      }
      bad.write(st);
    });
    expect_error(d, {st, "tensor 'model.norm.weight'", "unsupported dtype I32"});
  }
  SUBCASE("malformed safetensors files") {
    fresh();
    const auto good = w::read_file(st);
    // Truncated: header length beyond the file, data beyond the file.
    w::write_file(st, std::span(good).first(6));
    expect_error(d, {st, "truncated", "header"});
    w::write_file(st, std::span(good).first(200));
    expect_error(d, {st, "truncated: header of"});
    w::write_file(st, std::span(good).first(good.size() - 4));
    expect_error(d, {st, "tensor 'lm_head.weight'", "beyond the end of the file"});
    rewrite_safetensors([&](w::SafetensorsWriter& sw) {
      w::write_file(st, sw.bytes_with_header("{\"a\": [1, 2"));
      expect_error(d, {st, "header", "not valid JSON"});
      auto h = sw.header();
      h["model.norm.weight"]["dtype"] = "F99";
      w::write_file(st, sw.bytes_with_header(h.dump()));
      expect_error(d, {st, "tensor 'model.norm.weight'", "unknown dtype 'F99'"});
      h = sw.header();
      h["model.norm.weight"]["shape"] = {33};
      w::write_file(st, sw.bytes_with_header(h.dump()));
      expect_error(d, {st, "tensor 'model.norm.weight'", "needs 132"});
      h = sw.header();
      h["model.norm.weight"]["data_offsets"] = {0, 128};
      w::write_file(st, sw.bytes_with_header(h.dump()));
      expect_error(d, {st, "overlaps"});
      h = sw.header();
      h["model.norm.weight"]["data_offsets"] = {1ull << 40, (1ull << 40) + 128};
      w::write_file(st, sw.bytes_with_header(h.dump()));
      expect_error(d, {st, "tensor 'model.norm.weight'", "beyond the end of the file"});
      // A duplicate key in the JSON header (the last would silently win).
      std::string text = h.dump();
      const std::string dup = ",\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
      text.pop_back();
      w::write_file(st, sw.bytes_with_header(text + dup));
      expect_error(d, {st, "tensor 'model.norm.weight'", "duplicate tensor name"});
      return 0;
    });
  }
  SUBCASE("shards: missing shard, tensor not in its shard, duplicates") {
    w::HfOptions opt;
    opt.shards = 2;
    fresh(opt);
    std::filesystem::remove(d / "model-00002-of-00002.safetensors");
    expect_error<file_error>(d, {(d / "model-00002-of-00002.safetensors").string(), "does not exist"});
    fresh(opt);
    auto index = nlohmann::json::parse(w::read_file(d / "model.safetensors.index.json"));
    index["weight_map"]["model.phantom.weight"] = "model-00001-of-00002.safetensors";
    w::write_text(d / "model.safetensors.index.json", index.dump());
    expect_error(d, {"tensor 'model.phantom.weight'", "missing from shard"});
    index["weight_map"].erase("model.phantom.weight");
    index["weight_map"]["model.norm.weight"] = "../elsewhere.safetensors";
    w::write_text(d / "model.safetensors.index.json", index.dump());
    expect_error(d, {"model.safetensors.index.json", "not a plain file name"});
    // Without an index, two files holding the same tensor.
    fresh();
    std::filesystem::copy_file(st, d / "model-copy.safetensors");
    expect_error(d, {"duplicate tensor", "model-copy.safetensors", "model.safetensors"});
  }
  SUBCASE("no weights at all") {
    fresh();
    std::filesystem::remove(st);
    expect_error<file_error>(d, {d.string(), "no *.safetensors"});
  }
}

TEST_CASE("safetensors reader survives random corruption") {
  w::TempDir dir("err-st-fuzz");
  const auto path = dir / "x.safetensors";
  w::SafetensorsWriter sw;
  const std::vector<float> a(12, 1.0f), b(6, 2.0f);
  sw.add("a", "F32", {3, 4}, a);
  sw.add("b", "BF16", {6}, b);
  const auto good = sw.bytes();
  {
    w::write_file(path, good);
    safetensors::File f(path);
    REQUIRE(f.tensors().size() == 2);
    CHECK(f.find_tensor("a")->shape == std::vector<std::uint64_t>{3, 4});
    std::vector<float> out(6);
    safetensors::to_fp32("BF16", f.tensor_data(*f.find_tensor("b")), out);
    CHECK(out[5] == 2.0f);
  }
  boost::random::mt19937_64 rng(bosch::test::seed(13));
  boost::random::uniform_int_distribution<std::size_t> pos(0, good.size() - 1);
  boost::random::uniform_int_distribution<int> byte(0, 255);
  int rejected = 0;
  for (int trial = 0; trial < 300; ++trial) {
    auto bytes = good;
    for (int k = 0; k < 2; ++k) bytes[pos(rng)] = static_cast<std::byte>(byte(rng));
    w::write_file(path, bytes);
    try {
      safetensors::File f(path);
      for (const auto& t : f.tensors()) (void)f.tensor_data(t);
    } catch (const bosch::error&) {
      ++rejected;
    } catch (const std::exception& e) {
      FAIL("non-bosch exception: " << e.what());
    }
  }
  CHECK(rejected > 0);
}

namespace {

/// A tiny Qwen3-MoE (2 layers, 4 experts of 16, top-2).
w::TinyModel tiny_moe() {
  w::TinySpec s;
  s.arch = Arch::qwen3moe;
  return w::random_model(s, bosch::test::seed(140));
}

}  // namespace

TEST_CASE("Qwen3-MoE GGUF files: unsupported variants and bad expert metadata name the key or tensor") {
  w::TempDir dir("err-moe-gguf");
  const auto path = dir / "m.gguf";
  const std::string p = path.string();
  const auto m = tiny_moe();
  auto edited = [&](auto&& f) {
    auto g = w::gguf_writer(m);
    f(g);
    g.write(path);
  };
  SUBCASE("missing or inconsistent expert counts") {
    edited([](w::GgufWriter& g) { g.remove_key("qwen3moe.expert_count"); });
    expect_error(path, {p, "key 'qwen3moe.expert_count'", "missing"});
    edited([](w::GgufWriter& g) { g.remove_key("qwen3moe.expert_feed_forward_length"); });
    expect_error(path, {p, "key 'qwen3moe.expert_feed_forward_length'", "missing"});
    edited([](w::GgufWriter& g) {
      g.remove_key("qwen3moe.expert_used_count");
      g.set_u32("qwen3moe.expert_used_count", 5);
    });
    expect_error(path, {p, "key 'qwen3moe.expert_used_count'", "exceeds expert_count 4"});
    edited([](w::GgufWriter& g) {
      g.remove_key("qwen3moe.expert_count");
      g.set_u32("qwen3moe.expert_count", 0);
    });
    expect_error(path, {p, "key 'qwen3moe.expert_count'", "must be positive"});
  }
  SUBCASE("variants bosch does not run") {
    edited([](w::GgufWriter& g) { g.set_u32("qwen3moe.expert_shared_count", 1); });
    expect_error(path, {p, "key 'qwen3moe.expert_shared_count'", "shared experts are not supported"});
    edited([](w::GgufWriter& g) { g.set_u32("qwen3moe.expert_shared_feed_forward_length", 64); });
    expect_error(path, {p, "key 'qwen3moe.expert_shared_feed_forward_length'", "shared experts"});
    edited([](w::GgufWriter& g) { g.set_u32("qwen3moe.expert_gating_func", 2); });
    expect_error(path, {p, "key 'qwen3moe.expert_gating_func'", "gating function 2 is not supported"});
    edited([](w::GgufWriter& g) { g.set_f32("qwen3moe.expert_weights_scale", 2.5f); });
    expect_error(path, {p, "key 'qwen3moe.expert_weights_scale'", "not supported"});
    edited([](w::GgufWriter& g) { g.set_u32("qwen3moe.expert_group_count", 8); });
    expect_error(path, {p, "key 'qwen3moe.expert_group_count'", "grouped expert routing"});
    edited([](w::GgufWriter& g) {
      g.add_tensor("blk.0.ffn_up_shexp.weight", GgmlType::f32, {32, 64}, std::vector<float>(32 * 64));
    });
    expect_error(path, {p, "tensor 'blk.0.ffn_up_shexp.weight'", "shared experts"});
    edited([](w::GgufWriter& g) {
      g.add_tensor("blk.1.exp_probs_b.bias", GgmlType::f32, {4}, std::vector<float>(4));
    });
    expect_error(path, {p, "tensor 'blk.1.exp_probs_b.bias'", "routers other than"});
    // A softmax gating function (1) and an explicit weight scale of 1 are Qwen3-MoE's own.
    edited([](w::GgufWriter& g) {
      g.set_u32("qwen3moe.expert_gating_func", 1);
      g.set_f32("qwen3moe.expert_weights_scale", 1.0f);
      g.set_u32("qwen3moe.expert_shared_count", 0);
    });
    CHECK(read_checkpoint(path).config.moe.num_experts == 4);
  }
  SUBCASE("experts in another architecture (Mixtral GGUFs are 'llama' with expert_count)") {
    auto g = w::gguf_writer(tiny());
    g.set_u32("llama.expert_count", 8);
    g.write(path);
    expect_error(path, {p, "key 'llama.expert_count'", "only for architecture qwen3moe"});
    g = w::gguf_writer(tiny());
    g.add_tensor("blk.0.ffn_gate_inp.weight", GgmlType::f32, {32, 8}, std::vector<float>(32 * 8));
    g.write(path);
    expect_error(path, {p, "tensor 'blk.0.ffn_gate_inp.weight'", "only for architecture qwen3moe"});
  }
  SUBCASE("expert tensors missing or of the wrong shape") {
    w::GgufOptions opt;
    opt.omit = {"blk.1.ffn_down_exps.weight"};
    w::write_gguf(m, path, opt);
    expect_error(path, {p, "tensor 'blk.1.ffn_down_exps.weight'", "missing tensor"});
    opt.omit = {"blk.0.ffn_gate_inp.weight"};  // no router and no dense FFN either
    w::write_gguf(m, path, opt);
    expect_error(path, {p, "tensor 'blk.0.ffn_gate_inp.weight'", "missing tensor", "router"});
    edited([](w::GgufWriter& g) {
      g.remove_key("qwen3moe.expert_count");
      g.set_u32("qwen3moe.expert_count", 3);  // tensors hold 4
    });
    expect_error(path, {p, "tensor 'blk.0.ffn_gate_inp.weight'", "shape [4, 32]", "expected [3, 32]"});
    edited([](w::GgufWriter& g) {
      g.remove_key("qwen3moe.expert_feed_forward_length");
      g.set_u32("qwen3moe.expert_feed_forward_length", 8);  // tensors hold 16
    });
    expect_error(path, {p, "tensor 'blk.0.ffn_gate_exps.weight'", "shape [4, 16, 32]", "expected [4, 8, 32]"});
  }
}

TEST_CASE("Qwen3-MoE Hugging Face directories: unsupported variants and bad expert fields name the key or tensor") {
  w::TempDir dir("err-moe-hf");
  const auto m = tiny_moe();
  const auto d = dir / "m";
  const std::string cfg = (d / "config.json").string();
  auto with_config = [&](auto&& f, const w::HfOptions& opt = {}) {
    std::filesystem::remove_all(d);
    w::write_hf(m, d, opt);
    auto j = nlohmann::json::parse(w::read_file(d / "config.json"));
    f(j);
    w::write_text(d / "config.json", j.dump());
  };
  using J = nlohmann::json;
  const std::pair<std::function<void(J&)>, std::vector<std::string>> cases[] = {
      {[](J& j) { j["architectures"] = {"Qwen2MoeForCausalLM"}; },
       {"field 'architectures'", "unsupported architecture 'Qwen2MoeForCausalLM'"}},
      {[](J& j) { j["shared_expert_intermediate_size"] = 64; },
       {"field 'shared_expert_intermediate_size'", "shared experts are not supported"}},
      {[](J& j) { j["n_shared_experts"] = 1; }, {"field 'n_shared_experts'", "shared experts"}},
      {[](J& j) { j["scoring_func"] = "sigmoid"; }, {"field 'scoring_func'", "softmax"}},
      {[](J& j) { j["topk_method"] = "noaux_tc"; }, {"field 'topk_method'", "greedy"}},
      {[](J& j) { j["n_group"] = 8; }, {"field 'n_group'", "grouped"}},
      {[](J& j) { j["routed_scaling_factor"] = 2.5; }, {"field 'routed_scaling_factor'", "scaled"}},
      {[](J& j) { j["num_local_experts"] = 4; }, {"field 'num_local_experts'", "num_experts"}},
      {[](J& j) { j.erase("num_experts"); }, {"field 'num_experts'", "missing"}},
      {[](J& j) { j.erase("moe_intermediate_size"); }, {"field 'moe_intermediate_size'", "missing"}},
      {[](J& j) { j["num_experts_per_tok"] = 5; }, {"field 'num_experts_per_tok'", "must not exceed num_experts (4)"}},
      {[](J& j) { j["decoder_sparse_step"] = 0; }, {"field 'decoder_sparse_step'", "positive"}},
      {[](J& j) { j["mlp_only_layers"] = {2}; }, {"field 'mlp_only_layers'", "entry 2", "[0, 2)"}},
      {[](J& j) { j["mlp_only_layers"] = "0"; }, {"field 'mlp_only_layers'", "array"}},
      {[](J& j) { j["norm_topk_prob"] = "yes"; }, {"field 'norm_topk_prob'", "not a bool"}},
      // A dense layer needs the dense size.
      {[](J& j) { j["mlp_only_layers"] = {0}; j.erase("intermediate_size"); }, {"field 'intermediate_size'", "missing"}},
  };
  SUBCASE("config.json fields") {
    for (const auto& [edit, parts] : cases) {
      with_config(edit);
      const std::string t = error_text<format_error>([&] { (void)read_checkpoint(d); });
      CAPTURE(t);
      CHECK(t.find(cfg) != std::string::npos);
      for (const auto& part : parts) CHECK(t.find(part) != std::string::npos);
    }
  }
  SUBCASE("experts in a dense architecture") {
    const auto dense = tiny(Arch::qwen3);
    std::filesystem::remove_all(d);
    w::write_hf(dense, d);
    auto j = nlohmann::json::parse(w::read_file(d / "config.json"));
    j["num_experts"] = 8;
    w::write_text(d / "config.json", j.dump());
    expect_error(d, {cfg, "field 'num_experts'", "only for Qwen3MoeForCausalLM"});
  }
  SUBCASE("expert tensors missing, of the wrong shape, or shared") {
    const std::string st = (d / "model.safetensors").string();
    w::HfOptions opt;
    opt.omit = {"model.layers.1.mlp.experts.3.up_proj.weight"};
    with_config([](J&) {}, opt);
    expect_error(d, {st, "tensor 'model.layers.1.mlp.experts.3.up_proj.weight'", "missing tensor"});
    with_config([](J& j) { j["moe_intermediate_size"] = 8; });
    expect_error(d, {st, "tensor 'model.layers.0.mlp.experts.0.gate_proj.weight'", "shape [16, 32]", "expected [8, 32]"});
    with_config([](J& j) { j["mlp_only_layers"] = {1}; });  // layer 1 dense: no mlp.gate_proj written
    expect_error(d, {st, "tensor 'model.layers.1.mlp.gate_proj.weight'", "missing tensor"});
    with_config([](J&) {});
    w::SafetensorsWriter sw;
    for (const auto& [name, shape, values] : w::hf_tensors(m)) sw.add(name, "F32", shape, *values);
    sw.add("model.layers.0.mlp.shared_expert.up_proj.weight", "F32", {8, 32}, std::vector<float>(8 * 32));
    sw.write(d / "model.safetensors");
    expect_error(d, {st, "tensor 'model.layers.0.mlp.shared_expert.up_proj.weight'", "shared experts"});
  }
}
