// SPDX-License-Identifier: Apache-2.0
// Writes the seed corpora of the fuzz targets: valid files of every format,
// made with the same writers the tests use (tests/model/writers.hpp, the
// mask and checkpoint writers of the library). Nothing binary is committed;
// the build runs this program into <build>/fuzz/seeds/<target>/.
//
// Usage: bosch_fuzz_seeds OUTPUT_DIR

#include "tiny_model.hpp"

#include <bosch/bosch.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/io/checkpoint.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;
namespace w = bosch::test::writers;
using bosch::model::Arch;
using bosch::model::GgmlType;
using nlohmann::json;

namespace {

fs::path out_root;

fs::path seed(const std::string& target, const std::string& name) {
  const fs::path dir = out_root / target;
  fs::create_directories(dir);
  return dir / name;
}

void text_seed(const std::string& target, const std::string& name, const std::string& text) {
  w::write_text(seed(target, name), text);
}

// ---- GGUF --------------------------------------------------------------------------------------

void gguf_seeds() {
  {
    w::GgufOptions o;  // v3, f32 everywhere
    w::write_gguf(bosch::fuzz::tiny_model(Arch::llama), seed("gguf", "llama_f32.gguf"), o);
  }
  {
    w::GgufOptions o;
    o.version = 2;
    o.alignment = 64;
    o.matrix_type = GgmlType::f16;
    o.vector_type = GgmlType::bf16;
    w::write_gguf(bosch::fuzz::tiny_model(Arch::qwen2), seed("gguf", "qwen2_v2_f16.gguf"), o);
  }
  {
    w::GgufOptions o;
    o.matrix_type = GgmlType::q8_0;
    o.embedding_type = GgmlType::q4_0;
    w::write_gguf(bosch::fuzz::tiny_model_32(Arch::qwen3), seed("gguf", "qwen3_q8_0.gguf"), o);
  }
  {
    w::GgufOptions o;
    o.matrix_type = GgmlType::q4_1;
    o.write_vocab_size = false;
    auto m = bosch::fuzz::tiny_model_32(Arch::llama, 3);
    m.config.tie_embeddings = true;
    m.weights.lm_head = {};
    w::write_gguf(m, seed("gguf", "llama_q4_1_tied.gguf"), o);
  }
  {
    // Metadata of every value type and a few raw tensors of other types.
    w::GgufWriter g;
    g.set_u8("t.u8", 7);
    g.set_i8("t.i8", -7);
    g.set_u16("t.u16", 700);
    g.set_i16("t.i16", -700);
    g.set_u32("t.u32", 70000);
    g.set_i32("t.i32", -70000);
    g.set_u64("t.u64", 1ull << 40);
    g.set_i64("t.i64", -(1ll << 40));
    g.set_f32("t.f32", 0.5f);
    g.set_f64("t.f64", 0.25);
    g.set_string("t.string", "text");
    g.set_strings("t.strings", {"a", "bc", ""});
    g.set_string("tokenizer.ggml.model", "llama");
    g.set_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b"});
    std::vector<float> q6(256), q4k(256);
    for (int i = 0; i < 256; ++i)
      q6[static_cast<std::size_t>(i)] = static_cast<float>(i % 17) / 8.0f - 1.0f;
    for (int i = 0; i < 256; ++i)
      q4k[static_cast<std::size_t>(i)] = static_cast<float>(i % 13) / 6.0f - 1.0f;
    g.add_raw_tensor("q6_k", static_cast<std::uint32_t>(GgmlType::q6_k), {256},
                     w::quantize(GgmlType::q6_k, q6));
    g.add_raw_tensor("q4_k", static_cast<std::uint32_t>(GgmlType::q4_k), {256},
                     w::quantize(GgmlType::q4_k, q4k));
    g.add_raw_tensor("f32_2x3", static_cast<std::uint32_t>(GgmlType::f32), {3, 2}, w::Bytes(24));
    w::write_file(seed("gguf", "metadata_types.gguf"), g.bytes());
  }
}

// ---- safetensors and HF directories ----------------------------------------------------------

void safetensors_seeds() {
  const auto m = bosch::fuzz::tiny_model(Arch::qwen3);
  for (const char* dtype : {"F32", "F16", "BF16"}) {
    w::SafetensorsWriter s;
    for (const auto& [name, shape, values] : w::hf_tensors(m)) s.add(name, dtype, shape, *values);
    if (std::string(dtype) == "BF16") s.set_metadata("format", "pt");
    s.write(seed("safetensors", std::string("qwen3_") + dtype + ".safetensors"));
  }
  {
    w::SafetensorsWriter s;  // other dtypes, a scalar and an empty tensor
    s.add_raw("i64", "I64", {2}, w::Bytes(16));
    s.add_raw("u8", "U8", {3}, w::Bytes(3));
    s.add_raw("bool", "BOOL", {1}, w::Bytes(1));
    s.add_raw("f8", "F8_E4M3", {2, 2}, w::Bytes(4));
    s.add_raw("scalar", "F32", {}, w::Bytes(4));
    s.add_raw("empty", "F16", {0, 4}, w::Bytes());
    s.write(seed("safetensors", "dtypes.safetensors"));
  }
  // The index of a sharded directory (the target supplies the shards itself).
  const fs::path dir = out_root / ".hf_tmp";
  w::HfOptions o;
  o.shards = 2;
  w::write_hf(bosch::fuzz::tiny_model(Arch::qwen2, 2), dir, o);
  fs::copy_file(dir / "model.safetensors.index.json", seed("safetensors_index", "index.json"),
                fs::copy_options::overwrite_existing);
  fs::remove_all(dir);
}

void hf_config_seeds() {
  for (Arch a : {Arch::llama, Arch::qwen2, Arch::qwen3}) {
    const auto m = bosch::fuzz::tiny_model(a);
    text_seed("hf_config", std::string(bosch::model::to_string(a)) + ".json",
              w::config_json(m.config, m.tokenizer).dump(2));
  }
  auto m = bosch::fuzz::tiny_model(Arch::llama);
  json j = w::config_json(m.config, m.tokenizer);
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  j.erase("head_dim");
  j.erase("tie_word_embeddings");
  text_seed("hf_config", "llama3_scaling.json", j.dump(1));
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  j["architectures"] = {"MistralForCausalLM"};
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  text_seed("hf_config", "mistral_linear.json", j.dump());
}

// ---- tokenizer.json --------------------------------------------------------------------------

void tokenizer_seeds() {
  const auto spec = w::tiny_byte_bpe_vocab();
  const std::string base = w::tokenizer_json(spec);
  text_seed("tokenizer_json", "byte_level.json", base);
  // tokenizer_config.json after a NUL byte (the target's input convention).
  text_seed("tokenizer_json", "byte_level_config.json",
            base + std::string(1, '\0') +
                R"({"bos_token": {"content": "<|im_start|>"}, "eos_token": "<|im_end|>", )"
                R"("add_bos_token": true})");

  json j = json::parse(base);
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"},
                     {"pattern", {{"Regex", "[0-9]+|\\p{L}+"}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                    {{"type", "Digits"}, {"individual_digits", true}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  j["normalizer"] = {{"type", "NFC"}};
  j["model"]["merges"] = json::array();
  for (const auto& mg : spec.merges) {
    const auto sp = mg.find(' ');
    j["model"]["merges"].push_back(json::array({mg.substr(0, sp), mg.substr(sp + 1)}));
  }
  j["model"]["ignore_merges"] = true;
  j["added_tokens"].push_back(
      {{"id", spec.tokens.size() + 2}, {"content", "<extra>"}, {"special", false}});
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
      {"special_tokens",
       {{"<|endoftext|>",
         {{"id", "<|endoftext|>"}, {"ids", {spec.bos}}, {"tokens", {"<|endoftext|>"}}}}}}};
  text_seed("tokenizer_json", "split_digits_pairs.json", j.dump());

  // SentencePiece-style BPE (Llama 2 / Mistral layout): byte fallback tokens,
  // U+2581 normalizer, merges as pairs.
  const std::string sp = "\xE2\x96\x81";
  json vocab = json::object();
  vocab["<unk>"] = 0;
  vocab["<s>"] = 1;
  vocab["</s>"] = 2;
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    vocab[buf] = 3 + b;
  }
  const std::vector<std::pair<std::string, std::string>> merges = {
      {sp, "t"}, {"h", "e"}, {sp + "t", "he"}, {sp, "a"}, {"i", "n"}, {sp, "w"}, {"o", "r"}};
  int next = 259;
  for (const char* c : {"t", "h", "e", "a", "i", "n", "w", "o", "r", "l", "d"}) vocab[c] = next++;
  vocab[sp] = next++;
  for (const auto& [a, b] : merges)
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
  json mj = json::array();
  for (const auto& [a, b] : merges) mj.push_back(json::array({a, b}));
  const json spm = {
      {"version", "1.0"},
      {"added_tokens", json::array({{{"id", 0}, {"content", "<unk>"}, {"special", true}},
                                    {{"id", 1}, {"content", "<s>"}, {"special", true}},
                                    {{"id", 2}, {"content", "</s>"}, {"special", true}}})},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         json::array({{{"type", "Prepend"}, {"prepend", sp}},
                      {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}}})}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         json::array({{{"type", "Replace"}, {"pattern", {{"String", sp}}}, {"content", " "}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}}})}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"byte_fallback", true},
        {"fuse_unk", true},
        {"vocab", vocab},
        {"merges", mj}}}};
  text_seed("tokenizer_json", "spm_style.json", spm.dump());
  json meta = spm;
  meta["normalizer"] = nullptr;
  meta["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", sp}, {"prepend_scheme", "first"}, {"split", false}};
  text_seed("tokenizer_json", "metaspace.json", meta.dump());
}

