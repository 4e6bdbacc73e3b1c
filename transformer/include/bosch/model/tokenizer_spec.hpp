// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/tokenizer_spec.hpp
/// The data a tokenizer is built from, as read from GGUF metadata
/// (tokenizer.ggml.*) or a Hugging Face tokenizer.json. Readers fill it;
/// bosch::model::Tokenizer consumes it.

#include <string>
#include <vector>

namespace bosch::model {

struct TokenizerSpec {
  enum class Kind {
    byte_bpe,  ///< byte-level BPE with merges (GGUF "gpt2"): GPT-2, Llama 3, Qwen2, SmolLM2
    spm,       ///< SentencePiece-style BPE with scores (GGUF "llama"): Llama 2, stories260K
  };
  Kind kind = Kind::byte_bpe;
  /// Pre-tokenizer name (GGUF tokenizer.ggml.pre): "gpt2", "llama-bpe",
  /// "qwen2", "smollm", "default", ... Selects the split regexes.
  std::string pre = "default";
  std::vector<std::string> tokens;  ///< id -> token text (byte-level or SPM form)
  std::vector<float> scores;        ///< SPM merge scores; may be empty for byte_bpe
  std::vector<int> token_types;     ///< GGUF token types (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte); may be empty
  std::vector<std::string> merges;  ///< "left right" pairs in priority order (byte_bpe)
  int bos = -1, eos = -1, unk = -1, pad = -1;
  bool add_bos = false;             ///< prepend BOS when encoding with add_special
  bool add_space_prefix = true;     ///< SPM: prepend a space ("▁") to the text
  /// byte_bpe: custom split regexes (PCRE2 syntax, applied in order, matches
  /// and the text between them both kept) that replace the named `pre`
  /// pre-tokenizer's when non-empty (a tokenizer.json Split pattern that is
  /// not one of the known ones).
  std::vector<std::string> pre_regexes;
  /// byte_bpe: a pre-tokenized word that is itself a token is not merged
  /// (tokenizer.json model.ignore_merges). Implied by the Llama-3 pre-tokenizer names.
  bool ignore_merges = false;
};

}  // namespace bosch::model
