// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: model.safetensors.index.json of a Hugging Face checkpoint
// directory. The directory (config.json, tokenizer.json and two valid
// safetensors shards of a tiny model) is written once; each input becomes the
// index file, and the directory is read with bosch::model::read_hf and
// read_config (which resolves tie_word_embeddings from the shards).

#include "fuzz_support.hpp"
#include "tiny_model.hpp"

#include <bosch/model/loader.hpp>

namespace {
std::filesystem::path dir;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  dir = bosch::fuzz::scratch_dir() / "hf";
  auto m = bosch::fuzz::tiny_model(bosch::model::Arch::qwen2, 2);
  bosch::test::writers::HfOptions opt;
  opt.shards = 2;
  bosch::test::writers::write_hf(m, dir, opt);
  // config.json without tie_word_embeddings, so read_config opens the shards too.
  auto cfg = bosch::test::writers::config_json(m.config, m.tokenizer);
  cfg.erase("tie_word_embeddings");
  bosch::test::writers::write_text(dir / "config.json", cfg.dump(1));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto index = bosch::fuzz::write_scratch("hf/model.safetensors.index.json", data, size);
  // Errors name the index, a shard or the directory: all lie under `dir`.
  const std::string d = dir.string();
  bosch::fuzz::check([&] { (void)bosch::model::read_hf(dir); }, d);
  bosch::fuzz::check([&] { (void)bosch::model::read_config(dir); }, d);
  return 0;
}
