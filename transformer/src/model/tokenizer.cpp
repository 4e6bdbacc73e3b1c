// SPDX-License-Identifier: Apache-2.0
// bosch::model::Tokenizer: tables from a TokenizerSpec, special-token
// partitioning, encode and decode. The BPE algorithms live in
// tokenizer_bpe.cpp (byte-level) and tokenizer_spm.cpp (SentencePiece style).

#include "tokenizer_detail.hpp"

#include <bosch/error.hpp>

#include <algorithm>

namespace bosch::model {

namespace {

constexpr const char* kWhere = "tokenizer";

std::string at(const char* field, std::size_t index) {
  return std::string(kWhere) + ": " + field + "[" + std::to_string(index) + "]";
}

void check_id(int id, int n, const char* field) {
  if (id < -1 || id >= n)
    throw format_error("token id " + std::to_string(id) + " outside the vocabulary of " +
                           std::to_string(n) + " tokens",
                       std::string(kWhere) + ": " + field);
}

}  // namespace

Tokenizer::Impl::Impl(TokenizerSpec s) : spec(std::move(s)) {
  using namespace detail;
  const std::size_t n = spec.tokens.size();
  if (n == 0) throw format_error("empty vocabulary", std::string(kWhere) + ": tokens");
  if (n > 0x7FFFFFFF) throw format_error("vocabulary too large", std::string(kWhere) + ": tokens");
  const int vocab = static_cast<int>(n);
  if (!spec.scores.empty() && spec.scores.size() != n)
    throw format_error(std::to_string(spec.scores.size()) + " scores for " + std::to_string(n) +
                           " tokens",
                       std::string(kWhere) + ": scores");
  if (!spec.token_types.empty() && spec.token_types.size() != n)
    throw format_error(std::to_string(spec.token_types.size()) + " token types for " +
                           std::to_string(n) + " tokens",
                       std::string(kWhere) + ": token_types");
  check_id(spec.bos, vocab, "bos");
  check_id(spec.eos, vocab, "eos");
  check_id(spec.unk, vocab, "unk");
  check_id(spec.pad, vocab, "pad");
  if (spec.add_bos && spec.bos < 0)
    throw format_error("add_bos is set but there is no BOS token", std::string(kWhere) + ": bos");

  // Token types: as given (values outside 1..6 count as normal), or derived.
  types.assign(n, type_normal);
  if (!spec.token_types.empty()) {
    for (std::size_t i = 0; i < n; ++i) {
      const int t = spec.token_types[i];
      types[i] = (t >= type_normal && t <= type_byte) ? static_cast<std::uint8_t>(t)
                                                      : std::uint8_t{type_normal};
    }
  } else {
    for (int id : {spec.bos, spec.eos, spec.pad})
      if (id >= 0) types[static_cast<std::size_t>(id)] = type_control;
    if (spec.unk >= 0) types[static_cast<std::size_t>(spec.unk)] = type_unknown;
    if (spec.kind == TokenizerSpec::Kind::spm)
      for (std::size_t i = 0; i < n; ++i)
        if (parse_byte_token(spec.tokens[i])) types[i] = type_byte;
  }

  ids.reserve(n);
  for (std::size_t i = 0; i < n; ++i) ids.emplace(spec.tokens[i], static_cast<int>(i));

  // Decoded bytes of every token.
  pieces.resize(n);
  byte_tokens.fill(-1);
  const bool spm = spec.kind == TokenizerSpec::Kind::spm;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& text = spec.tokens[i];
    switch (types[i]) {
      case type_normal:
        pieces[i] = spm ? spm_unescape(text) : byte_level_decode(text);
        break;
      case type_byte:
        if (auto b = parse_byte_token(text)) {
          pieces[i] = std::string(1, static_cast<char>(*b));
          if (spm && byte_tokens[*b] < 0) byte_tokens[*b] = static_cast<int>(i);
        } else {
          pieces[i] = spm ? spm_unescape(text) : byte_level_decode(text);
        }
        break;
      default:  // control, unknown, unused, user-defined: their text as written
        pieces[i] = text;
        break;
    }
  }