// ---- masks -------------------------------------------------------------------------------------

void mask_seeds() {
  bosch::HeadMask m({2, 8, 4});
  m.set(0, 1, true);
  m.set(1, 0, true);
  m.set(1, 3, true);
  const auto dir = out_root / "mask";
  fs::create_directories(dir);
  bosch::io::write_mask(dir / "mask.json", m,
                        {{"model", "tiny"}, {"ratio", m.ratio()}, {"seed", 1}});
  bosch::io::write_mask(dir / "mask.tsv", m);
  bosch::io::write_mask(dir / "mask.txt", m);
  bosch::HeadMask big({6, 4, 2});
  for (std::size_t i = 0; i < big.size(); i += 3) big.set_flat(i, true);
  bosch::io::write_mask(dir / "big.json", big);
  bosch::io::write_mask(dir / "big.txt", big);
  text_seed("mask", "gates.tsv", "0.91\t0.12\t1\t0\n0.5\t0.49\t0.0\t1.0\n");
}

// ---- checkpoints -------------------------------------------------------------------------------

/// A cheap deterministic evaluator: a separable score with a little interaction.
struct TinyEvaluator {
  bosch::HeadLayout lay{3, 4, 2};
  bosch::HeadLayout layout() const { return lay; }
  double evaluate(const bosch::HeadMask& m) const {
    double s = 1.0;
    for (std::size_t i = 0; i < m.size(); ++i)
      s -= m[i] ? 0.01 * static_cast<double>(i % 5 + 1) : 0.0;
    if (m[0] && m[1]) s -= 0.02;
    return s;
  }
};

void checkpoint_seeds() {
  TinyEvaluator e;
  bosch::Options o;
  o.target_ratio = 0.5;
  o.seed = 7;
  const auto dir = out_root / "checkpoint";
  fs::create_directories(dir);
  (void)bosch::select(e, o, bosch::Checkpoint(dir / "complete.json", 0));
  o.variant = bosch::Variant::layer;
  bosch::EarlyStop stop;
  stop.max_evaluations = 6;
  (void)bosch::select(e, o, bosch::Checkpoint(dir / "partial.json", 0), stop);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  out_root = argv[1];
  try {
    fs::create_directories(out_root);
    gguf_seeds();
    safetensors_seeds();
    hf_config_seeds();
    tokenizer_seeds();
    mask_seeds();
    checkpoint_seeds();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bosch_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
