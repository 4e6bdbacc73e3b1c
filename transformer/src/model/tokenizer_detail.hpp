// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file src/model/tokenizer_detail.hpp
/// Internals of bosch::model::Tokenizer shared by its translation units
/// (tokenizer.cpp, tokenizer_unicode.cpp, tokenizer_pretokenize.cpp,
/// tokenizer_bpe.cpp, tokenizer_spm.cpp). Not installed.

#include <bosch/model/tokenizer.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace bosch::model::detail {

// ---- UTF-8 and byte-level helpers (tokenizer_unicode.cpp) ----------------------

/// Length in bytes of the UTF-8 character starting at `s[i]` (i < s.size()):
/// 1 to 4 for a well-formed sequence, 1 for an invalid or truncated one (so
/// that stepping by it visits every byte of malformed input exactly once).
std::size_t utf8_char_length(std::string_view s, std::size_t i) noexcept;

/// UTF-8 encoding of code point `cp` (appended to `out`).
void append_utf8(std::string& out, std::uint32_t cp);

/// GPT-2's byte-to-unicode table: byte b -> the UTF-8 text of the printable
/// code point that stands for it in byte-level BPE vocabularies (printable
/// ASCII and Latin-1 bytes map to themselves; the other 68 bytes map to
/// U+0100 + k in byte order, e.g. ' ' -> 'Ġ' U+0120, '\n' -> 'Ċ' U+010A).
const std::array<std::string, 256>& byte_to_unicode();

/// Byte-level text -> raw bytes: each character of the table maps back to its
/// byte; characters outside the table (and malformed UTF-8) are copied as is.
std::string byte_level_decode(std::string_view text);

/// Raw bytes -> byte-level text (each byte through byte_to_unicode()).
std::string byte_level_encode(std::string_view bytes);

/// SentencePiece escaping: every ' ' becomes U+2581 ("▁"), and back.
std::string spm_escape(std::string_view text);
std::string spm_unescape(std::string_view text);

/// If `text` is a byte-fallback token "<0xXX>" (two hex digits), its byte.
std::optional<unsigned char> parse_byte_token(std::string_view text) noexcept;

// ---- pre-tokenization (tokenizer_pretokenize.cpp) -------------------------------

/// The split regexes of a named pre-tokenizer (GGUF tokenizer.ggml.pre),
/// applied in order; throws bosch::format_error (where "tokenizer: pre") for
/// an unknown name.
std::vector<std::string> pre_tokenizer_regexes(std::string_view name);

/// True for the pre-tokenizers whose models skip the merges of a word that is
/// itself a token (llama.cpp's ignore_merges; Llama 3's tokenizer.json).
bool pre_tokenizer_ignores_merges(std::string_view name) noexcept;

/// Splits text into words by a sequence of PCRE2 regexes (UTF + UCP, JIT when
/// available, invalid UTF-8 tolerated): each regex is applied to every piece
/// left by the previous ones, and both its matches and the text between them
/// become pieces (the Hugging Face "Isolated" split behaviour, as llama.cpp).
/// Thread-safe: the compiled patterns are shared read-only, match data is
/// created per call.
class RegexSplitter {
 public:
  /// Compiles the patterns; throws bosch::format_error naming the pattern on a
  /// syntax error.
  explicit RegexSplitter(const std::vector<std::string>& patterns);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  /// Appends the [begin, end) byte ranges (relative to `text`) of the words of
  /// `text` to `out`, in order; together they cover `text` exactly.
  void split(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const;

 private:
  struct Pattern;
  std::vector<std::unique_ptr<Pattern>> patterns_;
};

// ---- lookup tables ----------------------------------------------------------------

/// std::string keys with heterogeneous lookup by std::string_view.
struct TextHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};
using TextMap = std::unordered_map<std::string, int, TextHash, std::equal_to<>>;

/// GGUF token types (llama.cpp's llama_token_type).
enum TokenType : std::uint8_t {
  type_normal = 1,
  type_unknown = 2,
  type_control = 3,
  type_user_defined = 4,
  type_unused = 5,
  type_byte = 6,
};

}  // namespace bosch::model::detail

namespace bosch::model {

/// The tables built once from a TokenizerSpec; shared by copies of a Tokenizer.
struct Tokenizer::Impl {
  TokenizerSpec spec;
  std::vector<std::uint8_t> types;     ///< detail::TokenType per id
  std::vector<std::string> pieces;     ///< id -> the bytes it decodes to
  detail::TextMap ids;                 ///< token text -> id (first id with that text)
  /// Tokens matched in the raw input before pre-tokenization, longest text
  /// first: user-defined always, control and unknown only with parse_special.
  std::vector<int> specials;
  /// byte -> token: byte_bpe: the byte-level character; spm: "<0xXX>". -1: none.
  std::array<int, 256> byte_tokens{};

  // byte_bpe
  struct Merge {
    int rank;    ///< priority: lower merges first
    int result;  ///< id of the merged token
  };
  std::unordered_map<std::uint64_t, Merge> merges;  ///< (left id << 32 | right id) -> merge
  std::unique_ptr<detail::RegexSplitter> splitter;
  bool ignore_merges = false;

  explicit Impl(TokenizerSpec s);

  static std::uint64_t pair_key(int left, int right) noexcept {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
           static_cast<std::uint32_t>(right);
  }
  int find(std::string_view text) const noexcept {
    auto it = ids.find(text);
    return it == ids.end() ? -1 : it->second;
  }

  /// Byte-level BPE of one pre-tokenized word (raw bytes), appended to `out`.
  void bpe_word(std::string_view word, std::vector<int>& out) const;
  /// Byte-level BPE of a raw text fragment: pre-tokenize, then BPE per word,
  /// with a per-call cache of repeated words.
  void bpe_fragment(std::string_view text, std::vector<int>& out,
                    std::unordered_map<std::string_view, std::pair<std::size_t, std::size_t>>& cache,
                    std::vector<int>& cached) const;
  /// SentencePiece BPE of an escaped fragment ("▁" for spaces), appended to `out`.
  void spm_fragment(std::string_view escaped, std::vector<int>& out) const;
};

}  // namespace bosch::model