  // Tokens matched in the raw text, longest first (ties: lower id first).
  for (std::size_t i = 0; i < n; ++i) {
    const auto t = types[i];
    if ((t == type_control || t == type_user_defined || t == type_unknown) &&
        !spec.tokens[i].empty())
      specials.push_back(static_cast<int>(i));
  }
  std::stable_sort(specials.begin(), specials.end(), [&](int a, int b) {
    return spec.tokens[static_cast<std::size_t>(a)].size() >
           spec.tokens[static_cast<std::size_t>(b)].size();
  });

  if (spm) return;

  // ---- byte-level BPE tables --------------------------------------------------------
  const auto& byte_text = byte_to_unicode();
  for (int b = 0; b < 256; ++b) byte_tokens[b] = find(byte_text[b]);

  merges.reserve(spec.merges.size());
  for (std::size_t k = 0; k < spec.merges.size(); ++k) {
    const std::string& m = spec.merges[k];
    // "left right": tokens may (outside byte-level vocabularies) contain spaces,
    // so take the first split whose two sides are both tokens.
    int left = -1, right = -1;
    for (std::size_t sp = m.find(' '); sp != std::string::npos; sp = m.find(' ', sp + 1)) {
      left = find(std::string_view(m).substr(0, sp));
      right = find(std::string_view(m).substr(sp + 1));
      if (left >= 0 && right >= 0) break;
    }
    if (left < 0 || right < 0)
      throw format_error("merge '" + m + "' is not two vocabulary tokens separated by a space",
                         at("merges", k));
    const std::string merged = spec.tokens[static_cast<std::size_t>(left)] +
                               spec.tokens[static_cast<std::size_t>(right)];
    const int result = find(merged);
    if (result < 0)
      throw format_error("merge '" + m + "' makes '" + merged + "', which is not in the vocabulary",
                         at("merges", k));
    // A repeated merge keeps its first (highest) priority.
    merges.emplace(pair_key(left, right), Merge{static_cast<int>(k), result});
  }

  ignore_merges = spec.ignore_merges || pre_tokenizer_ignores_merges(spec.pre);
  splitter = std::make_unique<RegexSplitter>(spec.pre_regexes.empty()
                                                 ? pre_tokenizer_regexes(spec.pre)
                                                 : spec.pre_regexes);
}

// ---- Tokenizer --------------------------------------------------------------------------

Tokenizer::Tokenizer() = default;

Tokenizer::Tokenizer(TokenizerSpec spec) : impl_(std::make_shared<const Impl>(std::move(spec))) {}

namespace {

// (A template: the Impl type is private to Tokenizer.)
template <class Ptr>
const auto& checked(const Ptr& impl, const char* what) {
  if (!impl) throw error(std::string("empty tokenizer (no vocabulary) used to ") + what, kWhere);
  return *impl;
}

}  // namespace

