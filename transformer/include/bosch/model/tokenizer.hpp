// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/tokenizer.hpp
/// Tokenizers of the supported models: byte-level BPE with the model's
/// pre-tokenizer regexes (GPT-2, Llama 3, Qwen2, SmolLM2; through PCRE2) and
/// SentencePiece-style BPE with scores (Llama 2, stories260K). Behaviour
/// follows llama.cpp (llama-vocab.cpp), whose test vectors it reproduces:
///
///  - Byte-level BPE (TokenizerSpec::Kind::byte_bpe): the text is split into
///    words by the pre-tokenizer's regexes (TokenizerSpec::pre: "gpt2"/"gpt-2",
///    "llama-bpe"/"llama3", "qwen2", "smollm" (digits isolated, then the GPT-2
///    regex), "default", and the other names llama.cpp groups with these; or
///    TokenizerSpec::pre_regexes), compiled by PCRE2 with UTF + UCP (JIT when
///    available; malformed UTF-8 is matched as separate bytes, never
///    rejected). Each word's bytes map to GPT-2's byte-to-unicode characters,
///    and the adjacent pair with the lowest merge rank is merged until none
///    is left (leftmost first on ties). With ignore_merges (Llama 3) a word
///    that is itself a token is taken whole.
///  - SentencePiece-style BPE (Kind::spm): spaces become U+2581, a space is
///    prefixed (spec.add_space_prefix) to the text and to the text after each
///    special token, and the adjacent pair whose concatenation is the
///    highest-scoring token is merged until none is left; characters without
///    a token become their bytes' <0xXX> tokens (or one unknown token each).
///  - Special tokens: before pre-tokenization the text is cut at occurrences
///    of user-defined tokens (always) and of control and unknown tokens (only
///    with parse_special), longest token text first.
///  - Decoding concatenates the tokens' bytes (byte-level characters mapped
///    back, U+2581 to a space, <0xXX> to its byte), so a malformed UTF-8
///    input comes back byte for byte; for spm with a space prefix, one
///    leading space of the first text piece is dropped, so that
///    decode(encode(s)) == s.
///
/// Encoding is O(n log n) in the word (spm: text) length, with a per-call
/// cache of repeated words: 100 KB of English takes about 10-20 ms here.

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
  /// An empty tokenizer (vocab_size() == 0); encode/decode throw bosch::error.
  Tokenizer();
  /// Builds the tables from `spec`; throws bosch::format_error on an
  /// inconsistent spec (empty vocabulary, scores or token types of another
  /// length, special ids outside the vocabulary, unknown pre-tokenizer, bad
  /// regex, a merge that does not name two tokens whose concatenation is a
  /// token), with `where` naming the field, e.g. "tokenizer: merges[12]".
  explicit Tokenizer(TokenizerSpec spec);

  /// Token ids of `text`. With `add_special`, BOS is prepended when the model
  /// asks for it (spec().add_bos). With `parse_special`, control tokens written
  /// in the text (e.g. "<|im_start|>") map to their ids; otherwise they are
  /// encoded as plain text. Throws bosch::invalid_argument when an spm
  /// vocabulary has neither a byte token nor an unknown token for a character.
  std::vector<int> encode(std::string_view text, bool add_special = false,
                          bool parse_special = false) const;
  /// The text of `ids` (control, unknown and unused tokens omitted unless
  /// `keep_special`, then written as their text). Throws
  /// bosch::invalid_argument for an id outside the vocabulary.
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
