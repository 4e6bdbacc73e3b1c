// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/model.hpp
/// A loaded model: configuration, fp32 weights and tokenizer, from a GGUF
/// file or a Hugging Face checkpoint directory.

#include <bosch/model/config.hpp>
#include <bosch/model/tokenizer.hpp>
#include <bosch/model/weights.hpp>

#include <cstdint>
#include <filesystem>
#include <string>

namespace bosch::model {

/// A model in memory.
struct Model {
  Config config;
  Weights weights;
  Tokenizer tokenizer;
  std::filesystem::path source;  ///< the file or directory it was loaded from
  /// A fingerprint of the source files (model::fingerprint: XXH64 over their
  /// sizes and whole content, hex), recorded in mask files so a mask can be matched to its model.
  std::string fingerprint;

  /// Parameter count (embedding counted once when tied).
  std::uint64_t parameter_count() const noexcept { return weights.bytes() / sizeof(float); }
};

/// Loads a model: a `.gguf` file, or a directory holding `config.json`,
/// `tokenizer.json` and one or more `*.safetensors` (with
/// `model.safetensors.index.json` when sharded). Throws bosch::file_error for
/// a missing or unreadable path and bosch::format_error, naming the file and
/// the tensor or field, for anything malformed or unsupported.
Model load(const std::filesystem::path& path);

}  // namespace bosch::model
