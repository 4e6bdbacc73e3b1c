// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/tokenizer.hpp
/// Tokenizers of the supported models: byte-level BPE with the model's
/// pre-tokenizer regexes (GPT-2, Llama 3, Qwen2, SmolLM2; through PCRE2) and
/// SentencePiece-style BPE with scores (Llama 2, stories260K).

#include <bosch/model/tokenizer_spec.hpp>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bosch::model {

/// An immutable tokenizer; cheap to copy (shares its tables), thread-safe.
class Tokenizer {
 public:
  /// An empty tokenizer (vocab_size() == 0); encode/decode throw.
  Tokenizer();
  /// Builds the tables from `spec`; throws bosch::format_error on an
  /// inconsistent spec (unknown pre-tokenizer, merge naming an unknown token, ...).
  explicit Tokenizer(TokenizerSpec spec);

  /// Token ids of `text`. With `add_special`, BOS is prepended when the model
  /// asks for it (spec().add_bos). With `parse_special`, control tokens written
  /// in the text (e.g. "<|im_start|>") map to their ids; otherwise they are
  /// encoded as plain text.
  std::vector<int> encode(std::string_view text, bool add_special = false,
                          bool parse_special = false) const;
  /// The text of `ids` (control tokens omitted unless `keep_special`).
  std::string decode(std::span<const int> ids, bool keep_special = false) const;
  /// The text one token stands for (decoded bytes; may be a partial UTF-8 sequence).
  std::string piece(int id) const;

  /// The words `text` is split into before BPE (byte_bpe only: the model's
  /// pre-tokenizer regexes; for spm the whole text is one word). Special tokens
  /// are not treated specially here.
  std::vector<std::string> pre_tokenize(std::string_view text) const;
  /// The id of the token whose text (as stored in the vocabulary: byte-level
  /// or "▁" form) is `token_text`, or -1.
  int token_id(std::string_view token_text) const;
  /// True for control, unknown and unused tokens: the ones decode() omits
  /// unless asked to keep them. Throws bosch::invalid_argument for a bad id.
  bool is_special(int id) const;

  int vocab_size() const noexcept;
  int bos() const noexcept;
  int eos() const noexcept;
  const TokenizerSpec& spec() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace bosch::model
