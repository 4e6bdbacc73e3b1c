// Helpers of the tasks tests: real tokenizers read from GGUF metadata (no
// weights), the fixture novels, and a byte-level toy codec.
#pragma once

#include <bosch/model/gguf.hpp>
#include <bosch/model/tokenizer.hpp>
#include <bosch/tasks/tasks.hpp>

#include "test_support.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace bosch::test {

/// The tokenizer of a GGUF file, read once per path for the whole run.
inline std::optional<model::Tokenizer> tokenizer_of(const std::filesystem::path& path) {
  if (path.empty()) return std::nullopt;
  static std::vector<std::pair<std::filesystem::path, model::Tokenizer>> cache;
  for (const auto& [p, t] : cache)
    if (p == path) return t;
  const model::gguf::File file(path);
  cache.emplace_back(path, model::Tokenizer(model::tokenizer_spec_from_gguf(file)));
  return cache.back().second;
}

/// stories260K's SentencePiece tokenizer (adds BOS and a space prefix).
inline std::optional<model::Tokenizer> spm_tokenizer() {
  return tokenizer_of(fixture("models/stories260K.gguf"));
}
/// SmolLM2's byte-level BPE (no BOS).
inline std::optional<model::Tokenizer> bpe_tokenizer() { return tokenizer_of(default_model()); }

/// The fixture novels (empty when the fixtures are absent).
inline std::vector<std::filesystem::path> fixture_texts() {
  const auto a = fixture("text/emma.txt");
  const auto b = fixture("text/prideprejudice.txt");
  if (a.empty() || b.empty()) return {};
  return {a, b};
}

/// One token per byte (id = byte value), BOS 256: exact and tokenizer-free, so
/// token positions are byte positions.
inline tasks::TextCodec byte_codec(bool add_bos = true) {
  tasks::TextCodec c;
  c.encode = [](std::string_view text, bool) {
    std::vector<int> ids;
    for (unsigned char ch : text) ids.push_back(ch);
    return ids;
  };
  c.decode = [](std::span<const int> ids) {
    std::string s;
    for (int id : ids)
      if (id >= 0 && id < 256) s += static_cast<char>(id);
    return s;
  };
  c.bos = 256;
  c.eos = 257;
  c.add_bos = add_bos;
  return c;
}

}  // namespace bosch::test
