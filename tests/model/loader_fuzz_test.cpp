// SPDX-License-Identifier: Apache-2.0
// Regression cases for malformed model files found by the fuzz targets
// (fuzz/fuzz_gguf, fuzz_safetensors, fuzz_safetensors_index, fuzz_hf_config):
// each raises a bosch::error naming the file and the field or tensor.
#include "test_support.hpp"
#include "writers.hpp"

#include <bosch/error.hpp>
#include <bosch/model/hf_config.hpp>
#include <bosch/model/loader.hpp>
#include <bosch/model/model.hpp>
#include <bosch/model/safetensors.hpp>

using namespace bosch;
using namespace bosch::model;
namespace w = bosch::test::writers;

namespace {

w::TinyModel tiny() {
  w::TinySpec spec;
  spec.hidden = 8;
  spec.intermediate = 16;
  spec.layers = 1;
  spec.heads = 2;
  spec.kv_heads = 1;
  return w::random_model(spec, 5);
}

/// where() of the bosch::error that load(path) raises.
std::string load_error_where(const std::filesystem::path& path) {
  try {
    (void)load(path);
  } catch (const bosch::error& e) {
    return e.where();
  }
  return "(loaded)";
}

}  // namespace

TEST_CASE("fuzz regression: a GGUF tokenizer that cannot be built names the file") {
  // The seed metadata_types.gguf: tokenizer keys that make a spec, but not a
  // Tokenizer (BOS asked for, no BOS token). load() reported it with
  // where = "tokenizer: bos", naming no file.
  w::TempDir dir("fuzzreg-gguf");
  const auto path = dir / "model.gguf";
  auto g = w::gguf_writer(tiny());
  REQUIRE(g.remove_key("tokenizer.ggml.bos_token_id"));
  g.remove_key("tokenizer.ggml.add_bos_token");
  g.set_bool("tokenizer.ggml.add_bos_token", true);
  g.write(path);
  const std::string where = load_error_where(path);
  CHECK(where.rfind(path.string(), 0) == 0);
  CHECK(where.find("bos") != std::string::npos);
}

TEST_CASE("fuzz regression: an empty tensor no longer hides two overlapping safetensors ranges") {
  // "a" [0, 8) and "c" [7, 15) overlap; the empty "b" at 6 sat between them
  // in offset order and the reader compared "c" only with "b".
  w::TempDir dir("fuzzreg-st");
  const auto path = dir / "model.safetensors";
  std::string header =
      R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
      R"( "b": {"dtype": "F32", "shape": [0], "data_offsets": [6, 6]},)"
      R"( "c": {"dtype": "F32", "shape": [2], "data_offsets": [7, 15]}})";
  w::Bytes bytes;
  w::put<std::uint64_t>(bytes, header.size());
  for (char ch : header) bytes.push_back(static_cast<std::byte>(ch));
  bytes.resize(bytes.size() + 15);
  w::write_file(path, bytes);
  try {
    (void)safetensors::File(path);
    FAIL("overlapping tensors accepted");
  } catch (const format_error& e) {
    CHECK(e.where() == path.string() + ": tensor 'c'");
    CHECK(std::string(e.what()).find("overlaps tensor 'a'") != std::string::npos);
  }
}

TEST_CASE("fuzz regression: config.json numbers beyond int are errors, not undefined behaviour") {
  // original_max_position_embeddings 1e10 was converted to int unchecked.
  const std::string base =
      R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 16,)"
      R"( "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 300,)"
      R"( "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,)"
      R"( "high_freq_factor": 4.0, "original_max_position_embeddings": )";
  for (const char* bad : {"1e10", "-5", "0.5", "2147483648"}) {
    CAPTURE(bad);
    try {
      (void)parse_hf_config(base + bad + "}}", "config.json");
      FAIL("accepted");
    } catch (const format_error& e) {
      CHECK(e.where() == "config.json: field 'rope_scaling.original_max_position_embeddings'");
    }
  }
  CHECK(parse_hf_config(base + "8192}}", "config.json").config.rope_scaling.original_max_position ==
        8192);
}

TEST_CASE("hardening: a negative GGUF context length is rejected, naming the key") {
  w::TempDir dir("fuzzreg-ctx");
  const auto path = dir / "model.gguf";
  auto g = w::gguf_writer(tiny());
  REQUIRE(g.remove_key("llama.context_length"));
  g.set_i32("llama.context_length", -4096);
  g.write(path);
  CHECK(load_error_where(path) == path.string() + ": key 'llama.context_length'");
}