std::vector<int> Tokenizer::encode(std::string_view text, bool add_special,
                                   bool parse_special) const {
  const Impl& t = checked(impl_, "encode");
  std::vector<int> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && t.spec.add_bos) out.push_back(t.spec.bos);
  if (text.empty()) return out;

  // Split the text at special-token occurrences, longest tokens first (llama.cpp):
  // fragments are either a token id or a raw [begin, end) range.
  struct Fragment {
    int id;  // -1: raw text
    std::size_t begin, end;
  };
  std::vector<Fragment> fragments{{-1, 0, text.size()}};
  std::vector<Fragment> next;
  for (int id : t.specials) {
    const auto type = t.types[static_cast<std::size_t>(id)];
    if (!parse_special && type != detail::type_user_defined) continue;
    const std::string& needle = t.spec.tokens[static_cast<std::size_t>(id)];
    if (text.find(needle) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      std::size_t pos = f.begin;
      while (pos < f.end) {
        const std::size_t hit = text.substr(0, f.end).find(needle, pos);
        if (hit == std::string_view::npos) break;
        if (hit > pos) next.push_back({-1, pos, hit});
        next.push_back({id, hit, hit + needle.size()});
        pos = hit + needle.size();
      }
      if (pos < f.end) next.push_back({-1, pos, f.end});
    }
    fragments.swap(next);
  }

  if (t.spec.kind == TokenizerSpec::Kind::spm) {
    // A space is prefixed to the first fragment and to each one after a special
    // token (llama.cpp's SentencePiece behaviour).
    bool after_special = true;
    for (const Fragment& f : fragments) {
      if (f.id >= 0) {
        out.push_back(f.id);
        after_special = true;
        continue;
      }
      std::string escaped;
      if (t.spec.add_space_prefix && after_special) escaped = "\xE2\x96\x81";
      escaped += detail::spm_escape(text.substr(f.begin, f.end - f.begin));
      t.spm_fragment(escaped, out);
      after_special = false;
    }
    return out;
  }

  std::unordered_map<std::string_view, std::pair<std::size_t, std::size_t>> cache;
  std::vector<int> cached;
  for (const Fragment& f : fragments) {
    if (f.id >= 0) {
      out.push_back(f.id);
    } else {
      t.bpe_fragment(text.substr(f.begin, f.end - f.begin), out, cache, cached);
    }
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int> ids, bool keep_special) const {
  const Impl& t = checked(impl_, "decode");
  std::string out;
  // SentencePiece: the space prefixed when encoding is dropped from the first
  // piece that has text (after any leading control tokens such as BOS).
  bool strip_space = t.spec.kind == TokenizerSpec::Kind::spm && t.spec.add_space_prefix;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const int id = ids[i];
    if (id < 0 || id >= vocab_size())
      throw invalid_argument("token id " + std::to_string(id) + " outside the vocabulary of " +
                                 std::to_string(vocab_size()) + " tokens",
                             "decode: ids[" + std::to_string(i) + "]");
    const auto type = t.types[static_cast<std::size_t>(id)];
    const bool special =
        type == detail::type_control || type == detail::type_unknown || type == detail::type_unused;
    if (special && !keep_special) continue;
    std::string_view piece = t.pieces[static_cast<std::size_t>(id)];
    if (strip_space && !special) {
      if (!piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
      strip_space = false;
    }
    out += piece;
  }
  return out;
}

std::string Tokenizer::piece(int id) const {
  const Impl& t = checked(impl_, "look up a piece");
  if (id < 0 || id >= vocab_size())
    throw invalid_argument("token id " + std::to_string(id) + " outside the vocabulary of " +
                               std::to_string(vocab_size()) + " tokens",
                           "piece");
  return t.pieces[static_cast<std::size_t>(id)];
}

std::vector<std::string> Tokenizer::pre_tokenize(std::string_view text) const {
  const Impl& t = checked(impl_, "pre-tokenize");
  std::vector<std::string> words;
  if (!t.splitter) {
    if (!text.empty()) words.emplace_back(text);
    return words;
  }
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  t.splitter->split(text, ranges);
  words.reserve(ranges.size());
  for (const auto& [b, e] : ranges) words.emplace_back(text.substr(b, e - b));
  return words;
}

int Tokenizer::token_id(std::string_view token_text) const {
  return impl_ ? impl_->find(token_text) : -1;
}

bool Tokenizer::is_special(int id) const {
  const Impl& t = checked(impl_, "classify a token");
  if (id < 0 || id >= vocab_size())
    throw invalid_argument("token id " + std::to_string(id) + " outside the vocabulary",
                           "is_special");
  const auto type = t.types[static_cast<std::size_t>(id)];
  return type == detail::type_control || type == detail::type_unknown ||
         type == detail::type_unused;
}

int Tokenizer::vocab_size() const noexcept {
  return impl_ ? static_cast<int>(impl_->spec.tokens.size()) : 0;
}
int Tokenizer::bos() const noexcept { return impl_ ? impl_->spec.bos : -1; }
int Tokenizer::eos() const noexcept { return impl_ ? impl_->spec.eos : -1; }

const TokenizerSpec& Tokenizer::spec() const {
  static const TokenizerSpec empty{};
  return impl_ ? impl_->spec : empty;
}

}  // namespace bosch::model
