// The tokenizers of the real models: stories260K (SentencePiece-style BPE with
// scores) and SmolLM2-135M (byte-level BPE with the "smollm" pre-tokenizer),
// read from their GGUF files.
//
// Expected ids were produced by independent implementations, not by this
// one: for stories260K, the `sentencepiece` Python package (0.2) running a BPE
// ModelProto built from the GGUF's pieces, scores and types (byte fallback,
// dummy prefix, no whitespace folding); for SmolLM2, the Hugging Face
// `tokenizers` package (0.23) with the GGUF's vocab and merges and
// SmolLM2's pre-tokenizer (Digits(individual_digits) + ByteLevel).

#include <bosch/error.hpp>
#include <bosch/model/gguf.hpp>
#include <bosch/model/tokenizer.hpp>

#include "test_support.hpp"

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

using bosch::model::Tokenizer;
using bosch::model::TokenizerSpec;

struct Case {
  const char* text;
  std::vector<int> ids;
};

Tokenizer load(const std::filesystem::path& path) {
  const bosch::model::gguf::File file(path);
  return Tokenizer(bosch::model::tokenizer_spec_from_gguf(file));
}

/// The first `bytes` bytes of an Austen novel from the fixtures ("" if absent).
std::string austen(std::size_t bytes, const char* name = "text/emma.txt") {
  const auto path = bosch::test::fixture(name);
  if (path.empty()) return {};
  std::ifstream in(path, std::ios::binary);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  REQUIRE(text.size() >= bytes);
  return text.substr(0, bytes);
}

const char* const kMixed =
    "\xC3\xA9migr\xC3\xA9 na\xC3\xAFve caf\xC3\xA9 \xE2\x80\x94 \xE2\x80\x9Cquotes\xE2\x80\x9D "
    "\xF0\x9F\xA6\x99 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E";  // émigré naïve café — “quotes” 🦙 日本語
const char* const kAusten =
    "It is a truth universally acknowledged, that a single man in possession of a good "
    "fortune, must be in want of a wife.";

}  // namespace

TEST_CASE("tokenizer: stories260K SentencePiece BPE matches sentencepiece") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  if (path.empty()) return;
  const Tokenizer tok = load(path);
  REQUIRE(tok.spec().kind == TokenizerSpec::Kind::spm);
  CHECK(tok.vocab_size() == 512);
  CHECK(tok.bos() == 1);
  CHECK(tok.eos() == 2);

  const std::vector<Case> cases = {
      {"Hello world", {346, 306, 414, 263, 304, 341}},
      {" Hello world", {410, 346, 306, 414, 263, 304, 341}},
      {"Hello, world! 12345 3.14",
       {346, 306, 414, 432, 263, 304, 341, 443, 410, 475, 479, 472, 484, 480, 410, 472, 426, 475,
        484}},
      {"Once upon a time, there was a little girl named Lily.",
       {403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426}},
      {"  two  spaces\tand tabs\n\nnewlines",
       {410, 410, 259, 424, 414, 410, 262, 427, 412, 331, 419, 12, 412, 264, 259, 412, 430, 419,
        13, 13, 416, 411, 424, 421, 271, 406}},
      {kMixed, {410, 485, 423, 333, 420, 485, 297, 412, 198, 178, 360, 280, 412, 431, 485, 410,
                481, 410, 465, 456, 425, 309, 406, 466, 410, 243, 162, 169, 156, 410, 233, 154,
                168, 233, 159, 175, 235, 173, 161}},
      {kAusten, {359, 413, 410, 293, 261, 259, 420, 323, 415, 318, 416, 417, 330, 419, 388, 422,
                 261, 340, 416, 327, 421, 266, 428, 266, 432, 351, 261, 262, 299, 305, 284, 303,
                 322, 282, 414, 419, 372, 419, 419, 417, 289, 373, 261, 298, 347, 418, 387, 413,
                 379, 411, 432, 284, 425, 356, 329, 322, 391, 373, 261, 263, 417, 431, 411, 426}},
      {"<|im_start|>user\nHi<|im_end|>",
       {410, 504, 506, 288, 98, 356, 295, 413, 506, 505, 425, 419, 285, 13, 440, 417, 504, 506,
        288, 98, 367, 506, 505}},
      {"x", {410, 444}},
  };
  for (const Case& c : cases) {
    CHECK_MESSAGE(tok.encode(c.text) == c.ids, "\"" << c.text << "\"");
    CHECK(tok.decode(tok.encode(c.text)) == c.text);
  }

  SUBCASE("BOS, control tokens and the space prefix") {
    const auto plain = tok.encode("Hello world");
    auto with_bos = tok.encode("Hello world", /*add_special=*/true);
    REQUIRE(with_bos.size() == plain.size() + 1);
    CHECK(with_bos.front() == 1);
    CHECK(std::equal(plain.begin(), plain.end(), with_bos.begin() + 1));
    CHECK(tok.encode("", true) == std::vector<int>{1});
    CHECK(tok.encode("").empty());
    // The leading space that encoding added is dropped after BOS too.
    CHECK(tok.decode(with_bos) == "Hello world");
    CHECK(tok.decode(with_bos, /*keep_special=*/true) == "<s>Hello world");
    // "<s>" in the text is BOS only when special tokens are parsed; the text
    // after a special token gets its own space prefix, as in llama.cpp.
    const auto parsed = tok.encode("<s>Hello world", false, /*parse_special=*/true);
    CHECK(parsed == with_bos);
    const auto literal = tok.encode("<s>Hello world");
    CHECK(literal.front() != 1);
    CHECK(tok.decode(literal) == "<s>Hello world");
    CHECK(tok.piece(tok.token_id("\xE2\x96\x81He")) == " He");  // "▁He"
    CHECK(tok.piece(0x41 + 3) == "A");  // byte token <0x41>
    CHECK(tok.is_special(0));           // <unk>
    CHECK(!tok.is_special(346));
  }

  SUBCASE("Austen text round-trips exactly") {
    const std::string text = austen(20000);
    if (text.empty()) return;
    const auto ids = tok.encode(text, true);
    CHECK(ids.size() > text.size() / 4);  // a 512-token vocabulary: short tokens
    CHECK(tok.decode(ids) == text);
  }
}

