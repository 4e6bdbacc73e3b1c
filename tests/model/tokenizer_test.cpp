// Unit tests of the tokenizer core on small hand-made specifications: merge
// priorities, ignore_merges, the named pre-tokenizers, special tokens,
// malformed UTF-8, SentencePiece byte fallback, errors and thread safety.

#include <bosch/error.hpp>
#include <bosch/model/tokenizer.hpp>

#include "model/writers.hpp"
#include "test_support.hpp"

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>

#include <string>
#include <thread>
#include <vector>

namespace {

using bosch::model::Tokenizer;
using bosch::model::TokenizerSpec;

using bosch::test::writers::byte_level_char;  // GPT-2 byte -> character table

/// Byte-level spec: ids 0..255 are the bytes, then `extra` tokens in order.
TokenizerSpec byte_spec(const std::vector<std::string>& extra, std::vector<std::string> merges,
                        const std::string& pre = "gpt2") {
  TokenizerSpec s;
  s.kind = TokenizerSpec::Kind::byte_bpe;
  s.pre = pre;
  for (int b = 0; b < 256; ++b) s.tokens.push_back(byte_level_char(static_cast<std::uint8_t>(b)));
  for (const auto& t : extra) s.tokens.push_back(t);
  s.merges = std::move(merges);
  s.add_space_prefix = false;
  return s;
}

const std::string kSpace = "\xE2\x96\x81";  // "▁"

/// SentencePiece-style spec: <unk>, <s>, </s>, optionally 256 byte tokens, then pieces.
TokenizerSpec spm_spec(bool bytes) {
  TokenizerSpec s;
  s.kind = TokenizerSpec::Kind::spm;
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.token_types = {2, 3, 3};
  s.scores = {0, 0, 0};
  if (bytes) {
    const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      s.tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
      s.token_types.push_back(6);
      s.scores.push_back(0);
    }
  }
  const std::vector<std::pair<std::string, float>> pieces = {
      {kSpace, -1}, {"a", -2}, {"b", -3}, {"c", -4}, {kSpace + "a", -5},
      {"ab", -6},   {kSpace + "ab", -7},  {"bc", -0.5f}};
  for (const auto& [t, score] : pieces) {
    s.tokens.push_back(t);
    s.token_types.push_back(1);
    s.scores.push_back(score);
  }
  s.bos = 1;
  s.eos = 2;
  s.unk = 0;
  s.add_bos = true;
  s.add_space_prefix = true;
  return s;
}

