// SPDX-License-Identifier: Apache-2.0
// Pre-tokenization of byte-level BPE: the models' split regexes through PCRE2.

#include "tokenizer_detail.hpp"

#include <bosch/error.hpp>

#include <pcre2.h>

#include <array>

namespace bosch::model::detail {

namespace {

// GPT-2 (OpenAI's encoder.py; the pattern of the tokenizers ByteLevel
// pre-tokenizer with use_regex). The trailing \s+ only catches whitespace that
// the other branches leave, which the gap handling would keep anyway.
constexpr const char* kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

// Llama 3 (tokenizer.json Split regex). The original writes the contractions
// as (?i:'s|'t|...); they are spelled out with explicit letter classes, as
// llama.cpp does, so that Unicode case folding (e.g. U+017F 'ſ' ~ 's') does
// not widen them.
constexpr const char* kLlama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)re"
    R"re(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Qwen2 / Qwen3: as Llama 3 but single digits.
constexpr const char* kQwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)re"
    R"re(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// tokenizers' Digits(individual_digits = true): every \p{N} character alone.
constexpr const char* kDigits = R"re(\p{N})re";

struct Named {
  std::string_view name;
  std::vector<std::string> regexes;
  bool ignore_merges;
};

const std::vector<Named>& named_pre_tokenizers() {
  static const std::vector<Named> table = [] {
    std::vector<Named> t;
    const std::vector<std::string> gpt2{kGpt2};
    const std::vector<std::string> llama3{kLlama3};
    const std::vector<std::string> qwen2{kQwen2};
    // SmolLM2 (tokenizer.json: Sequence[Digits(individual_digits), ByteLevel])
    // and the other models llama.cpp groups with it.
    const std::vector<std::string> digits_gpt2{kDigits, kGpt2};
    // llama.cpp's fallback for byte-level BPE models without a known pre-tokenizer.
    const std::vector<std::string> fallback{R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2,
                                            R"re(\p{N}+)re", R"re([0-9][0-9][0-9])re"};
    for (std::string_view n : {"gpt2", "gpt-2", "mpt", "olmo", "jais", "trillion"})
      t.push_back({n, gpt2, false});
    // llama.cpp: the Llama-3 family skips the merges of words that are tokens.
    for (std::string_view n : {"llama3", "llama-v3", "llama-bpe", "falcon3"})
      t.push_back({n, llama3, true});
    for (std::string_view n : {"qwen2", "stablelm2", "deepseek-r1-qwen"})
      t.push_back({n, qwen2, false});
    for (std::string_view n :
         {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"})
      t.push_back({n, digits_gpt2, false});
    t.push_back({"default", fallback, false});
    return t;
  }();
  return table;
}

}  // namespace

std::vector<std::string> pre_tokenizer_regexes(std::string_view name) {
  for (const Named& n : named_pre_tokenizers())
    if (n.name == name) return n.regexes;
  throw format_error("unknown pre-tokenizer '" + std::string(name) + "'", "tokenizer: pre");
}

bool pre_tokenizer_ignores_merges(std::string_view name) noexcept {
  for (const Named& n : named_pre_tokenizers())
    if (n.name == name) return n.ignore_merges;
  return false;
}

// ---- RegexSplitter ----------------------------------------------------------------

struct RegexSplitter::Pattern {
  pcre2_code* code = nullptr;
  std::string text;
  ~Pattern() {
    if (code) pcre2_code_free(code);
  }
};

RegexSplitter::RegexSplitter(const std::vector<std::string>& patterns) {
  for (std::size_t k = 0; k < patterns.size(); ++k) {
    auto p = std::make_unique<Pattern>();
    p->text = patterns[k];
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    p->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p->text.data()), p->text.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code,
                            &error_offset, nullptr);
    if (!p->code) {
      std::array<PCRE2_UCHAR, 256> buffer{};
      pcre2_get_error_message(error_code, buffer.data(), buffer.size());
      throw format_error("bad regex at offset " + std::to_string(error_offset) + ": " +
                             reinterpret_cast<const char*>(buffer.data()) + " in '" + p->text +
                             "'",
                         "tokenizer: pre-tokenizer regex " + std::to_string(k));
    }
    // JIT is an optimization only: when unavailable, pcre2_match interprets.
    pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE);
    patterns_.push_back(std::move(p));
  }
}

RegexSplitter::~RegexSplitter() = default;

namespace {

struct MatchResources {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchResources() {
    data = pcre2_match_data_create(4, nullptr);
    context = pcre2_match_context_create(nullptr);
    // Long runs of whitespace backtrack through \s+(?!\S); give JIT room.
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (context && stack) pcre2_jit_stack_assign(context, nullptr, stack);
    if (!data || !context) throw error("PCRE2: out of memory", "tokenizer");
  }
  ~MatchResources() {
    if (stack) pcre2_jit_stack_free(stack);
    if (context) pcre2_match_context_free(context);
    if (data) pcre2_match_data_free(data);
  }
  MatchResources(const MatchResources&) = delete;
  MatchResources& operator=(const MatchResources&) = delete;
};

}  // namespace

void RegexSplitter::split(std::string_view text,
                          std::vector<std::pair<std::size_t, std::size_t>>& out) const {
  using Range = std::pair<std::size_t, std::size_t>;
  std::vector<Range> pieces{{0, text.size()}};
  if (text.empty()) return;
  if (patterns_.empty()) {
    out.insert(out.end(), pieces.begin(), pieces.end());
    return;
  }
  MatchResources res;
  std::vector<Range> next;
  for (const auto& pattern : patterns_) {
    next.clear();
    for (const auto& [begin, end] : pieces) {
      // Each piece is matched on its own, so look-arounds stop at its edges.
      const std::string_view piece = text.substr(begin, end - begin);
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      std::size_t last = 0;  // end of the last emitted range, relative to piece
      std::size_t pos = 0;
      while (pos < piece.size()) {
        const int rc = pcre2_match(pattern->code, subject, piece.size(), pos, 0, res.data,
                                   res.context);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          std::array<PCRE2_UCHAR, 256> buffer{};
          pcre2_get_error_message(rc, buffer.data(), buffer.size());
          throw error(std::string("PCRE2 match failed: ") +
                          reinterpret_cast<const char*>(buffer.data()),
                      "tokenizer: pre-tokenizer regex '" + pattern->text + "'");
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(res.data);
        const std::size_t s = ov[0], e = ov[1];
        if (e <= s) {  // an empty match splits nothing: step over one character
          if (s >= piece.size()) break;
          pos = s + utf8_char_length(piece, s);
          continue;
        }
        if (s > last) next.emplace_back(begin + last, begin + s);
        next.emplace_back(begin + s, begin + e);
        last = pos = e;
      }
      if (last < piece.size()) next.emplace_back(begin + last, end);
    }
    pieces.swap(next);
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

}  // namespace bosch::model::detail