TEST_CASE("tokenizer: SmolLM2 byte-level BPE matches Hugging Face tokenizers") {
  const auto path = bosch::test::default_model();
  if (path.empty()) return;
  const Tokenizer tok = load(path);
  REQUIRE(tok.spec().kind == TokenizerSpec::Kind::byte_bpe);
  CHECK(tok.spec().pre == "smollm");
  CHECK(tok.vocab_size() == 49152);

  const std::vector<Case> cases = {
      {"Hello world", {19556, 905}},
      {" Hello world", {38699, 905}},
      {"Hello, world! 12345 3.14", {19556, 28, 905, 17, 216, 33, 34, 35, 36, 37, 216, 35, 30, 33,
                                    36}},
      {"Once upon a time, there was a little girl named Lily.",
       {6403, 1980, 253, 655, 28, 665, 436, 253, 1838, 8180, 3365, 14176, 30}},
      {"  two  spaces\tand tabs\n\nnewlines",
       {216, 827, 216, 5600, 197, 397, 29416, 198, 198, 2241, 5110}},
      {kMixed, {2756, 22757, 27968, 15486, 46494, 37366, 1841, 619, 385, 2346, 573, 15107, 116,
                243, 17097, 241, 115, 40993, 179, 120, 248}},
      {kAusten, {1589, 314, 253, 4569, 21902, 14494, 28, 338, 253, 2244, 555, 281, 13932, 282,
                 253, 1123, 18598, 28, 1251, 325, 281, 1277, 282, 253, 6221, 30}},
      {"<|im_start|>user\nHi<|im_end|>",
       {44, 108, 306, 79, 3738, 108, 46, 4093, 198, 26843, 44, 108, 306, 79, 486, 108, 46}},
      {"x", {104}},
  };
  for (const Case& c : cases) {
    CHECK_MESSAGE(tok.encode(c.text) == c.ids, "\"" << c.text << "\"");
    CHECK(tok.decode(tok.encode(c.text)) == c.text);
  }

  SUBCASE("chat control tokens with parse_special") {
    const int im_start = tok.token_id("<|im_start|>");
    const int im_end = tok.token_id("<|im_end|>");
    REQUIRE(im_start >= 0);
    REQUIRE(im_end >= 0);
    const auto ids = tok.encode("<|im_start|>user\nHi<|im_end|>", false, /*parse_special=*/true);
    REQUIRE(ids.size() >= 3);
    CHECK(ids.front() == im_start);
    CHECK(ids.back() == im_end);
    // The text between them is encoded as ordinary text.
    const auto inner = tok.encode("user\nHi");
    CHECK(std::vector<int>(ids.begin() + 1, ids.end() - 1) == inner);
    CHECK(tok.decode(ids) == "user\nHi");
    CHECK(tok.decode(ids, /*keep_special=*/true) == "<|im_start|>user\nHi<|im_end|>");
    // SmolLM2's GGUF asks for no BOS.
    CHECK(tok.encode("Hi", true) == tok.encode("Hi"));
  }

  SUBCASE("100 KB of Austen round-trips, fast") {
    const std::string text = austen(100 * 1024, "text/prideprejudice.txt");
    if (text.empty()) return;
    const auto start = std::chrono::steady_clock::now();
    const auto ids = tok.encode(text);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MESSAGE("SmolLM2: 100 KB -> " << ids.size() << " tokens in " << seconds * 1e3 << " ms");
    CHECK(seconds < 1.0);  // requirement: well under a second (typically ~0.05 s here)
    CHECK(ids.size() > text.size() / 8);
    CHECK(ids.size() < text.size() / 3);
    CHECK(tok.decode(ids) == text);
  }
}