template <class F>
std::string error_where(F&& f) {
  try {
    f();
  } catch (const bosch::error& e) {
    return e.where();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("tokenizer: merges apply by rank, leftmost first on ties") {
  // 256 = "ab", 257 = "bc", 258 = "abc"
  const std::vector<std::string> extra = {"ab", "bc", "abc"};
  const Tokenizer bc_first(byte_spec(extra, {"b c", "a b", "ab c"}));
  CHECK(bc_first.encode("abc") == std::vector<int>{'a', 257});
  const Tokenizer ab_first(byte_spec(extra, {"a b", "b c", "ab c"}));
  CHECK(ab_first.encode("abc") == std::vector<int>{258});
  // "abab": both "a b" pairs merge; "bab" with only "b a"-free merges stays.
  CHECK(ab_first.encode("abab") == std::vector<int>{256, 256});
  // Leftmost on equal ranks: "aaa" with the single merge "a a" -> "aa" + "a".
  const Tokenizer aa(byte_spec({"aa"}, {"a a"}));
  CHECK(aa.encode("aaa") == std::vector<int>{256, 'a'});
  CHECK(aa.encode("aaaa") == std::vector<int>{256, 256});
  // Decoding the ids gives the bytes back.
  CHECK(ab_first.decode(std::vector<int>{258, 'a', 257}) == "abcabc");
  CHECK(ab_first.piece(258) == "abc");
}

TEST_CASE("tokenizer: ignore_merges takes a word that is a token whole") {
  // "abc" is a token but no merge path reaches it from "ab" + "c".
  auto spec = byte_spec({"ab", "abc"}, {"a b"});
  CHECK(Tokenizer(spec).encode("abc") == std::vector<int>{256, 'c'});
  spec.ignore_merges = true;
  CHECK(Tokenizer(spec).encode("abc") == std::vector<int>{257});
  CHECK(Tokenizer(spec).encode("abcabc") == std::vector<int>{256, 'c', 256, 'c'});
  // The Llama-3 pre-tokenizer implies it.
  spec.ignore_merges = false;
  spec.pre = "llama-bpe";
  CHECK(Tokenizer(spec).encode("abc") == std::vector<int>{257});
}

TEST_CASE("tokenizer: named pre-tokenizers split as their models do") {
  using W = std::vector<std::string>;
  const auto words = [](const std::string& pre, const std::string& text) {
    return Tokenizer(byte_spec({}, {}, pre)).pre_tokenize(text);
  };
  CHECK(words("gpt2", "Hello world's 123  x") ==
        W{"Hello", " world", "'s", " 123", " ", " x"});
  CHECK(words("gpt-2", "it's") == W{"it", "'s"});
  // Llama 3: up to three digits per word, case-insensitive contractions,
  // punctuation keeps a following newline.
  CHECK(words("llama-bpe", "12345 IT'S ok!\n\nnext") ==
        W{"123", "45", " IT", "'S", " ok", "!\n\n", "next"});
  CHECK(words("llama3", "12345") == W{"123", "45"});
  CHECK(words("qwen2", "12345 ab") == W{"1", "2", "3", "4", "5", " ab"});
  // SmolLM2: digits isolated first, then the GPT-2 regex on what is left.
  CHECK(words("smollm", "ab 123 x") == W{"ab", " ", "1", "2", "3", " x"});
  CHECK(words("default", "a+b") == W{"a", "+", "b"});
  // Unicode classes: letters of any script are letters, digits of any script digits.
  CHECK(words("gpt2", "caf\xC3\xA9 \xD9\xA3\xD9\xA4") == W{"caf\xC3\xA9", " \xD9\xA3\xD9\xA4"});
  CHECK(words("gpt2", "").empty());
  CHECK_THROWS_AS(Tokenizer(byte_spec({}, {}, "no-such-pre")), bosch::format_error);
  // Custom regexes replace the named ones.
  auto spec = byte_spec({}, {});
  spec.pre_regexes = {"[a-z]+"};
  CHECK(Tokenizer(spec).pre_tokenize("ab12cd") == W{"ab", "12", "cd"});
}

TEST_CASE("tokenizer: malformed UTF-8 survives encode and decode") {
  const Tokenizer tok(byte_spec({"ab"}, {"a b"}));
  const std::string bad = "ab\xFF\xFE ab \xC3 \xE2\x82 z\xF0\x9F";
  const auto ids = tok.encode(bad);
  CHECK(ids.size() >= 10);
  CHECK(tok.decode(ids) == bad);
  // A piece can be a partial UTF-8 sequence.
  CHECK(tok.piece(0xC3) == "\xC3");
}

TEST_CASE("tokenizer: special tokens") {
  // 256 "<|end|>" (control), 257 "<t>" (user-defined), 258 "<t><t>" (user-defined)
  auto spec = byte_spec({"<|end|>", "<t>", "<t><t>"}, {});
  spec.token_types.assign(spec.tokens.size(), 1);
  spec.token_types[256] = 3;
  spec.token_types[257] = 4;
  spec.token_types[258] = 4;
  spec.eos = 256;
  const Tokenizer tok(spec);
  // Control text is plain text unless parse_special is set.
  CHECK(tok.encode("x<|end|>").size() == 8);
  CHECK(tok.encode("x<|end|>", false, true) == std::vector<int>{'x', 256});
  // User-defined tokens always match, longest first.
  CHECK(tok.encode("<t><t><t>") == std::vector<int>{258, 257});
  CHECK(tok.encode("a<t>b") == std::vector<int>{'a', 257, 'b'});
  // decode drops control tokens unless asked, keeps user-defined text.
  CHECK(tok.decode(std::vector<int>{'x', 256, 257}) == "x<t>");
  CHECK(tok.decode(std::vector<int>{'x', 256, 257}, true) == "x<|end|><t>");
  CHECK(tok.is_special(256));
  CHECK(!tok.is_special(257));
  CHECK(tok.eos() == 256);
  CHECK(tok.bos() == -1);
  // add_special without add_bos adds nothing.
  CHECK(tok.encode("x", true) == std::vector<int>{'x'});
}

TEST_CASE("tokenizer: SentencePiece BPE by scores with byte fallback") {
  const Tokenizer tok(spm_spec(true));
  const int base = 3 + 256;  // first piece id
  const int sp = base, a = base + 1, c = base + 3, sp_a = base + 4, sp_ab = base + 6,
            bc = base + 7;
  // "▁abc": the best pair is "bc" (-0.5), then "▁" + "a" (-5); "▁a" + "bc" is no token.
  CHECK(tok.encode("abc") == std::vector<int>{sp_a, bc});
  CHECK(tok.encode("ab") == std::vector<int>{sp_ab});
  CHECK(tok.encode("ab c") == std::vector<int>{sp_ab, sp, c});
  CHECK(tok.encode("a", true) == std::vector<int>{1, sp_a});
  // No token for 'é' (C3 A9): its bytes.
  CHECK(tok.encode("\xC3\xA9") == std::vector<int>{sp, 3 + 0xC3, 3 + 0xA9});
  for (const std::string s : {"abc", " ab c", "a  b", "\xC3\xA9t\xC3\xA9 a", ""}) {
    CHECK(tok.decode(tok.encode(s)) == s);
    CHECK(tok.decode(tok.encode(s, true)) == s);
  }
  CHECK(tok.piece(sp_ab) == " ab");
  CHECK(tok.piece(a) == "a");

  auto no_prefix = spm_spec(true);
  no_prefix.add_space_prefix = false;
  CHECK(Tokenizer(no_prefix).encode("ab") == std::vector<int>{base + 5});
  CHECK(Tokenizer(no_prefix).decode(std::vector<int>{sp_ab}) == " ab");

  // Without byte tokens an unknown character is one <unk>.
  const Tokenizer no_bytes(spm_spec(false));
  CHECK(no_bytes.encode("\xC3\xA9\xC3\xA9") == std::vector<int>{3, 0, 0});
  auto no_unk = spm_spec(false);
  no_unk.unk = -1;
  no_unk.token_types[0] = 1;
  CHECK_THROWS_AS(Tokenizer(no_unk).encode("\xC3\xA9"), bosch::invalid_argument);
}

TEST_CASE("tokenizer: errors") {
  const Tokenizer empty;
  CHECK(empty.vocab_size() == 0);
  CHECK_THROWS_AS(empty.encode("x"), bosch::error);
  CHECK_THROWS_AS(empty.decode(std::vector<int>{0}), bosch::error);
  CHECK(empty.token_id("x") == -1);
  CHECK_THROWS_AS(Tokenizer(TokenizerSpec{}), bosch::format_error);

  CHECK(error_where([] { Tokenizer(byte_spec({"ab"}, {"a b", "a zz"})); }) ==
        "tokenizer: merges[1]");
  CHECK(error_where([] { Tokenizer(byte_spec({"ab"}, {"a b", "b c"})); }) ==
        "tokenizer: merges[1]");  // "bc" is not a token
  CHECK(error_where([] { Tokenizer(byte_spec({}, {"ab"})); }) == "tokenizer: merges[0]");
  auto spec = spm_spec(true);
  spec.scores.pop_back();
  CHECK(error_where([&] { Tokenizer{spec}; }) == "tokenizer: scores");
  spec = spm_spec(true);
  spec.token_types.push_back(1);
  CHECK(error_where([&] { Tokenizer{spec}; }) == "tokenizer: token_types");
  spec = spm_spec(true);
  spec.bos = 100000;
  CHECK(error_where([&] { Tokenizer{spec}; }) == "tokenizer: bos");
  auto bad_regex = byte_spec({}, {});
  bad_regex.pre_regexes = {"(unclosed"};
  CHECK_THROWS_AS(Tokenizer{bad_regex}, bosch::format_error);

  const Tokenizer tok(byte_spec({}, {}));
  CHECK_THROWS_AS(tok.decode(std::vector<int>{256}), bosch::invalid_argument);
  CHECK_THROWS_AS(tok.decode(std::vector<int>{-1}), bosch::invalid_argument);
  CHECK_THROWS_AS(tok.piece(256), bosch::invalid_argument);
}

TEST_CASE("tokenizer: copies share tables and encode concurrently") {
  const Tokenizer original(byte_spec({"ab", "abc"}, {"a b", "ab c"}));
  const Tokenizer copy = original;  // NOLINT(performance-unnecessary-copy-initialization)
  CHECK(&copy.spec() == &original.spec());
  std::string text;
  for (int i = 0; i < 2000; ++i) text += (i % 7 == 0) ? " abc" : " ab" + std::to_string(i);
  const auto expected = original.encode(text);
  std::vector<std::vector<int>> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] { results[static_cast<std::size_t>(t)] = copy.encode(text); });
  for (auto& th : threads) th.join();
  for (const auto& r : results) CHECK(r == expected);
  CHECK(copy.decode(expected) == text);
}

TEST_CASE("tokenizer: random bytes round-trip through both kinds") {
  // Property: byte-level BPE and SPM with byte fallback are lossless on any
  // byte string, malformed UTF-8 included (200 strings of 0..64 bytes each).
  boost::random::mt19937_64 rng(bosch::test::seed(3));
  boost::random::uniform_int_distribution<int> length(0, 64), byte(0, 255), pick(0, 9);
  const Tokenizer bpe(byte_spec({"ab", "abc", "\xC4\xA0" "a"}, {"a b", "ab c", "\xC4\xA0 a"}));
  const Tokenizer spm(spm_spec(true));
  // Bias towards the characters the vocabularies know so merges happen.
  const std::string common = "abc  \n\t'1x";  // 10 characters
  for (int k = 0; k < 200; ++k) {
    std::string s;
    const int n = length(rng);
    for (int i = 0; i < n; ++i)
      s += pick(rng) < 6 ? common[static_cast<std::size_t>(pick(rng))]
                         : static_cast<char>(byte(rng));
    CHECK(bpe.decode(bpe.encode(s)) == s);
    CHECK(spm.decode(spm.encode(s, true)) == s);
  }
}
